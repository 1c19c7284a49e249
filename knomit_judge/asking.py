"""Asking: which model reads a question, in which order, when the judge model reads it again, the audits of the
first reader, and what goes into a Message Batch. The session's spine (review.py) calls judge_all.

Two readers (DESIGN "The judge client"). The first reader (judge.first_reader, the cheapest current model) reads
every offered question in one order. Its no is a verdict like any other (fingerprinted, journalled, its model
recorded); its yes acts on nothing: the question goes to judge.model, asked as always (one order, the second only
after a yes, both must agree), and only that agreeing yes is applied. Once a pass has read, some of its no's are
read again by judge.model: audits, drawn with recorded inclusion probabilities (audits.py) among the session's
no's and the older ones the judge model has not read, so no miss is lost for good. A yes there is a miss, kept as
the judge model's verdict and applied. The window's audits estimate the first reader's recall; when the evidence
puts it below judge.first_reader_recall, or the judge model rejects most of its yeses, the pass reads with
judge.model alone and its standing no's are asked again, highest pi first, until the window clears
(docs/choices.md). A first reader that is unavailable or refuses hands the question to judge.model in the same
session. The scripted judge reads alone.

A Message Batch keeps the readers: a batch session gathers the first reader's one order into its batch, at the
first reader's batch price; once that reply is in (a later session collects it), a yes gathers the judge
model's reading, and the audits drawn among the no's gather theirs, into that session's batch, read in the next
collection (collected_audits). An audit read from a batch counts as an audit and a miss, but outside the draw's
design (stratum "batched"): a floor no it left unread counts as a miss in the bound until it is read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from . import audits
from .decisions import keep
from .judge import REPLY_TOKENS, Outcome, swap_sampled
from .passes import Candidate
from .status import PassResult
from .verdicts import Verdict

DOWN_AFTER = 3  # unavailable answers in a row after which the judge model reads the rest of the session alone


@dataclass
class FirstReader:
    """The first reader of one pass in this session: whether it reads, and what it did."""

    model: str | None  # None: the judge model reads alone
    suspended: str = ""  # why it does not read this session (the evidence of audits.Estimate.reason)
    standing: dict = field(default_factory=dict)  # its no's the judge model has not read: fingerprint -> session
    pending: list = field(default_factory=list)  # this session's no's, among which the audits are drawn
    pool: list = field(default_factory=list)  # standing no's among this round's candidates, drawn from too
    refused: set = field(default_factory=set)  # questions it refused: the judge model reads them
    estimate: audits.Estimate = field(default_factory=audits.Estimate)
    target: float = 0.0  # judge.first_reader_recall
    down: int = 0  # unavailable answers in a row this session
    handed: dict = field(default_factory=lambda: {"unavailable": 0, "refused": 0})  # questions handed over
    drawn: audits.Draw = field(default_factory=audits.Draw)  # the session's draws so far, over its rounds

    @property
    def reads(self) -> bool:
        return bool(self.model) and not self.suspended

    @property
    def state(self) -> str:
        return "off" if not self.model else "suspended" if self.suspended else "reading"

    @property
    def askable(self) -> set:
        """Answered questions asked again this session: a suspended reader's standing no's."""
        return set(self.standing) if self.suspended else set()


def first_reader(ctx, p, fps: list[str]) -> FirstReader:
    """Who reads the pass's questions first this session, from the config and the window's audits; `fps`, the
    round's candidates, tell whether any of its no's still stand unread by the judge model."""
    model = ctx.config.models().get("judge.first_reader")  # none when off, or the judge model itself
    if model is None or ctx.kind != "anthropic":
        return FirstReader(None)
    target = ctx.config.judge.first_reader_recall
    est = audits.estimate(ctx.store, p.name, model)
    standing = ctx.store.read_first_only(p.name, ctx.kind, model)
    all_read = not any(fp in standing for fp in fps)  # a changed fingerprint is a new question: not owed a reading
    return FirstReader(model, est.reason(target, all_read), standing,
                       refused=ctx.store.refused(p.name, p.prompt.id, model), estimate=est, target=target)


def meet(reader: FirstReader, candidates, fps: list[str]) -> None:
    """Take this round's standing no's into the audit pool (a changed fingerprint is a new question: not here)."""
    if reader.model and reader.standing:
        seen = {c.fingerprint for c in reader.pool}
        reader.pool += [candidates[i] for i, fp in enumerate(fps) if fp in reader.standing and fp not in seen]


def standing_first(reader: FirstReader | None, ctx, p, rest: list[Candidate], owed: set) -> list[Candidate]:
    """While suspended, the standing no's are read after the owed, highest pi (the miss-chance fit) first."""
    if reader is None or not reader.suspended:
        return rest
    fit = audits.fit(ctx.store, p.name, reader.model)
    return sorted(rest, key=lambda c: (c.fingerprint not in owed, c.fingerprint not in reader.standing,
                                       -fit.weight(c.score) if c.fingerprint in reader.standing else 0.0))


