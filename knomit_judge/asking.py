"""Asking: which model reads a question, in which order, when the judge model reads it again, the audits of the
first reader, and what goes into a Message Batch. The session's spine (review.py) calls judge_all.

Two readers (DESIGN "The judge client"). The first reader (judge.first_reader, the cheapest current model) reads
every offered question in one order. Its no is a verdict like any other (fingerprinted, journalled, its model
recorded); its yes acts on nothing: the question goes to judge.model, asked as always (one order, the second only
after a yes, both must agree), and only that agreeing yes is applied. Once a pass has read, its highest-ranked
first-reader no's by the candidate's score (at least AUDIT_MIN a session, and judge.audit_share of its first
reads) are read again by judge.model: a yes there is a miss, counted, and the question goes on as that yes. A pass whose last AUDIT_WINDOW audits hold
MISS_BOUND misses reads with judge.model alone, and its standing first-reader no's become askable again, highest
ranked first, within the balance; those readings are audits too, so the window fills again and the suspension
lifts once the misses fall below the bound (docs/choices.md). The scripted judge reads alone.

A Message Batch keeps the readers: a batch session gathers the first reader's one order into its batch, at the
first reader's batch price; once that reply is in (a later session collects it), a yes gathers the judge
model's reading, and the audits of the no's gather theirs, into that session's batch, read in the next
collection (collected_audits).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from .decisions import keep
from .judge import REPLY_TOKENS, Outcome, swap_sampled
from .passes import Candidate
from .status import PassResult
from .verdicts import Verdict

AUDIT_MIN = 2  # audits of first-reader no's per pass and session, at least
AUDIT_WINDOW = 20  # the audits the suspension rule looks back on
MISS_BOUND = 2  # misses in that window that suspend the first reader for the pass


@dataclass
class FirstReader:
    """The first reader of one pass in this session: whether it reads, and what it did."""

    model: str | None  # None: the judge model reads alone
    suspended: str = ""  # why it does not read this session ("2 misses in the last 20 audits")
    standing: set = field(default_factory=set)  # while suspended: its no's waiting for the judge model
    pending: list = field(default_factory=list)  # this round's no's, of which the top-ranked are audited

    @property
    def reads(self) -> bool:
        return bool(self.model) and not self.suspended


def first_reader(ctx, p) -> FirstReader:
    """Who reads the pass's questions first this session, from the config and the pass's recent audits."""
    model = ctx.config.models().get("judge.first_reader")  # none when off, or the judge model itself
    if model is None or ctx.kind != "anthropic":
        return FirstReader(None)
    recent = ctx.store.recent_audits(p.name, AUDIT_WINDOW)
    if sum(recent) >= MISS_BOUND:
        return FirstReader(model, f"{sum(recent)} misses in the last {len(recent)} audits",
                           ctx.store.read_first_only(p.name, ctx.kind, model))
    return FirstReader(model)


def reader_notes(r: PassResult, reader: FirstReader | None) -> None:
    """What the first reader did in the pass this session, on the pass's line."""
    if reader is None or not reader.model:
        return
    r.first_reader = reader.model
    if reader.suspended:
        r.notes.append(f"first reader suspended: {reader.suspended}; {reader.model} reads nothing, "
                       f"{len(reader.standing)} of its no's are askable again")
    if r.first_reads or r.audits or r.audits_batched:
        r.notes.append(f"first reads {r.first_reads} ({reader.model}): yes confirmed {r.first_confirmed}, "
                       f"not {r.first_unconfirmed}; audits {r.audits}, misses {r.misses}"
                       + (f"; {r.audits_batched} audit(s) in the batch" if r.audits_batched else ""))


BATCHED = "batched"  # an Outcome's kind: the question's next request went into this session's Message Batch


def gathered(ctx, judge, p, c: Candidate, one_order: bool = False) -> bool:
    """In a batch session, whether the question's next request by `judge` went into the batch (none was
    needed: its reply is in the cache or came in this session, and is read from there without a call)."""
    return ctx.batches.submitting and ctx.batches.gather(judge, p, c, one_order) > 0


