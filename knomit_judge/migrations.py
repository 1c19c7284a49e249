"""Numbered schema migrations: the SQL files in migrations/, applied in order and recorded in the db.

The package ships migrations/ as knomit_judge/data/migrations (a symlink in the clone, files in the wheel),
read through importlib.resources. None found, or a db left without a table the code reads, is a broken
install said as such (exit 2), never a db that opens empty and fails later.
"""

import functools
import re
from importlib import resources
from importlib.resources.abc import Traversable

import sqlite_utils
from sqlite_utils import Migrations

from .errors import MissingResource

MIGRATIONS_DIR = resources.files("knomit_judge") / "data" / "migrations"
SET_NAME = "knomit_judge"
# Every table the code reads or writes: a db without one of them was migrated from an incomplete set of files.
TABLES = frozenset(
    {
        "verdicts",
        "replies",
        "embeddings",
        "files",
        "sessions",
        "throttle",
        "calibrations",
        "refusals",
        "batches",
        "batch_requests",
        "neighbour_sets",
        "candidate_lists",
        "journal_marks",
        "lines",
        "models",
        "audits",
        "audit_draws",
    }
)
# Columns a later migration adds to a table an earlier one made: without them the set was incomplete too.
COLUMNS = {
    "lines": frozenset({"facts", "tries", "why"}),
    "batch_requests": frozenset({"model"}),
    "verdicts": frozenset({"score", "audit"}),
    "audits": frozenset({"verdict", "pi", "stratum", "born", "cost_usd", "first_yes", "strong_yes"}),
    "audit_draws": frozenset({"reads", "state"}),
}
_FILE = re.compile(r"[0-9]{4}_\w+\.sql")


@functools.cache
def migration_set() -> Migrations:
    """The shipped migrations, in order; raises MissingResource when the package holds none."""
    files = (
        sorted((f for f in MIGRATIONS_DIR.iterdir() if _FILE.fullmatch(f.name)), key=lambda f: f.name)
        if MIGRATIONS_DIR.is_dir()
        else []
    )
    if not files:
        raise MissingResource(f"migrations not found in the installed package ({MIGRATIONS_DIR})")
    migrations = Migrations(SET_NAME)
    for sql_file in files:
        _register(migrations, sql_file)
    return migrations


def _register(migrations: Migrations, sql_file: Traversable) -> None:
    """One SQL file as a migration of the set, named after the file."""

    @migrations(name=f"m{sql_file.name.removesuffix('.sql')}")
    def apply(db: sqlite_utils.Database) -> None:
        # executescript would COMMIT the surrounding transaction; run statement by statement instead.
        # No string literal in our SQL files holds "--" or ";", so dropping comments and splitting is safe.
        sql = re.sub(r"--[^\n]*", "", sql_file.read_text(encoding="utf-8"))
        for statement in sql.split(";"):
            if statement.strip():
                db.execute(statement)


def migrate(db: sqlite_utils.Database) -> None:
    """Apply every pending migration (each atomically with its record), then check the schema is complete."""
    migration_set().apply(db)
    if missing := sorted(TABLES - set(db.table_names())):
        raise MissingResource(
            f"the db's schema is incomplete (no table {', '.join(missing)}): the migrations in the "
            f"installed package ({MIGRATIONS_DIR}) are incomplete"
        )
    for table, columns in COLUMNS.items():
        if missing := sorted(columns - set(db[table].columns_dict)):
            raise MissingResource(
                f"the db's schema is incomplete (table {table} has no column {', '.join(missing)}): "
                f"the migrations in the installed package ({MIGRATIONS_DIR}) are incomplete"
            )