def reader_notes(r: PassResult, reader: FirstReader | None) -> None:
    """What the first reader did in the pass this session, and what the window says of it, on the pass's line."""
    if reader is None or not reader.model:
        return
    r.first_reader = reader.model
    r.first_reader_state = reader.state
    if reader.suspended:
        r.notes.append(f"first reader suspended: {reader.suspended}; {reader.model} reads nothing, "
                       f"{len(reader.standing)} of its no's are askable again")
    handed = sum(reader.handed.values())
    r.handed_over = handed
    if handed:
        why = ", ".join(f"{k} {n}" for k, n in reader.handed.items() if n)
        r.notes.append(f"{handed} question(s) handed to the judge model: {reader.model} {why}")
    if r.first_reads or r.audits or r.audits_batched:
        r.notes.append(f"first reads {r.first_reads} ({reader.model}): yes confirmed {r.first_confirmed}, "
                       f"not {r.first_unconfirmed}; audits {r.audits}, misses {r.misses}"
                       + (f"; {r.audits_batched} audit(s) in the batch" if r.audits_batched else ""))
    if line := reader.estimate.line(reader.target):
        r.notes.append(line)


BATCHED = "batched"  # an Outcome's kind: the question's next request went into this session's Message Batch


def gathered(ctx, judge, p, c: Candidate, one_order: bool = False) -> bool:
    """In a batch session, whether the question's next request by `judge` went into the batch (none was
    needed: its reply is in the cache or came in this session, and is read from there without a call)."""
    return ctx.batches.submitting and ctx.batches.gather(judge, p, c, one_order) > 0


def audit_of(kind: str, reader_model: str, first_answer: str, c: Candidate, born: str, pi: float | None,
             stratum: str) -> dict:
    """What a judge model's verdict records of the first-reader answer it read again."""
    return {"kind": kind, "first_model": reader_model, "first_answer": first_answer, "pi": pi, "stratum": stratum,
            "born": born, "score": c.score}


async def read(p, c: Candidate, ctx, r: PassResult, reader: FirstReader) -> tuple[Outcome, str, dict | None]:
    """Ask one question as the readers share it; returns the outcome that stands, the model that gave it, and
    what its verdict records of an audit (an Outcome of kind BATCHED: the reading it needs next waits in this
    session's Message Batch)."""
    strong = ctx.judge
    fp = c.fingerprint
    if reader.reads and reader.down < DOWN_AFTER and fp not in reader.refused:
        first = strong.reader(reader.model)
        if gathered(ctx, first, p, c, one_order=True):
            return Outcome(kind=BATCHED), first.model, None
        out = await first.ask(p, c, one_order=True)
        if out.kind == "verdict":
            reader.down = 0
            r.first_reads += 1
            if out.answer == p.default:
                reader.pending.append(c)  # among this session's draw of audits, once the pass has read
                return out, first.model, None
            if gathered(ctx, strong, p, c):  # the judge model reads the first yes in the next collection
                return Outcome(kind=BATCHED), strong.model, None
            again = await strong.ask(p, c)  # a first yes acts on nothing: the judge model decides
            if again.kind != "verdict":
                return again, strong.model, None
            confirmed = again.answer == out.answer
            r.first_confirmed += confirmed
            r.first_unconfirmed += not confirmed
            return again, strong.model, audit_of("confirm", first.model, out.answer, c, ctx.session, 1.0, "confirm")
        if out.kind == "unparsed" and not out.truncated:
            return out, first.model, None
        # unavailable after its retries, refused, or cut at max_tokens: the judge model reads it this session
        if out.kind == "unavailable":
            reader.down += 1
            reader.handed["unavailable"] += 1
        else:  # kept per model: the first reader is not asked it again, the judge model still is
            ctx.store.add_refusal(p.name, fp, first.model, p.prompt.id, c.subject, out.error, ctx.session)
            reader.refused.add(fp)
            reader.handed["refused"] += 1
    elif reader.reads:  # known refused by the first reader, or the first reader is down this session
        reader.handed["refused" if fp in reader.refused else "unavailable"] += 1
    if gathered(ctx, strong, p, c):
        return Outcome(kind=BATCHED), strong.model, None
    out = await strong.ask(p, c)
    if reader.model and fp in reader.standing and out.kind == "verdict":
        miss = out.answer != p.default  # a standing first-reader no the judge model now reads: an audit
        r.audits += 1
        r.misses += miss
        # a standing no is offered again only while its reader is suspended (FirstReader.askable)
        return out, strong.model, audit_of("audit", reader.model, p.default, c, reader.standing.pop(fp), None,
                                           "suspended")
    return out, strong.model, None


