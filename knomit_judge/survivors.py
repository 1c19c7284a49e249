"""Which fact or spelling survives is settled by fixed rules, never by the judge."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from .corpus import FACTS_DIR, Corpus, Fact


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@lru_cache(maxsize=8)
def _added_order(root: Path, head: str, prefixes: tuple[str, ...] = (FACTS_DIR,)) -> dict[str, int]:
    """Path -> ordinal of the commit that first added it, oldest first (keyed by HEAD, so never stale).

    Commit order, not commit time: two commits within one second are still ordered.
    """
    out = _git(
        root,
        "log",
        "--reverse",
        "--date-order",
        "--no-renames",
        "--diff-filter=A",
        "--name-only",
        "-z",
        "--format=%x01",
        head,
        "--",
        *(p or "." for p in prefixes),
    )
    order: dict[str, int] = {}
    for n, chunk in enumerate(out.split("\x01")):
        for path in chunk.split("\0"):
            path = path.strip("\n")
            if path:
                order.setdefault(path, n)
    return order


def added_order(root: Path, prefixes: tuple[str, ...] = (FACTS_DIR,)) -> dict[str, int]:
    """When git first saw each path (smaller = older); empty outside git or before the first commit."""
    try:
        return _added_order(Path(root), _git(root, "rev-parse", "--verify", "-q", "HEAD").strip(), tuple(prefixes))
    except (subprocess.CalledProcessError, OSError):
        return {}


def fact_rank(fact: Fact, corpus: Corpus, order: dict[str, int] | None = None) -> tuple[float, int, int, float, str]:
    """Sort key, best first: higher confidence, more sources, more carriers of its motifs, older path.

    A path git has not seen counts as the newest; the path itself breaks a tie within one commit.
    """
    order = added_order(corpus.root, tuple(corpus.prefixes())) if order is None else order
    carriers = sum(len(corpus.carriers.get(m, ())) for m in fact.motifs)
    return (-fact.confidence, -fact.source_count, -carriers, order.get(fact.path, float("inf")), fact.path)


def fact_survivor(facts: list[Fact], corpus: Corpus) -> Fact:
    """The fact the fixed rules keep (fact_rank's best)."""
    order = added_order(corpus.root, tuple(corpus.prefixes()))
    return min(facts, key=lambda f: fact_rank(f, corpus, order))


def why_survives(keep: Fact, lose: Fact, corpus: Corpus) -> str:
    """The rule that chose `keep` over `lose`, for the commit message."""
    k, l = fact_rank(keep, corpus), fact_rank(lose, corpus)
    if k[0] != l[0]:
        return f"higher confidence ({keep.confidence:g} vs {lose.confidence:g})"
    if k[1] != l[1]:
        return f"more sources ({-k[1]} vs {-l[1]})"
    if k[2] != l[2]:
        return f"more carriers of its motifs ({-k[2]} vs {-l[2]})"
    return "the older path" if k[3] != l[3] else "the path order (added in one commit)"


def first_seen(facts: list[Fact], corpus: Corpus) -> Fact:
    """Of exact duplicates, the fact git saw first (the earliest commit that added its path; ties by path).

    Not the fixed rules of a merge: the copies say the same thing, so the original is the one to keep, and a
    copy's higher confidence or longer source list says nothing about which one people cite.
    """
    order = added_order(corpus.root, tuple(corpus.prefixes()))
    return min(facts, key=lambda f: (order.get(f.path, float("inf")), f.path))


def why_first(keep: Fact, lose: Fact, corpus: Corpus) -> str:
    """Why `keep` survives `lose` as its exact duplicate, for the commit message."""
    order = added_order(corpus.root, tuple(corpus.prefixes()))
    k, l = order.get(keep.path, float("inf")), order.get(lose.path, float("inf"))
    return "git saw it first" if k != l else "the path order (added in one commit)"


def spelling_rank(motif: str, corpus: Corpus) -> tuple[int, float, str]:
    """Sort key, best first: more carriers, higher mean carrier confidence, lexicographically smaller."""
    carriers = corpus.carrier_facts(motif)
    mean = sum(f.confidence for f in carriers) / len(carriers) if carriers else 0.0
    return (-len(carriers), -mean, motif)


def spelling_survivor(a: str, b: str, corpus: Corpus) -> str:
    """The spelling the fixed rules keep (spelling_rank's best).

    Two spellings that differ only in case and tie on carriers and confidence keep the one with fewer
    capitals (`running`, not `Running`): the lexicographic rule would keep the capitalised one only
    because ASCII sorts capitals first (docs/judges.md says why).
    """
    ra, rb = spelling_rank(a, corpus), spelling_rank(b, corpus)
    if ra[:2] == rb[:2] and a.casefold() == b.casefold():
        return min((a, b), key=lambda m: (sum(c.isupper() for c in m), m))
    return a if ra <= rb else b
