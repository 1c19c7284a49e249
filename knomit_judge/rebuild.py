"""`rebuild`: the db's derived state made again from the corpus and the journal; `rebuild --check` compares.

Derived (DESIGN "Storage classes"): parsed files, embeddings, neighbour lists, candidate lists and the
journal marks; each verdict's applied and reverted state is read back from git. Sessions keep them
incrementally, rebuild computes them from nothing, and the two must agree exactly: a kept candidate
list that a rebuild would not make means the first review after `rebuild` asks questions no session
ever had as candidates. `check` compares what the db holds, as the next session would use it, with a
fresh computation in memory, names every difference, and writes nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from git import Repo

from .candidate_lists import CandidateLists, decode, inputs_digest
from .config import Config, load_config
from .corpus import Corpus, load_corpus
from .embeddings import Embedder, text_hash
from .errors import CorpusLocked
from .file_index import FileIndex
from .gitops import open_repo, shared_lock
from .neighbours import DEPTH, Memory
from .passes import subject_names
from .passes.base import CandidateSource, Inputs
from .passes.exact import DuplicateGroups
from .passes.registry import all_passes
from .proposals import Board
from .recovery import locked_store, sync_git, sync_journal
from .session.lines import current, describe_model
from .store import Store

log = logging.getLogger(__name__)
# differences named per kind; the count says how many there are
EXAMPLES = 3
# a candidate kept plain: its subject's names, fingerprint, score
Plain = tuple[tuple[str, ...], str, float]
# a neighbour search as stored: row keys, indices, similarities
Search = tuple[list[bytes], np.ndarray, np.ndarray]
K = TypeVar("K", str, tuple[str, ...])


def derived_passes() -> list[CandidateSource]:
    """Every pass whose candidate list is kept: exact duplicates first, as a session runs them."""
    return [DuplicateGroups(), *all_passes().values()]


def rebuild(root: Path | str) -> dict[str, int]:
    """Recreate the db: verdicts from the journal, applied state from git, derived tables from the corpus."""
    # a config error writes nothing, not even a new db
    config = load_config(Path(root).resolve())
    with locked_store(root) as opened:
        store = opened.store
        # What the vectors were keyed by, to say when this install keys them otherwise (encoders.cache_key)
        was = {r[0] for r in store.db.execute("SELECT DISTINCT model FROM embeddings")}
        for table in (
            "files",
            "embeddings",
            "neighbour_sets",
            "candidate_lists",
            # journal_marks emptied: the whole journal is read again
            "journal_marks",
        ):
            store.db.execute(f"DELETE FROM {table}")
        # Which verdicts are applied or reverted is read again from git and the journal (recover, below):
        # only adding marks would keep one whose commit a `git reset` dropped, and never apply it again.
        store.db.execute("UPDATE verdicts SET commit_sha = NULL, reverted = 0, revert_reason = NULL")
        store.db.conn.commit()
        notes = opened.recover(keep_marks=True)
        # propose mode: where sessions read
        reads = proposing_tree(opened.root, opened.repo, config, store)
        index = FileIndex(store)
        corpus = load_corpus(reads, config.corpus.max_fact_bytes, index, config.corpus)
        index.save()
        derived = Derivation(corpus, store, config)
        # embeds, searches and keeps exactly what a review would
        derived.run()
        for problem in corpus.problems:
            log.warning("skipped %s", problem)
        if was and derived.ctx.embedder.model_name not in was:
            log.info(
                "embeddings: the cache key is new (%s; the db held %s): every text was embedded again",
                derived.ctx.embedder.model_name,
                ", ".join(sorted(was)),
            )
        for note in notes:
            log.info("%s", note)
        return {
            "verdicts": store.db["verdicts"].count,
            "facts": len(corpus.facts),
            # the searches the passes make, as `--check` counts them (a search updated from another
            # replaces it in the table, so the table may hold fewer rows)
            "embeddings": store.db["embeddings"].count,
            "neighbour_sets": len(derived.memory.searches),
            "candidate_lists": store.db["candidate_lists"].count,
            "problems": len(corpus.problems),
        }


TEXT_NAMES = {"neighbour_sets": "neighbour lists", "candidate_lists": "candidate lists"}  # as `--check` names them


def rebuilt_line(counts: dict[str, int]) -> str:
    """`rebuild`'s line, naming each table as `rebuild --check` does (the --json keys stay as they were)."""
    return "rebuilt: " + ", ".join(f"{TEXT_NAMES.get(k, k)} {v}" for k, v in counts.items())


