-- What the Models API said of each model a session calls (models.py): lifecycle, retirement date and
-- capabilities, kept a day. Derived: a lost row is read again at the next session, never bought.
CREATE TABLE IF NOT EXISTS models (
    id TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    fetched_at TEXT NOT NULL
);
