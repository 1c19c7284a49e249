"""The asking of a round: the questions a round offers go through a bounded queue to `concurrency` workers, and
each verdict is kept as it comes. What may be offered (a stop, the dollar caps, the balance and the worth rule)
is decided as each question is put; what a reading becomes (a verdict, a fault, a refusal remembered) as each
comes back. Who reads a question is readers.py; the audits after the round, rereads.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..judge import Outcome
from ..passes import Candidate
from ..verdicts import Verdict
from .batch import BATCHED
from .context import HELD, PassRun
from .decisions import keep, verdict_of
from .readers import read
from .rereads import audit

# Questions in a row whose every reading came back unavailable (each after its judge.max_attempts) after which the
# pass offers nothing more this session: with both models down, at most DEAD_AFTER + judge.concurrency - 1 are read.
DEAD_AFTER = 5


@dataclass
class Offer:
    """What a round offers a pass, best first, and what passes which limit."""

    questions: list[Candidate]
    # batch results collected this session: judged whatever the cost cap says
    paid: set[str]
    # owed to fresh facts: asked whatever the balance says, still under the cost caps
    owed: set[str]


class Hold:
    """Why nothing new may be offered now, if so: a stop, a pass whose reads all fail, a reading the balance or a
    cap could not pay, or a dollar cap the next question would cross at the price of the model that would read it
    (which a paid question passes)."""

    def __init__(self, run: PassRun, paid: set[str]) -> None:
        self.ctx, self.paid, self.reader = run.ctx, paid, run.reader
        # a reading came back HELD: the rest waits
        self.blocked: str | None = None

    def model(self, c: Candidate) -> str:
        """The model that would read `c` first: the first reader's while it reads it, else the judge model's."""
        return (
            self.reader.model
            if self.reader.model and self.reader.reads_first(c.fingerprint)
            else self.ctx.config.judge.model
        )

    def __call__(self, c: Candidate | None = None) -> str | None:
        return self.fixed(c) or self.cap(c)

    def fixed(self, c: Candidate | None = None) -> str | None:
        """What holds `c` whatever the readings in flight cost: a stop, a pass whose reads all fail, a reading
        that could not be paid."""
        stop = self.ctx.options.stop
        if stop is not None and stop.is_set():
            return "stopping"
        if self.reader.failing >= DEAD_AFTER:
            return f"the API answered none of the last {DEAD_AFTER} question(s) (unavailable)"
        return None if c is not None and c.fingerprint in self.paid else self.blocked

    def cap(self, c: Candidate | None = None) -> str | None:
        """The dollar cap (session, day or month) reading `c` would cross at the price of the model that would read
        it, counted with the readings in flight; a paid question passes."""
        if c is None:
            return self.ctx.capped()
        if c.fingerprint in self.paid:
            return None
        judge = self.ctx.judge
        reader = judge if self.model(c) == judge.model else judge.reader(self.model(c))
        return self.ctx.capped(self.ctx.read_usd(reader, c, one_order=reader is not judge), reader.model)

    async def clear(self, c: Candidate) -> str | None:
        """What holds `c`; a cap only once the readings in flight, counted at their most, have ended."""
        while not self.fixed(c) and self.cap(c) and self.ctx.in_flight.count:
            await self.ctx.in_flight.one_ended()
        return self(c)


class Pool:
    """One round's workers for one pass: a producer offers, `concurrency` workers read and keep."""

    def __init__(self, run: PassRun, offer: Offer) -> None:
        self.pass_run, self.offer = run, offer
        self.p, self.ctx, self.r, self.reader, self.allowance = run.p, run.ctx, run.result, run.reader, run.allowance
        self.hold = Hold(run, offer.paid)
        self.concurrency = self.ctx.config.judge.concurrency
        self.queue: asyncio.Queue[Candidate | None] = asyncio.Queue(maxsize=2 * self.concurrency)
        self.yes: list[tuple[float, Verdict]] = []
        # why workers put back what the producer had offered, or could not read it
        self.held: list[str] = []
        # why the producer stopped offering, if it did
        self.stopped: str | None = None

    async def run(self) -> None:
        tasks = [
            asyncio.ensure_future(self.produce()),
            *(asyncio.ensure_future(self.work()) for _ in range(self.concurrency)),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            # A refused key in one worker stops all of them, before the session's own cleanup runs.
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def produce(self) -> None:
        """Offer the questions best first while nothing holds, each as the balance and the worth rule allow."""
        paid, owed = self.offer.paid, self.offer.owed
        # A suspended first reader's standing no's are audits, not reads the curve prices: the pass's verdicts say
        # how often a question resolves, not how often that reader missed, and they are the evidence its way back
        # reads.
        audits_again = self.reader.askable
        share = self.ctx.config.judge.audit_share * self.allowance.price(self.ctx.config.judge.model)
        for c in self.offer.questions:
            if why := await self.hold.clear(c):
                self.stopped = why
                break
            # paid questions were charged when their batch was submitted; the rest take one read at the price of
            # the model that would read it (and, read first, its audit share), waiting while questions in flight
            # may still resolve something and deposit more
            model = self.hold.model(c)
            price = self.allowance.price(model)
            if c.fingerprint in owed:
                self.allowance.owe(c.fingerprint, price)
            elif (
                c.fingerprint not in paid
                and c.fingerprint not in audits_again
                and not self.allowance.worth_asking(c.fingerprint, c.score, model)
            ):
                # not worth its reader's price (worth.py): it waits, and the next may be
                continue
            elif c.fingerprint not in paid and not await self.allowance.take(
                c.fingerprint, price, share if model != self.ctx.config.judge.model else 0.0
            ):
                break
            await self.queue.put(c)
        # Not in a `finally`: once cancelled the workers are gone, and a put into a full queue never returns.
        for _ in range(self.concurrency):
            await self.queue.put(None)

    async def work(self) -> None:
        """Read what is offered; the balance moves as each verdict comes back, not at the session's end."""
        while (c := await self.queue.get()) is not None:
            budgeted = c.fingerprint not in self.offer.paid
            # checked again here, not only at put: the queue holds candidates not yet paid for
            if reason := await self.hold.clear(c):
                self.held.append(reason)
                if budgeted:
                    self.allowance.settle(c.fingerprint, asked=False)
                continue
            self.r.offered += 1
            v, spent = None, True
            try:
                out, model, audited = await read(self.pass_run, c)
                if out.kind == BATCHED:
                    # asked in the session's Message Batch; the next session collects it
                    self.r.batched += 1
                    if budgeted:
                        self.allowance.spend(c.fingerprint, self.allowance.taken.get(c.fingerprint, 0.0))
                    continue
                # not decided: it waits, its first reader's reply (if any) in the cache
                if out.kind == HELD:
                    # counted with the round's questions left waiting (judge_all)
                    self.r.offered -= 1
                    self.held.append(out.error)
                    self.hold.blocked = self.hold.blocked or out.error
                    spent = c.fingerprint in self.allowance.spent
                    continue
                v = self.came_back(c, out, model, audited)
            finally:
                resolved = v is not None and v.is_yes
                if budgeted:
                    self.allowance.settle(c.fingerprint, asked=spent, resolved=resolved, judged=v is not None)
                elif resolved:
                    self.allowance.deposit(1)

    def came_back(self, c: Candidate, out: Outcome, model: str, audited: dict[str, Any] | None) -> Verdict | None:
        """What a reading becomes: a verdict kept and counted, or a fault counted (a refusal remembered)."""
        p, ctx, r = self.p, self.ctx, self.r
        # the API answered (a verdict, a reply it could not parse, a refusal), or it did not
        self.reader.failing = self.reader.failing + 1 if out.kind == "unavailable" else 0
        if out.kind == "verdict":
            v = verdict_of(self.pass_run, c, out, model, audited)
            keep(ctx, v)
            r.judged += 1
            if v.is_yes:
                r.resolved += 1
                self.yes.append((c.score, v))
            else:
                r.declined += 1
            return v
        setattr(r, out.kind, getattr(r, out.kind) + 1)
        r.first_error = r.first_error or f"{out.kind}: {out.error}"
        # remembered: not asked again until the fingerprint
        if out.kind == "refused" or out.truncated:
            # or prompt changes (a refusal, or a reply that ran out at max_tokens: never a paid loop)
            ctx.store.add_refusal(
                p.name, c.fingerprint, model, p.prompt.id, c.subject, error=out.error, session=ctx.session
            )
        return None


async def judge_all(run: PassRun, offer: Offer) -> list[Verdict]:
    """Ask what the round offers, then the audits its first reader's no's owe; the yeses, best first.

    In batch mode a question that needs a call is gathered for the session's Message Batch instead. What the
    caps or a stop held back is added to `r.waiting`, with a note saying why.
    """
    r, reader = run.result, run.reader
    pool = Pool(run, offer)
    before = r.offered
    await pool.run()
    # a pass that read nothing this round draws no audits; a suspended one reads its standing no's
    if reader.pending or reader.suspended and reader.standing_to_draw:
        found = await audit(run, pool.hold)
        pool.yes.extend(found)
        # a miss the audit found resolved a question the balance already paid
        pool.allowance.deposit(len(found))
    pool.allowance.close_round()
    # held back by the cost cap or a stop
    left = len(offer.questions) - (r.offered - before)
    r.waiting += left
    reason = pool.stopped or pool.hold() or (pool.held[0] if pool.held else None)
    if reason and left:
        r.notes.append(f"{reason}: {left} candidate(s) wait" + (" for the next session" * (reason == "stopping")))
    return [v for _, v in sorted(pool.yes, key=lambda sv: -sv[0])]