async def read(p, c: Candidate, ctx, r: PassResult, reader: FirstReader) -> tuple[Outcome, str]:
    """Ask one question as the readers share it; returns the outcome that stands and the model that gave it
    (an Outcome of kind BATCHED: the reading it needs next waits in this session's Message Batch)."""
    strong = ctx.judge
    if not reader.reads:
        if gathered(ctx, strong, p, c):
            return Outcome(kind=BATCHED), strong.model
        out = await strong.ask(p, c)
        if reader.standing and c.fingerprint in reader.standing and out.kind == "verdict":
            miss = out.answer != p.default  # a standing first-reader no the judge model now reads: an audit
            ctx.store.add_audit(p.name, c.fingerprint, ctx.session, "audit", reader.model, strong.model, p.default,
                                out.answer, miss, c.score)
            r.audits += 1
            r.misses += miss
        return out, strong.model
    first = strong.reader(reader.model)
    if gathered(ctx, first, p, c, one_order=True):
        return Outcome(kind=BATCHED), first.model
    out = await first.ask(p, c, one_order=True)
    r.first_reads += out.kind == "verdict"
    if out.kind != "verdict":
        return out, first.model
    if out.answer == p.default:
        reader.pending.append(c)  # a candidate for this session's audits, chosen by rank once the pass has read
        return out, first.model
    if gathered(ctx, strong, p, c):  # the judge model reads the first yes in the next collection
        return Outcome(kind=BATCHED), strong.model
    again = await strong.ask(p, c)  # a first yes acts on nothing: the judge model decides
    if again.kind == "verdict":
        confirmed = again.answer == out.answer
        r.first_confirmed += confirmed
        r.first_unconfirmed += not confirmed
        ctx.store.add_audit(p.name, c.fingerprint, ctx.session, "confirm", first.model, strong.model, out.answer,
                            again.answer, False, c.score)
    return again, strong.model


async def audit(p, ctx, r: PassResult, reader: FirstReader, hold) -> list[tuple[float, Verdict]]:
    """The judge model reads again the highest-ranked first-reader no's of this round (by the candidate's score),
    as many as the session owes: a yes is a miss, kept as the judge model's verdict and returned to be applied.
    `hold()` names a cap reached or a stop: the audits not read then wait, their no's standing."""
    due = max(AUDIT_MIN, math.ceil(ctx.config.judge.audit_share * r.first_reads)) - r.audits - r.audits_batched
    picks = sorted(reader.pending, key=lambda c: -c.score)[:max(0, due)]
    reader.pending = []  # the rest stand as the first reader's verdicts
    found: list[tuple[float, Verdict]] = []

    async def one(c: Candidate) -> None:
        if hold():
            return
        if gathered(ctx, ctx.judge, p, c):  # read in the next collection (collected_audits); its no stands till then
            r.audits_batched += 1
            return
        await audit_one(p, c, ctx, r, reader.model, found, this_session=True)

    await asyncio.gather(*(one(c) for c in picks))
    return found


async def audit_one(p, c: Candidate, ctx, r: PassResult, first_model: str, found: list, this_session: bool) -> None:
    """The judge model's reading of a first-reader no: an audit, and a miss when it is not the default.

    `this_session`: the no was counted declined in this session's counts, and a miss moves it to resolved."""
    strong = ctx.judge
    out = await strong.ask(p, c)
    if out.kind != "verdict":
        return  # not read: the first reader's no stands
    miss = out.answer != p.default
    r.audits += 1
    r.misses += miss
    ctx.store.add_audit(p.name, c.fingerprint, ctx.session, "audit", first_model, strong.model, p.default,
                        out.answer, miss, c.score)
    v = verdict_of(p, c, out, strong.model, ctx)
    keep(ctx, v)  # after the first reader's no: the latest verdict on the question is the judge model's
    if v.is_yes:
        r.declined -= this_session
        r.resolved += 1
        found.append((c.score, v))


def audits_due(p, ctx, candidates, answered: set) -> list[Candidate]:
    """The answered candidates whose audit a batch bought and this session collected: a batch result for it
    came in, and the latest verdict is still a first reader's no (another model's than the judge model)."""
    if not ctx.batches.collected.get(p.name):
        return []  # most sessions: no batch came in, and the candidate list is not walked
    fps = ctx.batches.take_paid(p.name, answered & set(candidates.fingerprints))
    out = []
    for i, fp in enumerate(candidates.fingerprints):
        if fp in fps:
            v = ctx.store.verdict_for(p.name, fp)
            if v is not None and not v.is_yes and v.model != ctx.judge.model:
                out.append(candidates[i])
    return out


async def collected_audits(p, ctx, r: PassResult, due: list[Candidate]) -> list[Verdict]:
    """Read the audits a batch bought (audits_due): a miss is returned to be applied, and deposits into the
    balance as audit() does. A second order the judge model still needs goes into this session's batch."""
    found: list[tuple[float, Verdict]] = []

    async def one(c: Candidate) -> None:
        if gathered(ctx, ctx.judge, p, c):
            r.audits_batched += 1
            return
        v = ctx.store.verdict_for(p.name, c.fingerprint)
        await audit_one(p, c, ctx, r, v.model, found, this_session=False)

    await asyncio.gather(*(one(c) for c in due))
    ctx.allowances[p.name].deposit(len(found))
    return [v for _, v in sorted(found, key=lambda sv: -sv[0])]


