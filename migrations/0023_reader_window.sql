-- The first reader judged by all it did (issue 51). Each session's record of a pass's first reader (audit_draws,
-- now journalled): how many questions it read, yeses included, so a reader with no no's still has a window; and
-- whether it read or, suspended, read only its shadow sample. NULL: written before this migration, a reading one.
ALTER TABLE audit_draws ADD COLUMN reads INTEGER;
ALTER TABLE audit_draws ADD COLUMN state TEXT;        -- reading | shadow
-- A shadow read (kind 'shadow'): the first reader's answer to a question the judge model read while it was
-- suspended, never acted on. Whether each said yes (the answers alone do not say it without the pass's default).
ALTER TABLE audits ADD COLUMN first_yes INTEGER;
ALTER TABLE audits ADD COLUMN strong_yes INTEGER;
