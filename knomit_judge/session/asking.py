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
from ..passes.base import Pass
from ..status import PassResult
from ..verdicts import Verdict
from .batch import BATCHED
from .context import Context, FirstReader
from .decisions import keep, verdict_of
from .readers import read
from .rereads import audit


@dataclass
class Offer:
    """What a round offers a pass, best first, and what passes which limit."""

    questions: list[Candidate]
    paid: set[str]  # batch results collected this session: judged whatever the cost cap says
    owed: set[str]  # owed to fresh facts: asked whatever the balance says, still under the cost caps


class Hold:
    """Why nothing new may be offered now, if so: a stop, or a dollar cap (which a paid question passes)."""

    def __init__(self, ctx: Context, paid: set[str]) -> None:
        self.ctx, self.paid = ctx, paid

    def __call__(self, c: Candidate | None = None) -> str | None:
        stop = self.ctx.options.stop
        if stop is not None and stop.is_set():
            return "stopping"
        if (why := self.ctx.caps.reached(self.ctx.spent(), self.ctx.next_usd())) and \
                (c is None or c.fingerprint not in self.paid):
            return why  # session, day or month: the rest waits
        return None


class Pool:
    """One round's workers for one pass: a producer offers, `concurrency` workers read and keep."""

    def __init__(self, p: Pass, ctx: Context, r: PassResult, offer: Offer, reader: FirstReader) -> None:
        self.p, self.ctx, self.r, self.offer, self.reader = p, ctx, r, offer, reader
        self.hold = Hold(ctx, offer.paid)
        self.allowance = ctx.allowances[p.name]
        self.concurrency = ctx.config.judge.concurrency
        self.queue: asyncio.Queue[Candidate | None] = asyncio.Queue(maxsize=2 * self.concurrency)
        self.yes: list[tuple[float, Verdict]] = []
        self.held: list[str] = []  # why workers put back what the producer had offered

    async def run(self) -> None:
        tasks = [asyncio.ensure_future(self.produce()),
                 *(asyncio.ensure_future(self.work()) for _ in range(self.concurrency))]
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
        for c in self.offer.questions:
            if self.hold(c):
                break
            # paid questions were charged when their batch was submitted; the rest take one from the balance,
            # waiting while questions in flight may still resolve something and deposit more
            if c.fingerprint in owed:
                self.allowance.owe(c.fingerprint)
            elif c.fingerprint not in paid and c.fingerprint not in audits_again \
                    and not self.allowance.worth_asking(c.fingerprint, c.score):
                continue  # not worth its reader's price (worth.py): it waits, and the next may be
            elif c.fingerprint not in paid and not await self.allowance.take(c.fingerprint):
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
            if reason := self.hold(c):
                self.held.append(reason)
                if budgeted:
                    self.allowance.settle(c.fingerprint, asked=False)
                continue
            self.r.offered += 1
            v = None
            try:
                self.ctx.in_flight += 1  # what is with the judge counts toward the caps' next question
                try:
                    out, model, audited = await read(self.p, c, self.ctx, self.r, self.reader)
                finally:
                    self.ctx.in_flight -= 1
                if out.kind == BATCHED:
                    self.r.batched += 1  # asked in the session's Message Batch; the next session collects it
                    continue
                v = self.came_back(c, out, model, audited)
            finally:
                resolved = v is not None and v.is_yes
                if budgeted:
                    self.allowance.settle(c.fingerprint, asked=True, resolved=resolved, judged=v is not None)
                elif resolved:
                    self.allowance.deposit(1)

    def came_back(self, c: Candidate, out: Outcome, model: str, audited: dict[str, Any] | None) -> Verdict | None:
        """What a reading becomes: a verdict kept and counted, or a fault counted (a refusal remembered)."""
        p, ctx, r = self.p, self.ctx, self.r
        ctx.asked += 1
        if out.kind == "verdict":
            v = verdict_of(p, c, out, model, ctx, audited)
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
        if out.kind == "refused" or out.truncated:  # remembered: not asked again until the fingerprint
            # or prompt changes (a refusal, or a reply that ran out at max_tokens: never a paid loop)
            ctx.store.add_refusal(p.name, c.fingerprint, model, p.prompt.id, c.subject, out.error, ctx.session)
        return None


async def judge_all(p: Pass, ctx: Context, r: PassResult, offer: Offer, reader: FirstReader) -> list[Verdict]:
    """Ask what the round offers, then the audits its first reader's no's owe; the yeses, best first.

    In batch mode a question that needs a call is gathered for the session's Message Batch instead. What the
    caps or a stop held back is added to `r.waiting`, with a note saying why.
    """
    pool = Pool(p, ctx, r, offer, reader)
    before = r.offered
    await pool.run()
    # a pass that read nothing this round draws no audits; a suspended one reads its standing no's
    if reader.pending or reader.suspended and reader.pool:
        found = await audit(p, ctx, r, reader, pool.hold)
        pool.yes.extend(found)
        pool.allowance.deposit(len(found))  # a miss the audit found resolved a question the balance already paid
    left = len(offer.questions) - (r.offered - before)  # held back by the cost cap or a stop
    r.waiting += left
    reason = pool.hold() or (pool.held[0] if pool.held else None)
    if reason and left:
        r.notes.append(f"{reason}: {left} candidate(s) wait" + (" for the next session" * (reason == "stopping")))
    return [v for _, v in sorted(pool.yes, key=lambda sv: -sv[0])]
