-- Durable: questions the API refused for their content (HTTP 400, 413). Never verdicts: a refused
-- question is asked again only when its fingerprint or the prompt version changes.
CREATE TABLE refusals (
    pass TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    model TEXT NOT NULL,            -- the model that refused (for the record)
    prompt TEXT NOT NULL,           -- name@version
    subject TEXT NOT NULL,          -- JSON, as on verdicts
    error TEXT NOT NULL,            -- the API's message (never the key)
    session TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (pass, fingerprint, prompt)
);

-- Durable, bought: Message Batches submitted and not yet collected, and the requests in each,
-- written before `review --batch` returns, so a killed session's batch is collected by the next one.
CREATE TABLE batches (
    id TEXT PRIMARY KEY,            -- the API's message batch id
    model TEXT NOT NULL,
    session TEXT,
    requests INTEGER NOT NULL,
    status TEXT NOT NULL,           -- submitted | collected | lost (the API no longer has it)
    submitted_at TEXT NOT NULL,
    collected_at TEXT
);

CREATE TABLE batch_requests (
    batch_id TEXT NOT NULL,
    custom_id TEXT NOT NULL,        -- the request's reply-cache key
    pass TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    prompt TEXT NOT NULL,           -- name@version
    PRIMARY KEY (batch_id, custom_id)
);
CREATE INDEX batch_requests_pass ON batch_requests (pass, fingerprint);
