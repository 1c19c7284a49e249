"""Which fact or spelling survives is settled by fixed rules, never by the judge."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from .corpus import Corpus, Fact


@cache
def _added_at(root: Path, path: str) -> float:
    """When git first saw the path (older = smaller); a file git has not seen is the newest."""
    try:
        out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%at", "--", path], cwd=root,
                             capture_output=True, text=True, check=True).stdout.split()
        return float(out[-1]) if out else float("inf")
    except (subprocess.CalledProcessError, OSError):
        return float("inf")


def fact_rank(fact: Fact, corpus: Corpus) -> tuple:
    """Sort key, best first: higher confidence, more sources, more carriers of its motifs, older path."""
    carriers = sum(len(corpus.carriers.get(m, ())) for m in fact.motifs)
    return (-fact.confidence, -len(fact.sources), -carriers, _added_at(corpus.root, fact.path), fact.path)


def fact_survivor(facts: list[Fact], corpus: Corpus) -> Fact:
    return min(facts, key=lambda f: fact_rank(f, corpus))


def spelling_rank(motif: str, corpus: Corpus) -> tuple:
    """Sort key, best first: more carriers, higher mean carrier confidence, lexicographically smaller."""
    carriers = corpus.carrier_facts(motif)
    mean = sum(f.confidence for f in carriers) / len(carriers) if carriers else 0.0
    return (-len(carriers), -mean, motif)


def spelling_survivor(a: str, b: str, corpus: Corpus) -> str:
    return min((a, b), key=lambda m: spelling_rank(m, corpus))
