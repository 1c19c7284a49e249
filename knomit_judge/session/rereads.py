"""The judge model reading a first reader's no again: the audits a session draws, a suspended reader's standing
no's, and the audits a Message Batch bought. A yes is a miss, kept as the judge model's verdict and applied.

Who reads first, and when an audit is owed, is readers.py; the draw's statistics are audits.py. An audit read
from a batch counts as an audit and a miss, but outside the draw's design (stratum "batched"): a floor no it
left unread counts as a miss in the bound until it is read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import audits
from ..candidate_lists import CandidateList
from ..judge import Outcome
from ..passes import Candidate
from ..verdicts import Verdict, draw_record, now_text
from .batch import gathered
from .context import PassRun
from .decisions import keep, verdict_of


@dataclass(frozen=True)
class FirstAnswer:
    """A first reader's answer the judge model reads (or, for a shadow read, that was read after it): by which
    model, what it said, the session it was born in, and how it was drawn (its pi and stratum, audits.py)."""

    model: str
    answer: str | None
    born: str | None
    pi: float | None
    stratum: str


def audit_of(kind: str, first: FirstAnswer, c: Candidate) -> dict[str, Any]:
    """What a judge model's verdict records of the first-reader answer it read again."""
    return {
        "kind": kind,
        "first_model": first.model,
        "first_answer": first.answer,
        "pi": first.pi,
        "stratum": first.stratum,
        "born": first.born,
        "score": c.score,
    }


def counted(run: PassRun, c: Candidate, out: Outcome, first_no: FirstAnswer) -> dict[str, Any]:
    """The judge model's reading of a first-reader no, counted as an audit (a yes is a miss); what its verdict
    records of it."""
    run.result.audits += 1
    run.result.misses += out.answer != run.p.default
    return audit_of("audit", first_no, c)


async def reread(run: PassRun, c: Candidate, first_no: FirstAnswer) -> Verdict | None:
    """The judge model reads a first-reader no again, charged to the balance as it is made (the round's first reads
    put its share by) and held by the dollar caps: its verdict kept (a yes counted resolved), or None when its
    request went into this session's batch or it could not be read, or paid (the no stands)."""
    ctx, r = run.ctx, run.result
    # read in the next collection (collected_audits); its no stands till then
    if gathered(run, ctx.judge, c):
        r.audits_batched += 1
        return None
    out = await run.ask(c, ctx.judge, offered=False)
    if out.kind != "verdict":
        return None
    v = verdict_of(run, c, out, ctx.judge.model, counted(run, c, out, first_no))
    # after the first reader's no: the latest verdict on the question is the judge model's
    keep(ctx, v)
    if v.is_yes:
        r.resolved += 1
    return v


async def audit(run: PassRun, hold: Callable[[], str | None]) -> list[tuple[float, Verdict]]:
    """The judge model reads again the first-reader no's this session's seeded draw picks (audits.draw), among
    the round's no's and the standing ones: a yes is a miss, returned to be applied. While suspended, the standing
    no's the balance left unread: the top ones by pi, audits.TOP a session. `hold()` names a cap reached or a
    stop: the audits not read then wait, their no's standing."""
    p, ctx, r, reader = run.p, run.ctx, run.result, run.reader
    assert reader.model is not None, "only a first reader's no's are audited"
    model = reader.model
    new = {c.fingerprint: c for c in reader.pending}
    # its standing no's met since the last draw and still standing: drawn among with the new ones
    older = {
        c.fingerprint: c
        for c in reader.standing_to_draw
        if c.fingerprint not in new and c.fingerprint in reader.standing
    }
    reader.pending, reader.standing_to_draw = [], []
    if reader.suspended:
        return await standing_audits(run, older, hold)
    cfg = ctx.config.judge
    # a later round of the session draws with what the earlier ones left
    so_far = reader.drawn
    d = audits.draw(
        ctx.session,
        p.name,
        [(fp, c.score) for fp, c in new.items()],
        [(fp, c.score, reader.standing[fp]) for fp, c in older.items()],
        reads=r.first_reads,
        share=cfg.audit_share,
        target=reader.target,
        confirmed=reader.estimate.confirmed,
        fit=reader.fit,
        spent=so_far.expected,
        tops=audits.TOP - so_far.tops,
    )
    if not d.pi:
        return []
    # the session's record: its lowest floor (each new no faced at least that), its no's, its pi summed
    floor = min(so_far.floor, d.floor) if so_far.new and d.new else d.floor if d.new else so_far.floor
    reader.drawn = audits.Draw(
        floor=floor,
        new=so_far.new + d.new,
        standing=d.standing,
        expected=so_far.expected + d.expected,
        tops=so_far.tops + d.tops,
    )
    record_draw(run)
    found: list[tuple[float, Verdict]] = []
    every = {**older, **new}

    async def one(fp: str) -> None:
        if hold():
            return
        c = every[fp]
        v = await reread(run, c, FirstAnswer(model, p.default, d.born[fp], d.pi[fp], d.stratum[fp]))
        if v is None:
            # not read: the first reader's no stands (drawn among again when a round meets it)
            return
        reader.standing.pop(fp, None)
        if v.is_yes:
            # counted declined when the first reader said no this session
            if fp in new:
                r.declined -= 1
            found.append((c.score, v))

    await asyncio.gather(*(one(fp) for fp in d.picked))
    return found


