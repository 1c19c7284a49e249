-- The model each Message Batch request asks: a batch session's first reader reads its questions in the batch
-- (at its own batch price), and its yeses and the audits go to the judge model in a later one. A result is
-- priced and cached as that model's. NULL: submitted before this migration, by the judge model alone.
ALTER TABLE batch_requests ADD COLUMN model TEXT;