class _Recorder(Memory):
    """A Memory that also keeps each search it answered, as stored (lists DEPTH x k deep), by (depth, digest).

    Taken at once: a later search may update the same stored set into another one.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.searches: dict[tuple[int, str], Search] = {}

    def top_k(self, v: np.ndarray, keys: list[bytes], rank: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        out = super().top_k(v, keys, rank, k)
        depth, digest = DEPTH * k, self.last["digest"]
        found = next((s for s in self.store.neighbour_sets(depth) if s["digest"] == digest), None)
        # not found: evicted at once (KEEP sets used within one millisecond); then the k-deep lists it gave
        self.searches[depth, digest] = self.store.neighbour_set(found["id"]) if found else (keys, *out)
        return out


class _Embedder(Embedder):
    """An Embedder that notes every text it was asked for."""

    def __init__(self, store: Store, memory: _Recorder) -> None:
        super().__init__(store, memory=memory)
        self.texts: dict[str, str] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.update((text_hash(t), t) for t in texts)
        return super().embed(texts)


class Derivation:
    """Every pass's candidate list from `corpus` and `store`, as a session gets it (read back or computed).

    Lists are kept plain, as (subject names, fingerprint, score) in rank order: no evidence is made.
    """

    def __init__(self, corpus: Corpus, store: Store, config: Config) -> None:
        self.store = store
        # the lines a session of the real judge nominates with (a scripted session's lists are its own)
        lines = current(store, corpus, config, describe_model(config)).lines if config.describe.enabled else {}
        self.memory = _Recorder(store)
        # its own type: rebuild reads back the texts it was asked for, and the searches its memory answered
        self.embedder = _Embedder(store, self.memory)
        self.ctx = Inputs(corpus, self.embedder, config, lines)
        self.lists: dict[str, list[Plain]] = {}
        self.how: dict[str, str] = {}  # stored | computed

    def run(self, search_all: bool = False) -> Derivation:
        """`search_all`: lists read back are also computed, so every neighbour search the corpus needs is run."""
        lists = CandidateLists(self.store)
        for p in derived_passes():
            kept = lists.candidates(p, self.ctx)
            self.how[p.name] = lists.last
            if lists.last == "stored":
                row = self.store.candidate_list(p.name, inputs_digest(p, self.ctx))
                assert row is not None  # read back just now
                self.lists[p.name] = list(decode(row, _plain))
                if search_all:
                    p.candidates(self.ctx)
            else:
                self.lists[p.name] = [_plain(c.subject, c.fingerprint, c.score) for c in kept]
        return self


def _plain(subject: dict[str, Any], fingerprint: str, score: float) -> Plain:
    return tuple(subject_names(subject)), fingerprint, score


@dataclass
class CheckResult:
    """What `rebuild --check` compared (items per table), and each difference it found, named."""

    compared: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences

    def differ(self, table: str, what: str) -> None:
        self.differences.append(f"{table}: {what}")

    def text_lines(self) -> list[str]:
        counts = ", ".join(f"{table} {n}" for table, n in self.compared.items())
        return [
            *(f"differs: {d}" for d in self.differences),
            *(f"note: {n}" for n in self.notes),
            f"compared: {counts}",
            "equal: the db's derived state is what a fresh rebuild computes"
            if self.equal
            else f"not equal: {len(self.differences)} difference(s) from a fresh rebuild",
        ]

    def json(self) -> dict[str, Any]:
        return {"equal": self.equal, "compared": self.compared, "differences": self.differences, "notes": self.notes}


def check(root: Path | str) -> CheckResult:
    """Compare the db with a fresh rebuild computed in memory; write nothing (db, corpus, git)."""
    root = Path(root).resolve()
    repo = open_repo(root)
    config = load_config(root)
    result = CheckResult()
    # both in memory: the db file is only read
    with _reading(repo), Store.read_only(root) as kept, Store(None) as fresh:
        reads = proposing_tree(root, repo, config, fresh)
        _verdicts(root, repo, kept, fresh, result)
        _lines(kept, fresh, result)
        compare_derived(reads, config, kept, fresh, result)
    return result


def proposing_tree(root: Path, repo: Repo, config: Config, store: Store) -> Path:
    """Where sessions read the corpus: the proposals branch's work tree in propose mode (once a session made it),
    whose journal is imported into `store` too, with the applied state of the reviewed branch; else `root`."""
    board = Board(root, repo, config)
    if config.apply.mode != "propose" or not (board.path / ".git").is_file():
        return root
    # read from the checkout's marks, as a session reads it
    sync_journal(board.path, store, keep_marks=False)
    if base := board.base()[1]:
        sync_git(repo, store, base)
    return board.path


def compare_derived(
    root: Path, config: Config, kept: Store, fresh: Store, result: CheckResult | None = None
) -> CheckResult:
    """The derived tables of `kept` (a copy: it is written to) against a computation from nothing in `fresh`.

    `fresh` is empty, or holds only the vectors to embed with (benchmarks give synthetic ones).
    """
    result = result or CheckResult()
    corpus = load_corpus(root, config.corpus.max_fact_bytes, FileIndex(kept), config.corpus)
    truth = load_corpus(root, config.corpus.max_fact_bytes, None, config.corpus)
    _files(corpus, truth, result)
    new = Derivation(truth, fresh, config).run()
    _embeddings(new, kept, result)
    old = Derivation(corpus, kept, config).run(search_all=True)
    _neighbours(new, old, result)
    _candidates(new, old, result)
    return result


@contextlib.contextmanager
def _reading(repo: Repo) -> Iterator[None]:
    """Hold the session lock shared while comparing, so no session changes the db meanwhile; never create it."""
    with shared_lock(repo) as holder:
        if holder is not None:
            raise CorpusLocked(f"corpus is locked by another session: {holder}; check once it is done")
        yield


def _examples(items: Iterable[object]) -> str:
    items = list(items)
    return ", ".join(str(i) for i in items[:EXAMPLES]) + (", ..." if len(items) > EXAMPLES else "")


def _one_sided(
    table: str,
    want: Mapping[K, object],
    have: Mapping[K, object],
    result: CheckResult,
    name: Callable[[K], object] = lambda k: k,
) -> None:
    """The rows only one side holds: the db's own (`have`) against the journal's (`want`), by key."""
    if only := sorted(set(have) - set(want)):
        result.differ(table, f"{len(only)} in the db but not in the journal: {_examples(map(name, only))}")
    if only := sorted(set(want) - set(have)):
        result.differ(
            table,
            f"{len(only)} in the journal but not in the db "
            f"(the next session imports them): {_examples(map(name, only))}",
        )


def _verdicts(root: Path, repo: Repo, kept: Store, fresh: Store, result: CheckResult) -> None:
    """The verdict rows as the journal and git give them, against the db's."""
    sync_journal(root, fresh, keep_marks=False)
    sync_git(repo, fresh)
    want = {r["id"]: r for r in fresh.db["verdicts"].rows}
    have = {r["id"]: r for r in kept.db["verdicts"].rows}
    result.compared["verdicts"] = len(want)
    _one_sided("verdicts", want, have, result)
    for vid in sorted(set(want) & set(have)):
        changed = [k for k in want[vid] if want[vid][k] != have[vid].get(k)]
        if changed:
            result.differ(
                "verdicts",
                f"{vid}: "
                + "; ".join(
                    f"{k} is {have[vid].get(k)!r} in the db, {want[vid][k]!r} from the journal and git" for k in changed
                ),
            )


