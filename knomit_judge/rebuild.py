"""`rebuild`: the db made again from the journal (verdicts), git (what was applied) and the corpus (derived tables)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

from .candidate_lists import CandidateLists
from .config import load_config
from .corpus import load_corpus
from .embeddings import Embedder
from .gitops import Lock, open_repo
from .neighbours import Memory
from .passes.exact import DuplicateGroups
from .passes.registry import all_passes
from .recovery import recover
from .shortlist import remembered
from .store import FileIndex, Store

log = logging.getLogger(__name__)


def rebuild(root: Path | str) -> dict:
    """Recreate the db: verdicts from the journal, applied state from git, derived tables from the corpus."""
    root = Path(root).resolve()
    repo = open_repo(root)
    config = load_config(root)
    with Lock(repo) as lock:
        store = Store.for_corpus(root)
        try:
            store.db.execute("DELETE FROM files")
            store.db.execute("DELETE FROM embeddings")
            store.db.execute("DELETE FROM neighbour_sets")
            store.db.execute("DELETE FROM candidate_lists")
            store.db.execute("DELETE FROM journal_marks")  # the whole journal is read again
            store.db.conn.commit()
            notes = recover(root, repo, store, lock, keep_marks=True)
            index = FileIndex(store)
            corpus = load_corpus(root, config.corpus.max_fact_bytes, index, config.corpus)
            index.save()
            ctx = SimpleNamespace(corpus=corpus, embedder=Embedder(store), config=config)
            lists = CandidateLists(store)
            with remembered(Memory(store)):
                for p in [DuplicateGroups(), *all_passes().values()]:
                    lists.candidates(p, ctx)  # embeds, searches and keeps exactly what a review would
            for problem in corpus.problems:
                log.warning("skipped %s", problem)
            for note in notes:
                log.info("%s", note)
            return {"verdicts": store.db["verdicts"].count, "facts": len(corpus.facts),
                    "embeddings": store.db["embeddings"].count, "neighbour_sets": store.db["neighbour_sets"].count,
                    "candidate_lists": store.db["candidate_lists"].count,
                    "problems": len(corpus.problems)}
        finally:
            store.close()
