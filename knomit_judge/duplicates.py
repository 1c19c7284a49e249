"""A session's exact duplicates (same normalised title and body): retracted mechanically before any judged
pass, whatever the throttle says, one commit per group (passes/exact.py holds the groups, the verdict and the
change)."""

from __future__ import annotations

from .candidate_lists import CandidateLists
from .decisions import applied, keep
from .passes.exact import DuplicateGroups, exact_change, exact_verdict
from .status import PassResult


def run_exact(ctx, result) -> PassResult:
    """Exact duplicates are retracted mechanically, before any judged pass, whatever the throttle says."""
    r = PassResult("exact", throttle="never budgeted")
    kept = CandidateLists(ctx.store).candidates(DuplicateGroups(), ctx)  # read back when no fact changed
    groups = [[ctx.corpus.facts[path] for path in c.subject["group"]] for c in kept]  # as read, before any retraction
    r.candidates = len(groups)
    answered = ctx.store.answered("exact")
    # a retraction refused as it was applied (a file it cannot write) is tried again, not taken as answered
    unapplied = {v.fingerprint: v for v in ctx.store.unapplied_yes("exact")}
    for group, fp in zip(groups, kept.fingerprints):
        if fp in answered and fp not in unapplied:  # a reverted exact retraction stays a "no"
            r.cached += 1
            continue
        r.offered += 1
        if ctx.options.dry_run or not ctx.clean:
            continue
        verdict = unapplied.get(fp)
        if verdict is None:
            verdict = exact_verdict(group, ctx.session)
            keep(ctx, verdict)
            r.judged += 1
            r.resolved += 1
        if applied(ctx, r, "exact", verdict, exact_change(group, verdict, ctx.corpus)):
            r.applied += 1
    if r.offered and not r.applied and not ctx.options.dry_run:
        r.notes.append(f"{r.offered} group(s) wait for a clean work tree")
    r.state = "worked" if r.applied else ("nothing-qualified" if not groups else "caught-up")
    return r
