-- Derived: each judged pass's latest candidate list (candidate_lists.py), kept under a digest of its
-- inputs (facts' content ids, motif keys, embedding model, settings, code), so a session on an unchanged
-- corpus reads it back instead of computing it. `rebuild` empties it; the next session recomputes it.
CREATE TABLE candidate_lists (
    pass TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    shape TEXT NOT NULL,            -- pair ({"a", "b"}) or group ({"group": [...]})
    count INTEGER NOT NULL,
    names BLOB NOT NULL,            -- UTF-8, NUL-separated: each path or spelling once
    members BLOB NOT NULL,          -- int32 indices into names, candidate after candidate
    offsets BLOB NOT NULL,          -- int64 (count + 1): where each candidate's members start
    fingerprints BLOB NOT NULL,     -- ASCII, NUL-separated
    scores BLOB NOT NULL,           -- float64 (count)
    made_at TEXT NOT NULL
);