def _lines(kept: Store, fresh: Store, result: CheckResult) -> None:
    """The describe lines as the journal gives them (`fresh`, imported by _verdicts), against the db's."""
    key = ("spelling", "carriers", "model", "prompt")
    want = {tuple(r[k] for k in key): r["line"] for r in fresh.db["lines"].rows}
    have = {tuple(r[k] for k in key): r["line"] for r in kept.db["lines"].rows}
    result.compared["lines"] = len(want)
    _one_sided("lines", want, have, result, name=lambda k: k[0])
    if changed := sorted(k for k in set(want) & set(have) if want[k] != have[k]):
        result.differ("lines", f"{len(changed)} read differently from the journal: {_examples(k[0] for k in changed)}")


def _files(corpus: Corpus, truth: Corpus, result: CheckResult) -> None:
    """Facts as the file index gives them (unchanged files unparsed), against every file parsed again."""
    result.compared["files"] = len(truth.facts)
    if only := sorted(set(corpus.facts) ^ set(truth.facts)):
        result.differ("files", f"{len(only)} fact(s) read differently: {_examples(only)}")
    stale = sorted(p for p in set(corpus.facts) & set(truth.facts) if corpus.facts[p] != truth.facts[p])
    if stale:
        result.differ("files", f"{len(stale)} fact(s) kept parsed unlike the file now: {_examples(stale)}")


