"""The file index: parsed facts kept by stat and content id, so an unchanged fact file is not parsed again."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any, Protocol

import sqlite_utils

from . import interrupts
from .corpus import Fact, content_id, fact_from_record
from .jsonl import dumps
from .verdicts import now_text


class HasDb(Protocol):
    """What the index needs of a store: its db (the index keeps the `files` table)."""

    db: sqlite_utils.Database


class FileIndex:
    """Derived: parsed facts keyed by (path, mtime, size, ctime), so unchanged files are not parsed again.

    A hit is verified by content id (the file is read and hashed; the YAML parse is what is skipped),
    and the time of that check is kept. Once a file's last change (ctime, which no tool can set back)
    is older than a verified check by RACY_NS, a matching stat alone answers it, unread, as git does:
    a caught-up session reads no fact file at all.
    """

    # larger than any file system's timestamp tick: an edit in the same tick is re-read
    RACY_NS = 2_000_000_000

    def __init__(self, store: HasDb) -> None:
        self.db = store.db
        self.rows = {
            r[0]: r
            for r in self.db.execute(
                "SELECT path, mtime_ns, size, record, content_id, ctime_ns, checked_ns, changed_at FROM files"
            )
        }
        self.pending: dict[str, dict[str, Any]] = {}
        # facts this session's decisions rewrote: their change counts from the next
        self.written: set[str] = set()
        # corpus.parse_key of the layout: a parse made under other settings is not reused
        self.parse_key = ""
        # (ctime_ns, checked_ns, path) of files verified by reading
        self.checked: list[tuple[int, int, str]] = []
        # facts taken from the index this session, unparsed
        self.reused = 0
        # facts parsed (and remembered) this session
        self.parsed = 0
        # of the reused, files read to verify their content id (the rest: stat alone)
        self.read = 0
        # paths the index held that left the corpus (forget_missing), deleted on save
        self.gone: list[str] = []
        self.looked = 0  # lookups this session

    def lookup(self, root: Path, path: str) -> Fact | None:
        self.looked += 1
        # a 100k corpus takes seconds to load: a stop asked for is seen within it
        if not self.looked % 512:
            interrupts.check()
        row = self.rows.get(path)
        if not row:
            return None
        # a string, not pathlib or os.path.join: this runs once per fact, 100k times at scale
        full = f"{root}/{path}"
        st = os.lstat(full)
        if (st.st_mtime_ns, st.st_size) != (row[1], row[2]) or stat.S_ISLNK(st.st_mode):
            return None
        record = json.loads(row[3])
        if record.pop("parse_key", "") != self.parse_key:
            return None
        if st.st_ctime_ns != row[5] or st.st_ctime_ns + self.RACY_NS >= row[6]:
            began = time.time_ns()
            try:
                with open(full, "rb") as f:
                    if content_id(f.read().decode("utf-8")) != row[4]:
                        return None
            except UnicodeDecodeError:
                # read_fact will name the problem
                return None
            self.read += 1
            self.checked.append((st.st_ctime_ns, began, path))
        self.reused += 1
        return fact_from_record(record)

    def remember(self, root: Path, fact: Fact, parsed: bool = True) -> None:
        """Index a fact as read (parsed) or as the session just wrote it (parsed=False: not a parse of a read)."""
        self.parsed += parsed
        if not parsed:
            self.written.add(fact.path)
        st = (root / fact.path).stat()
        record = {**fact.record(), "parse_key": self.parse_key}
        prior = self.rows.get(fact.path)
        # touched or re-parsed with the same content is no change: only a new content id makes a question fresh
        changed = prior[7] if prior and prior[4] == fact.content_id else now_text()
        self.pending[fact.path] = dict(
            path=fact.path,
            mtime_ns=st.st_mtime_ns,
            size=st.st_size,
            # read before this stat: verify next time
            ctime_ns=st.st_ctime_ns,
            checked_ns=0,
            content_id=fact.content_id,
            record=dumps(record, ensure_ascii=False),
            changed_at=changed,
        )

    def changed_since(self, since: str) -> set[str]:
        """Paths whose content changed after `since` (a UTC timestamp), saved or read this session.

        Not what this session's own decisions wrote: those are changes for the next session.
        """
        return (
            {r[0] for r in self.db.execute("SELECT path FROM files WHERE changed_at > ?", [since])}
            | {path for path, row in self.pending.items() if row["changed_at"] and row["changed_at"] > since}
        ) - self.written

    def forget_missing(self, present: set[str]) -> None:
        """Called once the corpus is loaded: note what left it, and drop the rows (~1.5 kB a fact)."""
        self.gone = [p for p in self.rows if p not in present]
        self.rows = {}

    def save(self) -> None:
        with self.db.atomic():
            if self.pending:
                self.db.table("files").insert_all(self.pending.values(), replace=True, batch_size=500)
            if self.checked:
                self.db.conn.executemany("UPDATE files SET ctime_ns = ?, checked_ns = ? WHERE path = ?", self.checked)
            for path in self.gone:
                self.db.execute("DELETE FROM files WHERE path = ?", [path])
        self.pending, self.checked = {}, []
