-- What every session asks of the verdicts besides the answered fingerprints: the yeses not yet applied,
-- and the reverted ones. Partial indexes keep these from scanning ~340k verdicts at 100k facts.
CREATE INDEX verdicts_unapplied ON verdicts (pass, judge) WHERE is_yes = 1 AND reverted = 0 AND commit_sha IS NULL;
CREATE INDEX verdicts_reverted ON verdicts (id) WHERE reverted = 1;
-- The throttle reads each pass's newest verdicts (throttle.recent_outcomes, store.history): without these
-- every session sorted all of a pass's verdicts.
CREATE INDEX verdicts_recent ON verdicts (pass, judge, created_at);
CREATE INDEX verdicts_recent_any ON verdicts (pass, created_at);

-- Derived: how far each journal file was imported into this db (recovery.sync_journal), so a session
-- reads only lines appended since, not ~340k lines at 100k facts. A file whose first `size` bytes no
-- longer hash to `digest` (a git operation rewrote it) is read whole again. `rebuild` empties it.
CREATE TABLE journal_marks (
    name TEXT PRIMARY KEY,          -- the file name in .knomit/verdicts/
    size INTEGER NOT NULL,          -- bytes imported: up to the end of the last complete line
    digest TEXT NOT NULL,           -- sha256 of those bytes
    mtime_ns INTEGER NOT NULL,      -- the file's stat when it was imported: unchanged (and not racy), it is not read
    ctime_ns INTEGER NOT NULL,
    checked_ns INTEGER NOT NULL
);