def verdict_of(p, c: Candidate, out: Outcome, model: str, ctx) -> Verdict:
    """The verdict of an outcome the model `model` gave on candidate `c`."""
    return Verdict(pass_name=p.name, fingerprint=c.fingerprint, subject=c.subject, answer=out.answer,
                   is_yes=out.answer in p.yes, rationale=out.rationale, model=model, prompt=p.prompt.id,
                   attempts=out.attempts, calls=out.calls, agreement=out.agreement, tokens_in=out.tokens_in,
                   tokens_out=out.tokens_out, cost_usd=out.cost_usd, replies=out.replies, payload=out.payload,
                   session=ctx.session, judge=ctx.judge.kind, orders=out.orders, by_position=out.by_position,
                   score=c.score)


def note_skipped(p, ctx, r: PassResult, fingerprints: list[str], refused: set, busy: set) -> None:
    """Say which candidates were not asked because the API refused them, or a batch holds them."""
    fps = set(fingerprints)
    if fps & refused:
        r.notes.append(f"{len(fps & refused)} question(s) refused by the API in an earlier session: "
                       f"not asked again until their facts or the {p.name} prompt change")
    for batch_id, in_batch in ctx.batches.waiting(p.name).items():
        if in_batch & fps & busy:
            r.batched += len(in_batch & fps & busy)
            r.notes.append(f"waiting on batch {batch_id}, {ctx.batches.requests_in(batch_id, p.name)} requests")


async def judge_all(p, offer: list[Candidate], ctx, r: PassResult, paid: set = frozenset(),
                    owed: set = frozenset(), reader: FirstReader | None = None) -> list[Verdict]:
    """Stream candidates through a bounded queue to `concurrency` workers; store each verdict as it comes.

    In batch mode a question that needs a call is gathered for the session's Message Batch instead;
    `paid` questions (batch results collected this session) are judged whatever the cost cap says;
    `owed` ones (owed to fresh facts) whatever the balance says, still under the cost caps.
    """
    cfg = ctx.config.judge
    queue: asyncio.Queue = asyncio.Queue(maxsize=2 * cfg.concurrency)
    yes: list[tuple[float, Verdict]] = []
    stop = ctx.options.stop
    before = r.offered
    held: list[str] = []

    def hold(c: Candidate | None = None) -> str | None:
        """Why nothing new may be offered now, if so."""
        if stop is not None and stop.is_set():
            return "stopping"
        if (why := ctx.caps.reached(ctx.spent(), ctx.next_usd())) and (c is None or c.fingerprint not in paid):
            return why  # session, day or month: the rest waits
        return None

    allowance = ctx.allowances[p.name]

    async def produce():
        for c in offer:
            if hold(c):
                break
            # paid questions were charged when their batch was submitted; the rest take one from the balance,
            # waiting while questions in flight may still resolve something and deposit more
            if c.fingerprint in owed:
                allowance.owe(c.fingerprint)
            elif c.fingerprint not in paid and not allowance.worth_asking(c.fingerprint, c.score):
                continue  # not worth its reader's price (worth.py): it waits, and the next may be
            elif c.fingerprint not in paid and not await allowance.take(c.fingerprint):
                break
            await queue.put(c)
        # Not in a `finally`: once cancelled the workers are gone, and a put into a full queue never returns.
        for _ in range(cfg.concurrency):
            await queue.put(None)

    async def work():
        while (c := await queue.get()) is not None:
            budgeted = c.fingerprint not in paid
            # checked again here, not only at put: the queue holds candidates not yet paid for
            if reason := hold(c):
                held.append(reason)
                if budgeted:
                    allowance.settle(c.fingerprint, asked=False)
                continue
            r.offered += 1
            resolved = judged = False
            try:
                ctx.in_flight += 1  # what is with the judge counts toward the caps' next question
                try:
                    out, model = await read(p, c, ctx, r, reader or FirstReader(None))
                finally:
                    ctx.in_flight -= 1
                if out.kind == BATCHED:
                    r.batched += 1  # asked in the session's Message Batch; the next session collects the answer
                    continue
                ctx.asked += 1
                if out.kind == "verdict":
                    v = verdict_of(p, c, out, model, ctx)
                    keep(ctx, v)
                    r.judged += 1
                    judged = True
                    if v.is_yes:
                        resolved = True
                        r.resolved += 1
                        yes.append((c.score, v))
                    else:
                        r.declined += 1
                else:
                    setattr(r, out.kind, getattr(r, out.kind) + 1)
                    r.first_error = r.first_error or f"{out.kind}: {out.error}"
                    if out.kind == "refused" or out.truncated:  # remembered: not asked again until the fingerprint
                        # or prompt changes (a refusal, or a reply that ran out at max_tokens: never a paid loop)
                        ctx.store.add_refusal(p.name, c.fingerprint, model, p.prompt.id, c.subject,
                                              out.error, ctx.session)
            finally:  # the balance moves as each verdict comes back, not at the session's end
                if budgeted:
                    allowance.settle(c.fingerprint, asked=True, resolved=resolved, judged=judged)
                elif resolved:
                    allowance.deposit(1)

    tasks = [asyncio.ensure_future(produce()), *(asyncio.ensure_future(work()) for _ in range(cfg.concurrency))]
    try:
        await asyncio.gather(*tasks)
    finally:
        # A refused key in one worker stops all of them, before the session's own cleanup runs.
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if reader is not None and reader.pending:
        found = await audit(p, ctx, r, reader, hold)
        yes.extend(found)
        allowance.deposit(len(found))  # a miss the audit found resolved a question the balance already paid
    reason = hold() or (held[0] if held else None)
    if reason and len(offer) > r.offered - before:
        waiting = len(offer) - (r.offered - before)
        r.notes.append(f"{reason}: {waiting} candidate(s) wait" + (" for the next session" * (reason == "stopping")))
    return [v for _, v in sorted(yes, key=lambda sv: -sv[0])]


