-- Derived: each stored neighbour search (shortlist.top_k), so a session searches only rows that changed.
-- `rebuild` empties it; the next search recomputes it.
CREATE TABLE neighbour_sets (
    id INTEGER PRIMARY KEY,
    k INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    digest TEXT NOT NULL,           -- of all row keys in order: an unchanged vector set is found by this alone
    keys BLOB NOT NULL,             -- 16 bytes a row: a digest of its vector (model and text decide it)
    neighbours BLOB NOT NULL,       -- int64 (rows, min(k, rows - 1)): row positions, best first
    sims BLOB NOT NULL,             -- float64, the same shape: canonical similarities
    used_at TEXT NOT NULL
);

-- The file index trusts an unchanged stat without reading the file only when the file was last
-- changed (ctime) well before the index row was written: an edit in the same clock tick is re-read.
ALTER TABLE files ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN checked_ns INTEGER NOT NULL DEFAULT 0;
