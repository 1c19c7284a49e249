"""Candidate lists as derived state: each pass's list kept in the db, keyed by a digest of what made it.

A pass's candidates (subject, fingerprint and score, in rank order) are a function of the facts
(every path and content id), how they were parsed (the motif keys), the embedding model and backend,
the shortlist and discovery settings, and the code that builds them. A session whose inputs digest to
the stored list's reads it back instead of embedding, searching, nominating and fingerprinting again:
on an unchanged corpus that was most of a session (100k facts: ~325k candidates). Only the evidence is
made again from the facts, lazily where it is large. Any other session computes the list in full (its
neighbour search is still incremental, see neighbours.py) and stores it in place of the old one.
`rebuild` empties the table.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

from .corpus import Corpus
from .passes.base import Candidate, CandidateSource, Session
from .store import Store
from .verdicts import subject_names

log = logging.getLogger(__name__)

PACKAGE = Path(__file__).resolve().parent

T = TypeVar("T")
# Makes an item of a list read back from (subject, fingerprint, score): a Candidate, or what rebuild compares.
Restore = Callable[[dict[str, Any], str, float], T]


# the installed code does not change while it runs: read once a process
@cache
def code_digest() -> str:
    """Of every module of the package: lists made by other code (another release) are never reused."""
    h = hashlib.blake2b(digest_size=16)
    for f in sorted(PACKAGE.rglob("*.py")):
        h.update(f.relative_to(PACKAGE).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def inputs_digest(p: CandidateSource, ctx: Session) -> str:
    """A digest of everything a pass's candidate list depends on (evidence aside, which is made on reading)."""
    corpus, config = ctx.corpus, ctx.config
    h = hashlib.blake2b(facts_digest(corpus).encode(), digest_size=16)
    h.update(
        repr(
            (
                p.name,
                code_digest(),
                ctx.embedder.model_name,
                tuple(corpus.motif_keys),
                corpus.inline_tags,
                config.shortlist,
                config.discovery,
            )
        ).encode()
    )
    # the describe lines nominate alias pairs too (a context made without them, as tests make, has none)
    if p.reads_lines and ctx.lines:
        h.update(repr(sorted(ctx.lines.items())).encode())
    return h.hexdigest()


def facts_digest(corpus: Corpus) -> str:
    """Every fact's path and content id, active or not (a content id covers title, body, motifs and status).

    Kept on the corpus until a decision changes it (Corpus.put reindexes, which drops it).
    """
    digest = corpus._digest
    if digest is None:
        text = "\n".join(f"{path}\0{f.content_id}" for path, f in sorted(corpus.facts.items()))
        digest = corpus._digest = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    return digest


def encode(candidates: Sequence[Candidate]) -> dict[str, Any] | None:
    """A list as a few blobs: names (paths or spellings) once each, members as indices, NUL-separated strings."""
    names: dict[str, int] = {}
    members: list[int] = []
    offsets = [0]
    for c in candidates:
        members.extend(names.setdefault(n, len(names)) for n in subject_names(c.subject))
        offsets.append(len(members))
    texts = [*names, *(c.fingerprint for c in candidates)]
    # never so (motifs and paths hold no control character); then not kept
    if any("\0" in t for t in texts):
        return None
    shape = "group" if candidates and "group" in candidates[0].subject else "pair"
    return dict(
        shape=shape,
        count=len(candidates),
        names="\0".join(names).encode(),
        members=np.array(members, dtype=np.int32).tobytes(),
        offsets=np.array(offsets, dtype=np.int64).tobytes(),
        fingerprints="\0".join(c.fingerprint for c in candidates).encode(),
        scores=np.array([c.score for c in candidates], dtype=np.float64).tobytes(),
    )


class CandidateList(Sequence[T]):
    """A pass's candidates in rank order, with every fingerprint at hand.

    Read back from the db, a Candidate (subject, evidence) is made only when it is read: a caught-up
    session compares fingerprints with its verdicts and reads none of them.
    """

    def __init__(self, fingerprints: list[str], make: Callable[[int], T]) -> None:
        self.fingerprints, self._make = fingerprints, make

    @staticmethod
    def of(candidates: list[Candidate]) -> CandidateList[Candidate]:
        return CandidateList([c.fingerprint for c in candidates], candidates.__getitem__)

    def __len__(self) -> int:
        return len(self.fingerprints)

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._make(j) for j in range(*i.indices(len(self)))]
        return self._make(range(len(self))[i])


def decode(row: dict[str, Any], restore: Restore[T]) -> CandidateList[T]:
    """The stored list; restore(subject, fingerprint, score) makes each Candidate when it is read."""
    if not row["count"]:
        # never called: an empty list has no index to make
        return CandidateList([], [].__getitem__)
    names = row["names"].decode().split("\0")
    members = np.frombuffer(row["members"], dtype=np.int32).tolist()
    fps = row["fingerprints"].decode().split("\0")
    scores = np.frombuffer(row["scores"], dtype=np.float64).tolist()
    if row["shape"] == "pair":

        def subject(i: int) -> dict[str, Any]:
            return {"a": names[members[2 * i]], "b": names[members[2 * i + 1]]}
    else:
        offsets = np.frombuffer(row["offsets"], dtype=np.int64).tolist()

        def subject(i: int) -> dict[str, Any]:
            return {"group": [names[m] for m in members[offsets[i] : offsets[i + 1]]]}

    return CandidateList(fps, lambda i: restore(subject(i), fps[i], scores[i]))


class CandidateLists:
    """One session's access to the kept lists; `last` says how the latest list was had: stored or computed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.last = ""

    def candidates(self, p: CandidateSource, ctx: Session) -> CandidateList[Candidate]:
        """The pass's candidates, exactly as p.candidates(ctx) gives them, read back when nothing they depend on changed."""
        digest = inputs_digest(p, ctx)
        row = self.store.candidate_list(p.name, digest)
        if row is not None:
            self.last = "stored"
            return decode(row, p.restorer(ctx))
        self.last = "computed"
        candidates = p.candidates(ctx)
        if (encoded := encode(candidates)) is not None:
            self.store.put_candidate_list(p.name, digest, encoded)
        log.debug("%s: %d candidates computed and kept", p.name, len(candidates))
        return CandidateList.of(candidates)