async def submit_batch(ctx, result) -> None:
    """Submit the questions gathered this session as a Message Batch, stored in the db before returning."""
    for batch_id, per_pass, error in await ctx.batches.submit(ctx.judge):
        for name, fps in per_pass.items():
            r = result.passes[name]
            if batch_id:
                r.notes.append(f"batch {batch_id}: {ctx.batches.requests_in(batch_id, name)} requests submitted")
            else:  # not submitted: as unavailable as a call that failed; asked again next session
                r.batched -= len(fps)
                r.unavailable += len(fps)
                r.first_error = r.first_error or f"unavailable: {error}"


def plan_dry(ctx, p, r: PassResult, offer: list[Candidate], result) -> None:
    """What a real session would offer, with its evidence and an estimate of calls and cost (both readers)."""
    cfg = ctx.config.judge
    scripted = ctx.options.judge.startswith("scripted:")
    reader = ctx.readers.get(p.name) or FirstReader(None)
    chars = sum(len(p.prompt.system) + len(p.prompt.render(c.orders[0])) for c in offer)
    per_call_in = chars / max(len(offer), 1) / 4  # ~4 characters a token

    def usd(model: str, calls: int) -> float | None:
        """`calls` of `model`: the answer, and thinking at judge.effort where it thinks (docs/real-api.md)."""
        price = ctx.config.price(model)
        if price is None:
            return None
        out = calls * price.usd(per_call_in, ctx.lineup.dialect(model, cfg.effort).expected_out(REPLY_TOKENS))
        return out * (1 - price.batch_discount) if ctx.batches.submitting else out  # one batch: the batch price

    if reader.reads:  # one order each by the first reader; its top no's audited by the judge model
        first, strong = len(offer), min(len(offer), max(AUDIT_MIN, math.ceil(cfg.audit_share * len(offer))))
        parts = [usd(reader.model, first), usd(cfg.model, strong)]
        how = f" ({first} by {reader.model}, {strong} audits; a first yes adds the judge model's reading)"
    else:  # the first order of each, both for the swap sample; a first answer not the default adds its second
        first, strong = 0, cfg.samples * sum(1 + (cfg.position_swap and len(c.orders) == 2
                                                  and swap_sampled(c.fingerprint, cfg.swap_sample)) for c in offer)
        parts, how = [usd(cfg.model, strong)], ""
    calls = first + strong
    # recorded replies cost nothing, and nor does asking nothing; a model with no price is unknown
    estimate = 0.0 if scripted or not calls else None if None in parts else sum(parts)
    result.estimates[p.name] = {"questions": len(offer), "calls": calls,
                                "estimate_usd": None if estimate is None else round(estimate, 6)}
    r.offered = len(offer)
    r.notes.append(f"would ask {len(offer)} question(s) = {calls} call(s)" + how
                   + (f", about ${estimate:.4f}" if estimate is not None else "")
                   + (" at batch prices" if ctx.batches.submitting else ""))
    result.plan[p.name] = [{"subject": c.subject, "score": round(c.score, 4), "evidence": c.orders[0]} for c in offer]
