"""Numbered schema migrations: the SQL files in migrations/, applied in order and recorded in the db."""

import re
from pathlib import Path

import sqlite_utils
from sqlite_utils import Migrations

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

migrations = Migrations("knomit_judge")


def _register(sql_file: Path):
    @migrations(name=f"m{sql_file.stem}")
    def apply(db: sqlite_utils.Database):
        # executescript would COMMIT the surrounding transaction; run statement by statement instead.
        # No string literal in our SQL files holds "--" or ";", so dropping comments and splitting is safe.
        sql = re.sub(r"--[^\n]*", "", sql_file.read_text(encoding="utf-8"))
        for statement in sql.split(";"):
            if statement.strip():
                db.execute(statement)


for _file in sorted(MIGRATIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql")):
    _register(_file)


def migrate(db: sqlite_utils.Database) -> None:
    """Apply every pending migration; each runs atomically with its record."""
    migrations.apply(db)
