-- Durable: what each session read of the corpus (state, paths, files, read, skipped, why), as JSON.
-- NULL for sessions recorded before this migration.
ALTER TABLE sessions ADD COLUMN corpus TEXT;
