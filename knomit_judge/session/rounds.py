"""One round of a pass, and its end: shortlist, skip what is answered, judge what the budget allows, apply the
yeses; then the pass's state, spend and throttle record."""

from __future__ import annotations

from ..candidate_lists import CandidateLists
from ..shortlist import gc_paused
from ..throttle import record
from ..verdicts import Verdict
from .asking import Offer, judge_all
from .context import PassRun
from .decisions import decide, restatable, restate
from .describe import describe
from .dry_run import plan_dry
from .freshness import fresh_first, owed_to_fresh
from .readers import reader_notes, reader_of, standing_first
from .rereads import audits_due, collected_audits, record_draw


async def run_round(run: PassRun, *, first: bool) -> None:
    """One round of a pass: shortlist, skip what is answered, judge what the budget allows, apply the yeses."""
    p, ctx, r, t = run.p, run.ctx, run.result, run.throttle
    restating: set[str] = set()
    if p.restates_yeses and not ctx.options.dry_run:
        # first: the candidates are then made from the corpus its merges leave
        restate(run)
    elif p.restates_yeses:
        restating = restatable(run)
        if restating:
            r.notes.append(f"{len(restating)} merge(s) the judge decided before would be restated without a call")
    # the describe step first: its lines nominate the pass's candidates too
    if p.reads_lines:
        await describe(ctx)
    # millions of small objects at 100k facts; see shortlist.gc_paused
    with gc_paused():
        # read back when nothing it depends on changed
        candidates = CandidateLists(ctx.store).candidates(p, ctx)
    # read once a round: asked again, or applied below (not those waiting on the proposals branch)
    yeses = [v for v in ctx.store.unapplied_yes(p.name, ctx.kind) if v.id not in ctx.proposed]
    # compared without making the candidates: most are answered
    fps = candidates.fingerprints
    reader = reader_of(run, fps)
    allowance = run.allowance
    judge = ctx.config.judge.model
    # a suspended first reader's standing no's are asked again of the judge model
    answered = ctx.store.answered(p.name, ctx.kind) - asked_again(run, yeses) - reader.askable
    # not asked now: refused by the API under this prompt version (by the judge model: a first reader's refusal
    # hands the question over), or in a Message Batch not yet collected
    refused = (
        ctx.store.refused(p.name, p.prompt.id, ctx.config.judge.model if ctx.options.judge.anthropic else None)
        - answered
    )
    busy = ctx.batches.busy(p.name) - answered
    waiting = fresh_first(
        [
            candidates[i]
            for i, fp in enumerate(fps)
            if fp not in answered and fp not in refused and fp not in busy and fp not in restating
        ],
        run.freshness.fresh,
    )
    run.seen.update(fps)
    # distinct questions met this session, over all rounds
    r.candidates = len(run.seen)
    # questions whose batch results came in this session are paid for: judged whatever the budget says
    paid = ctx.batches.take_paid(p.name, {c.fingerprint for c in waiting})
    rest = [c for c in waiting if c.fingerprint not in paid]
    owed = owed_to_fresh(run, waiting, paid)
    # stable: the owed first, then fresh, then backlog
    rest.sort(key=lambda c: c.fingerprint not in owed)
    rest = standing_first(reader, rest, owed)
    # the first reader's standing no's among them: drawn among
    reader.add_standing_to_draw(candidates, fps)
    if first:
        if t.state == "defunded" and not t.probe and (owed or (waiting and waiting[0].fresh)):
            # a new duplicate is asked while it is new, not probe_every sessions later
            t.probe_fresh(len(owed))
        # answered, or refused earlier (with a note); questions in a running batch count as batched instead
        r.cached = len(fps) - len(waiting) - sum(fp in busy for fp in fps)
        r.throttle = t.state + (" (probe)" if t.probe else "")
        r.next_probe_in = t.next_probe_in
        note_skipped(run, fps, refused, busy)
    # yes verdicts not yet applied (dirty tree, or a killed session rolled back): apply without asking again
    unapplied = {v.fingerprint: v for v in yeses if not p.outdated(v)}
    pending = [unapplied[fp] for fp in fps if fp in unapplied]
    r.fresh = max(r.fresh, sum(c.fresh for c in rest))
    # no verdict comes back to move the balance: what it holds now is what is offered
    if ctx.options.dry_run:
        # the owed withdraw from the balance, and are asked past it; the rest as many as the balance buys at the
        # price of the model that reads them
        model = reader.model if reader.model and reader.reads else judge
        room = max(len(owed), int((t.allowance or 0) / allowance.price(model) + 1e-9), t.probes)
        # as the session's producer does: the owed and a suspended reader's standing no's whatever they are worth,
        # the rest only while the worth rule finds them worth their price
        rest = [
            c
            for c in rest
            if c.fingerprint in owed
            or c.fingerprint in reader.askable
            or allowance.worth_asking(c.fingerprint, c.score, model)
        ]
        offer = [c for c in waiting if c.fingerprint in paid] + (rest if t.allowance is None else rest[:room])
        r.waiting = len(waiting) - len(offer)
        plan_dry(run, offer)
        return
    # every waiting question is offered, best first; the live balance decides how far down the list it goes
    offer = [c for c in waiting if c.fingerprint in paid] + rest
    # and judge_all adds what the caps or a stop held back
    r.waiting = len(waiting) - len(offer)
    # audits a batch bought of questions the first reader answered no: read now, a miss applied with the rest
    audited = await collected_audits(run, audits_due(run, candidates, answered))
    fresh = await judge_all(run, Offer(offer, paid, owed)) + audited
    decide(run, pending + fresh)


