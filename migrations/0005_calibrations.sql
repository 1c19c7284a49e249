-- Derived: the result of each `knomit-judge calibrate` run, for `knomit-judge report`.
-- Rerunning calibrate with the same labels reproduces it from the reply cache at no cost.
CREATE TABLE calibrations (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    labels TEXT NOT NULL,           -- the labels file as given
    model TEXT NOT NULL,            -- the judge that answered
    result TEXT NOT NULL            -- JSON: what `calibrate --json` prints
);
