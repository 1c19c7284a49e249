"""Exact duplicates: same normalised title and body. Retracted mechanically, never budgeted."""

from __future__ import annotations

from ..corpus import Corpus, Fact, exact_key
from ..survivors import first_seen, why_first
from ..verdicts import MECHANICAL, Verdict, group_fingerprint
from .base import Candidate, Change, Restorer, Session, Subject
from .prune import carried_body, relinked_body, retire

PROMPT_ID = "exact@1"


def duplicate_groups(corpus: Corpus) -> list[list[Fact]]:
    """The active facts that share a normalised title and body, two or more to a group."""
    groups: dict[str, list[Fact]] = {}
    for fact in corpus.active():
        groups.setdefault(exact_key(fact), []).append(fact)
    return [g for g in groups.values() if len(g) > 1]


class DuplicateGroups:
    """The groups as a candidate list (no evidence: nothing is judged), so candidate_lists keeps them too."""

    name = "exact"
    reads_lines = False
    writes_lines = False

    def candidates(self, ctx: Session) -> list[Candidate]:
        return [
            Candidate(self.name, {"group": [f.path for f in g]}, group_fingerprint(g), 0.0, [])
            for g in duplicate_groups(ctx.corpus)
        ]

    def restorer(self, ctx: Session) -> Restorer:
        def restore(s: Subject, fp: str, score: float) -> Candidate:
            return Candidate(self.name, s, fp, score, [])

        return restore


def exact_verdict(group: list[Fact], session: str) -> Verdict:
    """The mechanical verdict that retracts a group's copies."""
    paths = sorted(f.path for f in group)
    return Verdict(
        pass_name="exact",
        fingerprint=group_fingerprint(group),
        subject={"group": paths},
        answer="retract",
        is_yes=True,
        rationale="same normalised title and body",
        model=MECHANICAL,
        prompt=PROMPT_ID,
        session=session,
    )


def exact_change(group: list[Fact], verdict: Verdict, corpus: Corpus) -> Change:
    """Retract every copy in favour of the fact git saw first; a copy adds no `sources` count (copy_provenance)."""
    keep = first_seen(group, corpus)
    writes: dict[str, str | None] = {}
    carried: list[str] = []
    relinked: list[str] = []
    for lose in group:
        if lose is not keep:
            retire(
                corpus,
                lose,
                keep,
                verdict.id,
                absorb=False,
                writes=writes,
                carried=carried,
                copy=True,
                relinked=relinked,
            )
    losers = [f for f in group if f is not keep]
    return Change(
        writes,
        f"exact: retract {len(losers)} exact duplicate(s) of {keep.path}",
        f"Same normalised title and body: retracted without a judge call; {keep.path} survives as the\n"
        "original (the fact git first saw), and a copy adds no evidence:\n"
        + "\n".join(f"- {f.path}: {why_first(keep, f, corpus)}" for f in losers)
        + carried_body(keep.path, carried)
        + relinked_body(keep.path, relinked),
        {f.path: keep.path for f in losers},
    )
