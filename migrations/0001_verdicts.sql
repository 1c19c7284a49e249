-- Durable, bought: every verdict (yes and no) and every parsed judge reply.
CREATE TABLE verdicts (
    id TEXT PRIMARY KEY,
    pass TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    subject TEXT NOT NULL,          -- JSON: {"a":..,"b":..} or {"group":[..]}
    answer TEXT NOT NULL,           -- same/different, merge/retract/distinct, yes/no
    is_yes INTEGER NOT NULL,
    rationale TEXT NOT NULL DEFAULT '',
    payload TEXT,                   -- JSON: the proposed fact of a discovery yes
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,           -- name@version
    attempts INTEGER NOT NULL DEFAULT 1,
    calls INTEGER NOT NULL DEFAULT 0,
    agreement REAL,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,                  -- NULL: unknown
    replies TEXT NOT NULL DEFAULT '[]',  -- JSON list of the raw reply texts
    session TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX verdicts_fingerprint ON verdicts (pass, fingerprint);

CREATE TABLE replies (
    key TEXT PRIMARY KEY,           -- sha256(model | prompt name@version | exact prompt text)
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    created_at TEXT NOT NULL
);
