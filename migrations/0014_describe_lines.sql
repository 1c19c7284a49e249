-- Durable, bought: one line per motif spelling saying what it names (passes/describe.py), written by the
-- model from the carriers shown to it. Keyed by the spelling, a fingerprint of what it was shown of them,
-- the model and the prompt version: written again only when that key changes. Journalled in
-- .knomit/verdicts/describe.jsonl, so `rebuild` and a fresh clone restore every line without a call.
CREATE TABLE lines (
    spelling TEXT NOT NULL,
    carriers TEXT NOT NULL,         -- fingerprint of the shown carriers' titles and cut bodies
    model TEXT NOT NULL,            -- the model that wrote it (scripted:FILE for recorded lines)
    prompt TEXT NOT NULL,           -- describe@N
    line TEXT NOT NULL,
    judge TEXT NOT NULL,            -- anthropic | scripted
    session TEXT,
    cost_usd REAL,                  -- its share of the request's cost; NULL when the cost is unknown
    created_at TEXT NOT NULL,
    PRIMARY KEY (spelling, carriers, model, prompt)
);