def _embeddings(new: Derivation, kept: Store, result: CheckResult) -> None:
    """Each kept vector of a text the passes embed, bit for bit against the one computed now."""
    texts = new.embedder.texts
    model = new.ctx.embedder.model_name
    have = kept.embeddings(model, list(texts))
    want = new.store.embeddings(model, list(have))
    result.compared["embeddings"] = len(have)
    differ = sorted(h for h in have if not np.array_equal(have[h], want[h]))
    if differ:
        cos = min(float(have[h] @ want[h]) for h in differ)
        names = [repr(texts[h].split("\n", 1)[0][:60]) for h in differ]
        result.differ(
            "embeddings",
            f"{len(differ)} of {len(have)} kept vectors differ from a fresh one "
            f"(lowest cosine {cos:.4f}): {_examples(names)}",
        )
    if missing := len(texts) - len(have):
        result.notes.append(
            f"embeddings: {missing} of {len(texts)} texts not embedded yet (the next session embeds them)"
        )


def _neighbours(new: Derivation, old: Derivation, result: CheckResult) -> None:
    """Each search the passes need, as the db keeps it, against a full exact search of the same vectors."""
    result.compared["neighbour lists"] = len(new.memory.searches)
    for (depth, digest), (keys, want_idx, want_sims) in new.memory.searches.items():
        if (depth, digest) not in old.memory.searches:
            result.differ(
                "neighbour lists",
                f"the kept state never searches the {len(keys)} rows a fresh rebuild "
                "does (their vectors differ: see embeddings)",
            )
            continue
        _, idx, sims = old.memory.searches[depth, digest]
        need = min(depth // DEPTH, len(keys) - 1)
        bad = [i for i in range(len(keys)) if not _prefix(idx[i], sims[i], want_idx[i], want_sims[i], need)]
        if bad:
            result.differ(
                "neighbour lists",
                f"{len(bad)} of {len(keys)} rows' kept neighbours are not their exact "
                f"nearest (search of depth {depth}): rows {_examples(bad)}",
            )


def _prefix(idx: np.ndarray, sims: np.ndarray, want_idx: np.ndarray, want_sims: np.ndarray, need: int) -> bool:
    """A kept list is the exact top-m of its row for some m (at least `need`): a prefix of the full list."""
    m = int((idx >= 0).sum())
    return m >= need and np.array_equal(idx[:m], want_idx[:m]) and np.array_equal(sims[:m], want_sims[:m])


def _candidates(new: Derivation, old: Derivation, result: CheckResult) -> None:
    """Each pass's list as the next session gets it (read back, or computed from kept state) against a fresh one."""
    result.compared["candidate lists"] = len(new.lists)
    for name, want in new.lists.items():
        have = old.lists[name]
        if want == have:
            continue
        how = f"{name} ({'read back' if old.how[name] == 'stored' else 'computed from the kept state'})"
        w, h = {s[0]: s for s in want}, {s[0]: s for s in have}
        said = False
        if only := [" ~ ".join(s) for s in h if s not in w]:
            result.differ("candidate lists", f"{how}: {len(only)} only in the kept list: {_examples(only)}")
            said = True
        if only := [" ~ ".join(s) for s in w if s not in h]:
            result.differ("candidate lists", f"{how}: {len(only)} only in a fresh computation: {_examples(only)}")
            said = True
        if other := [" ~ ".join(s) for s in w if s in h and w[s] != h[s]]:
            result.differ(
                "candidate lists", f"{how}: {len(other)} with another fingerprint or score: {_examples(other)}"
            )
            said = True
        if not said:
            result.differ("candidate lists", f"{how}: the same {len(want)} candidates in another order")
