"""Numbered migrations: a blank db gets every table; an older db is upgraded without losing rows."""

import sqlite_utils

from knomit_judge.migrations import MIGRATIONS_DIR, TABLES, migrate, migration_set
from knomit_judge.store import Store
from knomit_judge.verdicts import Verdict


def test_blank_db_gets_every_table_and_records_each_migration(db_path):
    Store(db_path).close()
    db = sqlite_utils.Database(db_path)
    # the start-up check's list is every table the migrations make (a new table belongs in migrations.TABLES)
    assert set(db.table_names()) - {"_sqlite_migrations"} == TABLES
    assert {
        "id",
        "pass",
        "fingerprint",
        "answer",
        "is_yes",
        "rationale",
        "model",
        "prompt",
        "attempts",
        "tokens_in",
        "tokens_out",
        "cost_usd",
        "commit_sha",
        "reverted",
    } <= set(db["verdicts"].columns_dict)
    applied = [r["name"] for r in db["_sqlite_migrations"].rows]
    files = sorted(p.name.removesuffix(".sql") for p in MIGRATIONS_DIR.iterdir() if p.name.endswith(".sql"))
    assert applied == [f"m{name}" for name in files]


def test_db_made_at_an_older_migration_is_upgraded_keeping_its_verdicts(db_path):
    db = sqlite_utils.Database(db_path)
    migration_set().apply(db, stop_before="m0004_applied")
    assert "commit_sha" not in db["verdicts"].columns_dict
    db["verdicts"].insert(
        {
            "id": "vold",
            "pass": "alias",
            "fingerprint": "f",
            "subject": "{}",
            "answer": "same",
            "is_yes": 1,
            "model": "m",
            "prompt": "alias@1",
            "created_at": "2026-01-01",
        }
    )
    db.close()
    store = Store(db_path)
    v = store.verdict("vold")
    assert isinstance(v, Verdict) and v.answer == "same" and v.commit_sha is None and not v.reverted
    migrate(store.db)  # idempotent
    assert store.db["verdicts"].count == 1


def test_0007_gives_old_rows_the_judge_kind_their_model_names(db_path):
    db = sqlite_utils.Database(db_path)
    migration_set().apply(db, stop_before="m0007_judge_kind")
    row = {"subject": "{}", "answer": "different", "is_yes": 0, "prompt": "alias@1", "created_at": "2026-01-01"}
    db["verdicts"].insert_all(
        [
            {**row, "id": "vreal", "pass": "alias", "fingerprint": "f1", "model": "claude-sonnet-4-5", "session": "s1"},
            {
                **row,
                "id": "vscript",
                "pass": "alias",
                "fingerprint": "f2",
                "model": "scripted:replies.jsonl",
                "session": "s2",
            },
            {**row, "id": "vexact", "pass": "exact", "fingerprint": "f3", "model": "mechanical", "session": "s2"},
        ]
    )
    db["replies"].insert_all(
        [
            {"key": k, "model": m, "prompt": "alias@1", "text": "{}", "created_at": "2026-01-01"}
            for k, m in (("k1", "claude-sonnet-4-5"), ("k2", "scripted:replies.jsonl"))
        ]
    )
    db["throttle"].insert_all([{"session": s, "pass": "alias", "state": "optimistic"} for s in ("s1", "s2")])
    db.close()
    store = Store(db_path)
    assert {v.id: v.judge for v in store.verdicts()} == {
        "vreal": "anthropic",
        "vscript": "scripted",
        "vexact": "mechanical",
    }
    assert store.answered("alias", "anthropic") == {"f1"} and store.answered("alias", "scripted") == {"f2"}
    assert store.cached_reply("k2", "anthropic") is None and store.cached_reply("k2", "scripted")["text"] == "{}"
    assert [r["session"] for r in store.throttle_rows("alias", judge="scripted")] == ["s2"]
    store.close()
