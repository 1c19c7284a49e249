-- Which commit applied a verdict, and reverts; both also recoverable from git log trailers.
ALTER TABLE verdicts ADD COLUMN commit_sha TEXT;
ALTER TABLE verdicts ADD COLUMN reverted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE verdicts ADD COLUMN revert_reason TEXT;