def asked_again(run: PassRun, yeses: list[Verdict]) -> set[str]:
    """Fingerprints whose latest verdict is an unapplied yes (of `yeses`) the pass no longer applies: asked
    again under the current prompt (a prune@1 retract, which left the survivor to the fixed rules), never applied."""
    p, store = run.p, run.ctx.store
    out = set()
    for v in yeses:
        if p.outdated(v) and (latest := store.verdict_for(p.name, v.fingerprint)) and latest.id == v.id:
            out.add(v.fingerprint)
    return out


def note_skipped(run: PassRun, fingerprints: list[str], refused: set[str], busy: set[str]) -> None:
    """Say which candidates were not asked because the API refused them, or a batch holds them."""
    p, ctx, r = run.p, run.ctx, run.result
    fps = set(fingerprints)
    if fps & refused:
        r.notes.append(
            f"{len(fps & refused)} question(s) refused by the API in an earlier session: "
            f"not asked again until their facts or the {p.name} prompt change"
        )
    for batch_id, in_batch in ctx.batches.waiting(p.name).items():
        if in_batch & fps & busy:
            r.batched += len(in_batch & fps & busy)
            r.notes.append(f"waiting on batch {batch_id}, {ctx.batches.requests_in(batch_id, p.name)} requests")


def finish_pass(run: PassRun) -> None:
    """Name the pass's state, take its spend from the ledger, and record the throttle's session."""
    p, ctx, r, t = run.p, run.ctx, run.result, run.throttle
    r.settle(held=r.waiting > 0, dry_run=ctx.options.dry_run)
    if (
        r.waiting
        and r.state == "worked"
        and t.allowance is not None
        and t.allowance <= 1e-9
        and not any("wait" in n for n in r.notes)
    ):
        r.notes.append(f"balance spent: {r.waiting} candidate(s) wait until resolutions refill it")
    unworthy = run.allowance.unworthy
    if unworthy and not ctx.options.dry_run:
        r.notes.append(
            f"{unworthy} question(s) not worth their price at the pass's chance of resolving something "
            "by score: they wait"
        )
    ctx.charge(r)
    reader_notes(run)
    reader = run.decided_reader
    if reader is not None and reader.model and not ctx.options.dry_run:
        # what it read this session, yeses included: its window (audits.py)
        record_draw(run)
    if r.cost_usd is None:
        r.notes.append("cost incomplete: a call reported no usage or its model has no price")
    if not ctx.options.dry_run:
        record(
            ctx.store,
            ctx.session,
            p.name,
            t,
            offered=r.offered,
            judged=r.judged,
            resolved=r.resolved,
            probe_spent=t.probe and r.judged > 0,
            judge=ctx.kind,
        )
