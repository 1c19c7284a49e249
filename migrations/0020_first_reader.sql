-- The first reader as a measured instrument (asking.py, audits.py).
-- 1. A refusal is kept per model: one model's refusal never stops another model from reading the question.
CREATE TABLE refusals_by_model (
    pass TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    model TEXT NOT NULL,            -- the model that refused: only it is not asked again
    prompt TEXT NOT NULL,           -- name@version
    subject TEXT NOT NULL,          -- JSON, as on verdicts
    error TEXT NOT NULL,            -- the API's message (never the key)
    session TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (pass, fingerprint, model, prompt)
);
INSERT OR REPLACE INTO refusals_by_model SELECT pass, fingerprint, model, prompt, subject, error, session, created_at
    FROM refusals;
DROP TABLE refusals;
ALTER TABLE refusals_by_model RENAME TO refusals;

-- 2. An audit's inclusion probability, fixed before the session's seeded draw, kept with the judge model's
-- verdict (its `audit`, journalled) so a rebuild makes the same audit rows again.
ALTER TABLE verdicts ADD COLUMN audit TEXT;          -- JSON: kind, first model and answer, pi, stratum, score
ALTER TABLE audits ADD COLUMN verdict TEXT;          -- the judge model's verdict id: one row per verdict
ALTER TABLE audits ADD COLUMN pi REAL;               -- inclusion probability; NULL before this migration
ALTER TABLE audits ADD COLUMN stratum TEXT;          -- top | target | floor | standing | suspended | confirm
ALTER TABLE audits ADD COLUMN born TEXT;             -- the session whose first read gave the no (its draw)
ALTER TABLE audits ADD COLUMN cost_usd REAL;         -- what the judge model's reading cost
CREATE UNIQUE INDEX audits_verdict ON audits (verdict);

-- 3. Each session's draw per pass: the floor rate every new no faced, so the bound knows its frame.
CREATE TABLE audit_draws (
    session TEXT NOT NULL,
    pass TEXT NOT NULL,
    first_model TEXT NOT NULL,
    floor REAL NOT NULL,            -- the uniform floor's rate this session
    new INTEGER NOT NULL,           -- first-reader no's of this session, each facing the floor
    standing INTEGER NOT NULL,      -- older no's still in the pool
    expected REAL NOT NULL,         -- the sum of pi: audits expected
    created_at TEXT NOT NULL,
    PRIMARY KEY (session, pass)
);
