-- The candidate's score when its question was asked: the worth rule (worth.py) fits each pass's chance of
-- resolving something by score on it. Journalled with the verdict, so `rebuild` gives it back; NULL before.
ALTER TABLE verdicts ADD COLUMN score REAL;
