"""A session's exact duplicates (same normalised title and body): retracted mechanically before any judged
pass, whatever the throttle says, one commit per group; or, in a dry run, named with the fact each group keeps,
so the dry run says what the session would do, and plans the judged passes without the copies it would retract
(passes/exact.py holds the groups, the verdict and the change)."""

from __future__ import annotations

from .. import interrupts
from ..candidate_lists import CandidateLists
from ..corpus import Fact
from ..passes.exact import DuplicateGroups, exact_change, exact_verdict
from ..status import PassResult
from ..survivors import first_seen
from .context import Context
from .decisions import applied, keep


def run_exact(ctx: Context) -> PassResult:
    """Exact duplicates are retracted mechanically, before any judged pass, whatever the throttle says."""
    r = PassResult("exact", throttle="never budgeted")
    # read back when no fact changed
    kept = CandidateLists(ctx.store).candidates(DuplicateGroups(), ctx)
    # as read, before any retraction
    groups = [[ctx.corpus.facts[path] for path in c.subject["group"]] for c in kept]
    r.candidates = len(groups)
    answered = ctx.store.answered("exact")
    # a retraction refused as it was applied (a file it cannot write) is tried again, not taken as answered
    unapplied = {v.fingerprint: v for v in ctx.store.unapplied_yes("exact") if v.id not in ctx.proposed}
    for group, fp in zip(groups, kept.fingerprints):
        # between commits: a stop asked for lands here, not after the last group
        interrupts.check()
        # a reverted exact retraction stays a "no"
        if fp in answered and fp not in unapplied:
            r.cached += 1
            continue
        r.offered += 1
        if not ctx.clean:
            continue
        if ctx.options.dry_run:
            plan_exact(ctx, group, fp)
            continue
        verdict = unapplied.get(fp)
        if verdict is None:
            verdict = exact_verdict(group, ctx.session)
            keep(ctx, verdict)
            r.judged += 1
            r.resolved += 1
        if applied(ctx, r, "exact", verdict, exact_change(group, verdict, ctx.corpus)):
            r.applied += 1
    if r.offered and not ctx.clean:
        r.notes.append(f"{r.offered} group(s) wait for a clean work tree")
    # what the session would retract, never "caught-up"
    if ctx.options.dry_run and r.offered and ctx.clean:
        r.state = "would-offer"
        r.notes.insert(0, f"would retract the exact duplicates of {r.offered} group(s) without a judge call")
        return r
    r.state = "worked" if r.applied else ("nothing-qualified" if not groups else "caught-up")
    return r


def plan_exact(ctx: Context, group: list[Fact], fingerprint: str) -> None:
    """A dry run's entry for one group of exact duplicates: which fact the session keeps and which it retracts.

    The retraction is taken into the in-memory corpus (never a file): the judged passes then plan on the corpus
    the session would give them, not on pairs and groups holding a copy the session retracts first.
    """
    keep_fact = first_seen(group, ctx.corpus)
    for path, text in exact_change(group, exact_verdict(group, ctx.session), ctx.corpus).writes.items():
        ctx.corpus.put(path, text)
    ctx.result.plan.setdefault("exact", []).append(
        {
            "subject": {"group": sorted(f.path for f in group)},
            "score": 1.0,
            "fingerprint": fingerprint,
            "evidence": {
                "survivor": keep_fact.path,
                "retract": sorted(f.path for f in group if f is not keep_fact),
                "why": "same normalised title and body",
            },
        }
    )
