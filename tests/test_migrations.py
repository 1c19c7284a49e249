"""Numbered migrations: a blank db gets every table; an older db is upgraded without losing rows."""

import sqlite_utils

from knomit_judge.migrations import MIGRATIONS_DIR, migrate, migrations
from knomit_judge.store import Store
from knomit_judge.verdicts import Verdict


def test_blank_db_gets_every_table_and_records_each_migration(db_path):
    Store(db_path).close()
    db = sqlite_utils.Database(db_path)
    assert {"verdicts", "replies", "embeddings", "files", "sessions", "throttle"} <= set(db.table_names())
    assert {"id", "pass", "fingerprint", "answer", "is_yes", "rationale", "model", "prompt", "attempts",
            "tokens_in", "tokens_out", "cost_usd", "commit_sha", "reverted"} <= set(db["verdicts"].columns_dict)
    applied = [r["name"] for r in db["_sqlite_migrations"].rows]
    files = sorted(p.stem for p in MIGRATIONS_DIR.glob("*.sql"))
    assert applied == [f"m{name}" for name in files]


def test_db_made_at_an_older_migration_is_upgraded_keeping_its_verdicts(db_path):
    db = sqlite_utils.Database(db_path)
    migrations.apply(db, stop_before="m0004_applied")
    assert "commit_sha" not in db["verdicts"].columns_dict
    db["verdicts"].insert({"id": "vold", "pass": "alias", "fingerprint": "f", "subject": "{}", "answer": "same",
                           "is_yes": 1, "model": "m", "prompt": "alias@1", "created_at": "2026-01-01"})
    db.close()
    store = Store(db_path)
    v = store.verdict("vold")
    assert isinstance(v, Verdict) and v.answer == "same" and v.commit_sha is None and not v.reverted
    migrate(store.db)  # idempotent
    assert store.db["verdicts"].count == 1