async def standing_audits(
    run: PassRun, older: dict[str, Candidate], hold: Callable[[], str | None]
) -> list[tuple[float, Verdict]]:
    """A suspended reader's standing no's the balance did not reach this session: audits.TOP of them, highest pi
    (the miss-chance fit) first, read by the judge model outside the balance, as audits are, so a miss standing
    low in the list is not lost while the throttle holds the pass to its owed questions."""
    reader = run.reader
    left = audits.TOP - reader.drawn.tops
    if left <= 0 or not older or reader.model is None:
        return []
    picks = sorted(older.values(), key=lambda c: -reader.fit.weight(c.score))[:left]
    reader.drawn.tops += len(picks)
    found = []
    for c in picks:
        if hold():
            break
        v = await reread(
            run, c, FirstAnswer(reader.model, run.p.default, reader.standing[c.fingerprint], None, "suspended")
        )
        if v is None:
            continue
        reader.standing.pop(c.fingerprint)
        if v.is_yes:
            found.append((c.score, v))
    return found


def record_draw(run: PassRun) -> None:
    """The session's record of the pass's first reader (audits.windows reads them): journal first, then the db. A
    reading session with its draw and its reads, yeses included; a shadowing one with its shadow reads; a session
    in which it read nothing has none."""
    ctx, pass_name, reader, r = run.ctx, run.name, run.reader, run.result
    assert reader.model is not None, "only a first reader has a record"
    shadowing = reader.shadowing
    reads = r.shadow_reads if shadowing else r.first_reads
    if not reads and not reader.drawn.new:
        return
    d = reader.drawn
    row = {
        "session": ctx.session,
        "pass": pass_name,
        "first_model": reader.model,
        "floor": 0.0 if shadowing else d.floor,
        "new": 0 if shadowing else d.new,
        "standing": d.standing,
        "expected": 0.0 if shadowing else d.expected,
        "reads": reads,
        "state": "shadow" if shadowing else "reading",
        "created_at": now_text(),
    }
    ctx.journal.append(pass_name, draw_record(row))
    ctx.store.add_draw(row)


def audits_due(
    run: PassRun, candidates: CandidateList[Candidate], answered: set[str]
) -> list[tuple[Candidate, Verdict]]:
    """The answered candidates whose audit a batch bought and this session collected, each with its first
    reader's no: a batch result for it came in, and the latest verdict is still a first reader's no (another
    model's than the judge model)."""
    p, ctx = run.p, run.ctx
    if not ctx.batches.collected.get(p.name):
        # most sessions: no batch came in, and the candidate list is not walked
        return []
    fps = ctx.batches.take_paid(p.name, answered & set(candidates.fingerprints))
    out = []
    for i, fp in enumerate(candidates.fingerprints):
        if fp in fps:
            v = ctx.store.verdict_for(p.name, fp)
            if v is not None and not v.is_yes and v.model != ctx.judge.model:
                out.append((candidates[i], v))
    return out


async def collected_audits(run: PassRun, due: list[tuple[Candidate, Verdict]]) -> list[Verdict]:
    """Read the audits a batch bought (audits_due): a miss is returned to be applied, and deposits into the
    balance as audit() does. A second order the judge model still needs goes into this session's batch."""
    found: list[tuple[float, Verdict]] = []

    async def one(c: Candidate, first: Verdict) -> None:
        # outside the draw's design: its pi stayed with the session that gathered it (the module's docstring)
        v = await reread(run, c, FirstAnswer(first.model, run.p.default, first.session, None, "batched"))
        if v is not None and v.is_yes:
            found.append((c.score, v))

    await asyncio.gather(*(one(c, first) for c, first in due))
    run.allowance.deposit(len(found))
    return [v for _, v in sorted(found, key=lambda sv: -sv[0])]
