-- How many orders of a pair were asked, and each order's answer: a pair is asked in its second order
-- only when the first did not give the default, or when it falls in judge.swap_sample. The flip rate
-- is read from the default-first verdicts asked in both orders. NULL: recorded before orders were counted.
ALTER TABLE verdicts ADD COLUMN orders INTEGER;
ALTER TABLE verdicts ADD COLUMN by_position TEXT;

-- Which order a cached reply answered (0 first, 1 swapped); NULL: cached before orders were counted.
ALTER TABLE replies ADD COLUMN position INTEGER;

-- Derived: when a fact's content id last changed, as this db saw it, so a session can offer questions
-- about facts changed since the pass's last session before the backlog. NULL: before this migration.
ALTER TABLE files ADD COLUMN changed_at TEXT;

-- Which order each Message Batch request asked: a batch holds first orders, and second orders only for
-- questions in the swap sample or whose first order did not give the default.
ALTER TABLE batch_requests ADD COLUMN position INTEGER;