async def audit(p, ctx, r: PassResult, reader: FirstReader, hold) -> list[tuple[float, Verdict]]:
    """The judge model reads again the first-reader no's this session's seeded draw picks (audits.draw), among
    the round's no's and the standing ones: a yes is a miss, kept as the judge model's verdict and returned to be
    applied. While suspended, the standing no's the balance left unread: the top ones by pi, audits.TOP a
    session. `hold()` names a cap reached or a stop: the audits not read then wait, their no's standing."""
    new = {c.fingerprint: c for c in reader.pending}
    pool = {c.fingerprint: c for c in reader.pool if c.fingerprint not in new and c.fingerprint in reader.standing}
    reader.pending, reader.pool = [], []
    if reader.suspended:
        return await standing_audits(p, ctx, r, reader, pool, hold)
    cfg = ctx.config.judge
    so_far = reader.drawn  # a later round of the session draws with what the earlier ones left
    d = audits.draw(ctx.session, p.name, [(fp, c.score) for fp, c in new.items()],
                    [(fp, c.score, reader.standing[fp]) for fp, c in pool.items()], r.first_reads, cfg.audit_share,
                    reader.target, reader.estimate.confirmed, audits.fit(ctx.store, p.name, reader.model),
                    spent=so_far.expected, tops=audits.TOP - so_far.tops)
    if not d.pi:
        return []
    # the session's record: its lowest floor (each new no faced at least that), its no's, its pi summed
    floor = min(so_far.floor, d.floor) if so_far.new and d.new else d.floor if d.new else so_far.floor
    reader.drawn = audits.Draw(floor=floor, new=so_far.new + d.new, standing=d.standing,
                               expected=so_far.expected + d.expected, tops=so_far.tops + d.tops)
    ctx.store.add_draw(ctx.session, p.name, reader.model, reader.drawn.floor, reader.drawn.new, d.standing,
                       reader.drawn.expected)
    strong, found, every = ctx.judge, [], {**pool, **new}

    async def one(fp: str) -> None:
        c = every[fp]
        if hold():
            return
        if gathered(ctx, strong, p, c):  # read in the next collection (collected_audits); its no stands till then
            r.audits_batched += 1
            return
        out = await strong.ask(p, c)
        if out.kind != "verdict":
            return  # not read: the first reader's no stands, in the pool
        miss = out.answer != p.default
        r.audits += 1
        r.misses += miss
        v = verdict_of(p, c, out, strong.model, ctx,
                       audit_of("audit", reader.model, p.default, c, d.born[fp], d.pi[fp], d.stratum[fp]))
        keep(ctx, v)  # after the first reader's no: the latest verdict on the question is the judge model's
        reader.standing.pop(fp, None)
        if v.is_yes:
            if fp in new:  # counted declined when the first reader said no this session
                r.declined -= 1
            r.resolved += 1
            found.append((c.score, v))

    await asyncio.gather(*(one(fp) for fp in d.picked))
    return found


