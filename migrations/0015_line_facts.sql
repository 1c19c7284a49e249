-- The facts a describe line was written from (a JSON list of paths, in the order shown), so the next session
-- shows the same ones while they all still carry the spelling: a new carrier does not buy the line again
-- (passes/describe.py, shown()). '[]' for lines written before this column: chosen afresh, by path order.
ALTER TABLE lines ADD COLUMN facts TEXT NOT NULL DEFAULT '[]';
