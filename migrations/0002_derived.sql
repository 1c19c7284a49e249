-- Derived: `knomit-judge rebuild` reproduces these from the corpus.
CREATE TABLE embeddings (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,           -- float32, normalised
    PRIMARY KEY (model, text_hash)
);

CREATE TABLE files (
    path TEXT PRIMARY KEY,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    content_id TEXT NOT NULL,
    record TEXT NOT NULL            -- JSON of the parsed fact
);