async def standing_audits(p, ctx, r: PassResult, reader: FirstReader, pool: dict, hold) -> list[tuple[float, Verdict]]:
    """A suspended reader's standing no's the balance did not reach this session: audits.TOP of them, highest pi
    (the miss-chance fit) first, read by the judge model outside the balance, as audits are, so a miss standing
    low in the list is not lost while the throttle holds the pass to its owed questions."""
    left = audits.TOP - reader.drawn.tops
    if left <= 0 or not pool:
        return []
    fit = audits.fit(ctx.store, p.name, reader.model)
    picks = sorted(pool.values(), key=lambda c: -fit.weight(c.score))[:left]
    reader.drawn.tops += len(picks)
    found = []
    for c in picks:
        if hold():
            break
        if gathered(ctx, ctx.judge, p, c):
            r.audits_batched += 1
            continue
        out = await ctx.judge.ask(p, c)
        if out.kind != "verdict":
            continue
        miss = out.answer != p.default
        r.audits += 1
        r.misses += miss
        v = verdict_of(p, c, out, ctx.judge.model, ctx,
                       audit_of("audit", reader.model, p.default, c, reader.standing.pop(c.fingerprint), None,
                                "suspended"))
        keep(ctx, v)
        if v.is_yes:
            r.resolved += 1
            found.append((c.score, v))
    return found


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
        first = ctx.store.verdict_for(p.name, c.fingerprint)
        out = await ctx.judge.ask(p, c)
        if out.kind != "verdict":
            return  # not read: the first reader's no stands
        r.audits += 1
        r.misses += out.answer != p.default
        # outside the draw's design: its pi stayed with the session that gathered it (docstring)
        v = verdict_of(p, c, out, ctx.judge.model, ctx,
                       audit_of("audit", first.model, p.default, c, first.session, None, "batched"))
        keep(ctx, v)
        if v.is_yes:
            r.resolved += 1
            found.append((c.score, v))

    await asyncio.gather(*(one(c) for c in due))
    ctx.allowances[p.name].deposit(len(found))
    return [v for _, v in sorted(found, key=lambda sv: -sv[0])]


def verdict_of(p, c: Candidate, out: Outcome, model: str, ctx, audit: dict | None = None) -> Verdict:
    """The verdict of an outcome the model `model` gave on candidate `c` (with `audit`: a first-reader answer read
    again, audits.py)."""
    return Verdict(pass_name=p.name, fingerprint=c.fingerprint, subject=c.subject, answer=out.answer,
                   is_yes=out.answer in p.yes, rationale=out.rationale, model=model, prompt=p.prompt.id,
                   attempts=out.attempts, calls=out.calls, agreement=out.agreement, tokens_in=out.tokens_in,
                   tokens_out=out.tokens_out, cost_usd=out.cost_usd, replies=out.replies, payload=out.payload,
                   session=ctx.session, judge=ctx.judge.kind, orders=out.orders, by_position=out.by_position,
                   score=c.score, audit=audit)


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

    # A suspended first reader's standing no's are audits, not reads the curve prices: the pass's verdicts say how
    # often a question resolves, not how often that reader missed, and they are the evidence its way back reads.
    audits_again = reader.askable if reader is not None else set()

    async def produce():
        for c in offer:
            if hold(c):
                break
            # paid questions were charged when their batch was submitted; the rest take one from the balance,
            # waiting while questions in flight may still resolve something and deposit more
            if c.fingerprint in owed:
                allowance.owe(c.fingerprint)
            elif c.fingerprint not in paid and c.fingerprint not in audits_again \
                    and not allowance.worth_asking(c.fingerprint, c.score):
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
                    out, model, audit_rec = await read(p, c, ctx, r, reader or FirstReader(None))
                finally:
                    ctx.in_flight -= 1
                if out.kind == BATCHED:
                    r.batched += 1  # asked in the session's Message Batch; the next session collects the answer
                    continue
                ctx.asked += 1
                if out.kind == "verdict":
                    v = verdict_of(p, c, out, model, ctx, audit_rec)
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
    # a pass that read nothing this round draws no audits; a suspended one reads its standing no's
    if reader is not None and (reader.pending or reader.suspended and reader.pool):
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

    if reader.reads:  # one order each by the first reader; the audits it would draw, read by the judge model
        # priced as if every offered question came back a no: the draw's pi summed is the audits it expects
        d = audits.draw(ctx.session, p.name, [(c.fingerprint, c.score) for c in offer], [], len(offer),
                        cfg.audit_share, reader.target, reader.estimate.confirmed,
                        audits.fit(ctx.store, p.name, reader.model))
        first, strong = len(offer), round(d.expected)
        parts = [usd(reader.model, first), usd(cfg.model, strong)]
        how = (f" ({first} by {reader.model}, about {d.expected:.1f} audits drawn, floor {d.floor:.3f}; "
               "a first yes adds the judge model's reading)")
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
