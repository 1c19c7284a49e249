"""What survives what: recovery at every start, and `rebuild` of the db from the journal and the corpus."""

from __future__ import annotations

import logging
from pathlib import Path

from .corpus import load_corpus
from .embeddings import Embedder
from .gitops import Applier, Lock, applied_commits, open_repo, trailer_values
from .store import FileIndex, Store
from .verdicts import Journal

log = logging.getLogger(__name__)


def recover(root: Path, repo, store: Store) -> list[str]:
    """Make corpus, journal and db agree after whatever happened to the last session.

    1. A decision half-applied by a killed session is rolled back to HEAD (its
       verdict is in the journal, so the next pass applies it again).
    2. Journal lines the db lacks (a lost db, or a kill between the two writes)
       are imported: the journal is written first and is the durable copy.
    3. Which verdicts were applied or reverted is read back from the commit trailers.
    """
    notes = []
    message = Applier(repo).recover()
    if message:
        log.warning("%s", message)
        notes.append(message)
    imported = sync_journal(root, store)
    if imported:
        notes.append(f"imported {imported} verdict(s) from the journal")
    sync_git(repo, store)
    return notes


def sync_journal(root: Path, store: Store) -> int:
    verdicts, reverts = Journal(root).verdicts()
    known = store.known_ids()
    fresh = [v for v in verdicts if v.id not in known]
    for v in fresh:
        store.add_verdict(v)
    for vid, reason in reverts.items():
        store.mark_reverted(vid, reason)
    return len(fresh)


def sync_git(repo, store: Store) -> None:
    unapplied = {r[0] for r in store.db.execute("SELECT id FROM verdicts WHERE commit_sha IS NULL")}
    for vid, sha in applied_commits(repo).items():
        if vid in unapplied:
            store.mark_applied(vid, sha)
    for vid in trailer_values(repo, "Knomit-Reverts"):
        store.mark_reverted(vid, "reverted (from git history)")


def rebuild(root: Path | str) -> dict:
    """Recreate the db: verdicts from the journal, applied state from git, derived tables from the corpus."""
    from .passes import all_passes
    from .config import load_config
    root = Path(root).resolve()
    repo = open_repo(root)
    config = load_config(root)
    with Lock(repo):
        store = Store.for_corpus(root)
        try:
            store.db.execute("DELETE FROM files")
            store.db.execute("DELETE FROM embeddings")
            store.db.conn.commit()
            recover(root, repo, store)
            index = FileIndex(store)
            corpus = load_corpus(root, config.corpus.max_fact_bytes, index)
            index.save()
            embedder = Embedder(store)
            ctx = type("RebuildContext", (), {"corpus": corpus, "embedder": embedder, "config": config})()
            for p in all_passes().values():
                p.candidates(ctx)  # embeds exactly what a review would
            return {"verdicts": store.db["verdicts"].count, "facts": len(corpus.facts),
                    "embeddings": store.db["embeddings"].count, "problems": len(corpus.problems)}
        finally:
            store.close()
