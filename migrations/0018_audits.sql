-- The judge model's second reading of a question the first reader answered (asking.py): an audit of a no,
-- or the confirmation of a yes. A strong yes on an audited no is a miss; too many misses in the last audits
-- suspend the first reader for the pass. Kept with the sessions: lost with the db, the window starts empty.
CREATE TABLE IF NOT EXISTS audits (
    pass TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    session TEXT NOT NULL,
    kind TEXT NOT NULL,            -- 'audit' (a first no read again) or 'confirm' (a first yes read again)
    first_model TEXT NOT NULL,
    strong_model TEXT NOT NULL,
    first_answer TEXT NOT NULL,
    strong_answer TEXT NOT NULL,
    miss INTEGER NOT NULL,         -- an audit whose strong answer is not the default
    score REAL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audits_pass ON audits (pass, created_at);
