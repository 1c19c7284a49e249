"""What survives what: recovery at every start brings the db in line with the journal and git."""

from __future__ import annotations

import logging
from pathlib import Path

from .gitops import Applier, Lock, applied_commits, open_repo, trailer_values
from .passes.describe import Line
from .store import Store
from .sync import clear_ref_locks, recover_merge
from .verdicts import Journal

log = logging.getLogger(__name__)


def recover(root: Path, repo, store: Store, lock: Lock | None = None, keep_marks: bool = False) -> list[str]:
    """Make corpus, journal and db agree after whatever happened to the last session.

    1. A decision half-applied by a killed session is rolled back to HEAD (its
       verdict is in the journal, so the next pass applies it again); a revert
       half-done is rolled back with its journal line. Git lock files the kill
       left are removed. A merge of the remote branch the session started ([git] remote) is finished or
       undone; a merge a person started is left alone.
    2. Journal lines the db lacks (a lost db, or a kill between the two writes)
       are imported: the journal is written first and is the durable copy.
    3. Which verdicts were applied or reverted is read back from the commit trailers.
    Every step is idempotent, so a kill during recovery is recovered by the next start.
    `keep_marks` (a review session, which writes the db anyway) stores how far the journal was read;
    other commands only use the marks, so a command that fails writes nothing.
    """
    notes = []
    if lock is not None and lock.stale:
        notes.append(f"took over a stale lock: {lock.stale} is gone")
    message = Applier(repo).recover()
    if message:
        log.warning("%s", message)
        notes.append(message)
    if merged := recover_merge(repo):  # a merge of the remote branch a kill left in progress: ours only
        notes.append(merged)
    if lock is not None and lock.stale:  # killed mid-fetch or mid-push: its ref lock would block every sync
        notes += clear_ref_locks(repo)
    imported = sync_journal(root, store, keep_marks)
    if imported:
        notes.append(f"imported {imported} verdict(s) from the journal")
    sync_git(repo, store)
    return notes


def recover_corpus(root: Path | str) -> list[str]:
    """Recovery alone, as every session's start runs it (under the lock); returns what it did."""
    root = Path(root).resolve()
    repo = open_repo(root)
    with Lock(repo) as lock:
        store = Store.for_corpus(root)
        try:
            return recover(root, repo, store, lock)
        finally:
            store.close()


def sync_journal(root: Path, store: Store, keep_marks: bool = True) -> int:
    """Import journal lines the db lacks (verdicts, reverts, describe lines); only lines appended since the
    last kept marks are read."""
    marks = store.journal_marks()
    verdicts, reverts, lines = Journal(root).entries(marks)
    store.import_lines([x for x in map(Line.from_record, lines) if x is not None])
    known = store.known_ids([v.id for v in verdicts])
    fresh = [v for v in verdicts if v.id not in known]
    for v in fresh:
        store.add_verdict(v)
    reverted = _reverted(store)
    for vid, reason in reverts.items():
        if vid not in reverted:
            store.mark_reverted(vid, reason)
    if keep_marks:
        store.put_journal_marks(marks)  # only once imported: a kill before this reads the lines again
    return len(fresh)


def sync_git(repo, store: Store) -> None:
    applied = applied_commits(repo)
    # of the verdicts git says were applied, those the db lacks the commit of (one per decision, so few)
    unapplied = store.known_ids(list(applied), where="commit_sha IS NULL")
    for vid, sha in applied.items():
        if vid in unapplied:
            store.mark_applied(vid, sha)
    reverted = _reverted(store)  # the journal's reason, when it has one, is kept
    for vid in trailer_values(repo, "Knomit-Reverts"):
        if vid not in reverted:
            store.mark_reverted(vid, "reverted (from git history)")


def _reverted(store: Store) -> set[str]:
    return {r[0] for r in store.db.execute("SELECT id FROM verdicts WHERE reverted = 1")}
