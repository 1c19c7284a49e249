"""Decisions: a yes verdict applied to the corpus as one commit, and the verdicts kept on the way.

Data flows one way: judgments (an Outcome made a verdict and kept here as it comes) become decisions (checked
against the corpus as it now is, gated by people's labels) and decisions become commits. This module is the
only one that writes a decision into the tree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from ..errors import BadFact, DecisionRefused
from ..gitops import Decision, decision_trailers, message
from ..judge import Outcome
from ..passes import Candidate, Change
from ..precision import Gate
from ..precision import gate as precision_gate
from ..proposals import PROPOSAL
from ..relink import refusal, would_break
from ..status import PassResult
from ..verdicts import Verdict
from .context import Context, PassRun

log = logging.getLogger(__name__)


def keep(ctx: Context, verdict: Verdict) -> None:
    """Store a verdict: journal first (the durable copy in git), then the db, which recovery fills from it."""
    # the session's first change waits for the models' lifecycle, read this session
    ctx.lineup.confirm()
    ctx.journal.append(verdict.pass_name, verdict.journal_line())
    ctx.store.add_verdict(verdict)


def verdict_of(run: PassRun, c: Candidate, out: Outcome, model: str, audit: dict[str, Any] | None = None) -> Verdict:
    """The verdict of an outcome the model `model` gave on candidate `c` (with `audit`: a first-reader answer read
    again, audits.py)."""
    p, ctx = run.p, run.ctx
    assert out.answer is not None, "an outcome of kind verdict has its answer"
    return Verdict(
        pass_name=p.name,
        fingerprint=c.fingerprint,
        subject=c.subject,
        answer=out.answer,
        is_yes=out.answer in p.yes,
        rationale=out.rationale,
        model=model,
        prompt=p.prompt.id,
        attempts=out.attempts,
        calls=out.calls,
        agreement=out.agreement,
        tokens_in=out.tokens_in,
        tokens_out=out.tokens_out,
        cost_usd=out.cost_usd,
        replies=out.replies,
        payload=out.payload,
        session=ctx.session,
        judge=ctx.judge.kind,
        orders=out.orders,
        by_position=out.by_position,
        score=c.score,
        audit=audit,
    )


def apply(ctx: Context, pass_name: str, verdict: Verdict, change: Change) -> str:
    """Commit one decision (its files and the journal holding its verdict) and take it into the corpus.

    Every rewritten file is read back with the corpus reader first: a fact that would not parse is
    never committed (DecisionRefused); nor is a decision that would break a link (relink.would_break).
    """
    # a retirement since the models were last read stops the session before this commit
    ctx.lineup.confirm()
    assert ctx.applier is not None, "a dry run applies nothing"
    if broken := would_break(ctx.corpus, change.writes, change.retired):
        raise DecisionRefused(broken[0].link.note, refusal(broken), broken[0].link.line or None)
    judge = f"{verdict.model} / {verdict.prompt}"
    trailers = decision_trailers(Decision(pass_name, verdict.id, judge, verdict.rationale))
    # committed on the proposals branch: it waits there for `approve` (proposals.py)
    if ctx.proposals:
        trailers[PROPOSAL] = ctx.proposals
    msg = message(change.subject, change.body, trailers)
    sha = ctx.applier.commit(change.writes, [ctx.journal.relpath(pass_name)], msg, verdict.id, check=ctx.corpus.check)
    for path, text in change.writes.items():
        fact = ctx.corpus.put(path, text)
        if fact is not None:
            # indexed now, inside the session: its change is the judge's own, fresh next session but not new
            ctx.index.remember(ctx.root, fact, parsed=False)
    # the db's commit is the reviewed branch's: a proposal has none until it is approved
    if ctx.proposals:
        ctx.proposed.add(verdict.id)
    else:
        ctx.store.mark_applied(verdict.id, sha)
    ctx.result.commits.append(sha)
    log.info("%s (%s)", change.subject, sha[:10])
    return sha


def applied(ctx: Context, r: PassResult, pass_name: str, verdict: Verdict, change: Change) -> bool:
    """Apply one decision; a refused one is named (pass note and session problem) and the session goes on.

    Its verdict stays stored and unapplied, so it is tried again next session, and named again while the
    cause stays: never a traceback, never half a decision in the tree. One that would write a file someone
    changed and has not committed (no fact: those hold every decision) waits for it the same way.
    """
    if busy := sorted(ctx.dirty.intersection(change.writes)):
        note = f"verdict {verdict.id} waits: it would write {busy[0]}, which has uncommitted changes"
        if note not in r.notes:
            r.notes.append(note)
        return False
    try:
        apply(ctx, pass_name, verdict, change)
        return True
    except DecisionRefused as e:
        log.warning("verdict %s not applied: %s", verdict.id, e)
        note = f"verdict {verdict.id} not applied: {e}"
        # each round meets the same unapplied yes again
        if note not in r.notes:
            r.notes.append(note)
            problem = BadFact(e.path, f"verdict {verdict.id} ({pass_name}) not applied: {e.reason}", e.line)
            if not any(str(p) == str(problem) for p in ctx.result.problems):
                ctx.result.problems.append(problem)
        return False


def decide(run: PassRun, verdicts: list[Verdict]) -> None:
    """Apply yes verdicts best first, each checked against the corpus as it now is.

    People's labels gate this: a pass on probation applies nothing (its yeses stay stored and are applied,
    without asking again, once labels lift it), and a yes a person labelled no is never applied.
    """
    p, ctx, r = run.p, run.ctx, run.result
    gate = precision_gate(ctx.root, p.name, ctx.config.calibration)
    waiting = stale = held = refused = 0
    for v in verdicts:
        if v.id in gate.refused:
            refused += 1
            continue
        if gate.probation:
            held += 1
            continue
        if not ctx.clean:
            waiting += 1
            continue
        if not p.still_holds(v, ctx.corpus):
            # an earlier decision changed one side: asked afresh (a standing alias yes: restated)
            stale += 1
            continue
        if applied(ctx, r, p.name, v, p.change(v, ctx)):
            r.applied += 1
    if waiting:
        r.notes.append(f"{waiting} decision(s) wait for a clean work tree")
    if stale:
        r.notes.append(f"{stale} yes verdict(s) no longer match the corpus after earlier decisions")
    # each round sees every held yes again, so this is set, not added to
    if gate.probation:
        r.probation = (
            f"{gate.probation.probation_phrase()}: applying nothing, {held} yes verdict(s) held; "
            "see `knomit-judge inbox`"
        )
    note = f"{refused} yes verdict(s) labelled no by a person, not applied"
    if refused and note not in r.notes:
        r.notes.append(note)


def restate(run: PassRun) -> None:
    """Apply the pass's standing yeses to their subjects as they are now, recorded again without a call.

    A spelling the judge merged stays merged: when a writer uses the retired spelling again, or a merge of
    another spelling rewrote a carrier both share, the pair is decided by the judge's own earlier yes, not
    asked (and paid for) again. Such a verdict is `mechanical`: it asked nothing, so the balance neither
    withdraws nor deposits for it (the balance measures what questions buy). Each is made on the corpus
    as the merges before it left it, and applied at once, so none is stale. A later `different`, a revert,
    or a person's `no` label ends it; a dirty tree or a pass on probation restates nothing (decide() says
    why for the pass's other yeses).
    """
    p, ctx, r = run.p, run.ctx, run.result
    gate = precision_gate(ctx.root, p.name, ctx.config.calibration)
    if not ctx.clean or gate.probation:
        return
    done = 0
    for v, new in standing(run, gate):
        if new:
            keep(ctx, v)
            r.resolved += 1
        if applied(ctx, r, p.name, v, p.change(v, ctx)):
            r.applied += 1
            done += 1
    note = f"{done} merge(s) the judge decided before, restated without a call"
    if done and note not in r.notes:
        r.notes.append(note)


def standing(run: PassRun, gate: Gate) -> Iterator[tuple[Verdict, bool]]:
    """(verdict, new) for each standing yes whose subject is in the corpus as it is now, made lazily.

    Lazily, so each is made after the merges before it were applied. `new`: a restated verdict to keep;
    otherwise a yes on the pair as it is now that was never applied (a refused rewrite, a killed session).
    """
    p, ctx = run.p, run.ctx
    for origin in ctx.store.standing_yes(p.name, ctx.kind):
        v = None if origin.id in gate.refused else p.restated(origin, ctx.corpus, ctx.session, ctx.kind)
        if v is None:
            continue
        have = ctx.store.verdict_for(p.name, v.fingerprint)
        if have is None:
            yield v, True
        elif (
            have.is_yes
            and not have.commit_sha
            and not have.reverted
            and have.id not in gate.refused
            and have.id not in ctx.proposed
        ):
            yield have, False


def restatable(run: PassRun) -> set[str]:
    """The fingerprints a session would restate rather than ask (what a dry run leaves out of its offer)."""
    gate = precision_gate(run.ctx.root, run.name, run.ctx.config.calibration)
    return set() if gate.probation else {v.fingerprint for v, _ in standing(run, gate)}
