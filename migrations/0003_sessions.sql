-- Durable: session history and the throttle's per-pass record of each session.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    passes TEXT NOT NULL DEFAULT '{}',   -- JSON: per-pass counts and state
    cost_usd REAL,                       -- NULL: unknown (incomplete)
    commits TEXT NOT NULL DEFAULT '[]'
);

CREATE TABLE throttle (
    session TEXT NOT NULL,
    pass TEXT NOT NULL,
    state TEXT NOT NULL,
    allowance INTEGER,                   -- NULL: unlimited
    offered INTEGER NOT NULL DEFAULT 0,
    judged INTEGER NOT NULL DEFAULT 0,
    resolved INTEGER NOT NULL DEFAULT 0,
    probe_due INTEGER NOT NULL DEFAULT 0,
    probe_spent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session, pass)
);
