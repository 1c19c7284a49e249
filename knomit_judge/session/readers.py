"""Who reads a question: the first reader of each pass, decided once a session, and one question read as the two
readers share it.

Two readers (DESIGN "The judge client"). The first reader (judge.first_reader, the cheapest current model) reads
every offered question in one order. Its no is a verdict like any other (fingerprinted, journalled, its model
recorded); its yes acts on nothing: the question goes to judge.model, asked as always (one order, the second only
after a yes, both must agree), and only that agreeing yes is applied. Once a pass has read, some of its no's are
read again by judge.model: audits (rereads.py), drawn with recorded inclusion probabilities (audits.py) among the
session's no's and the older ones the judge model has not read, so no miss is lost for good. The window's audits
estimate the first reader's recall; when the evidence puts it below judge.first_reader_recall, or the judge model
rejects most of its yeses (counted as they come back: the session that shows it suspends it), the pass reads with
judge.model alone and its standing no's are asked again, highest pi first. A suspended reader reads a shadow sample
of what the judge model reads (audits.SHADOW_RATE, every yes of the judge model), recorded with its pi and never
acted on, until that evidence clears the target and lifts the suspension (docs/choices.md). A first reader that
is unavailable or refuses hands the question to judge.model in the same session. Every reading is charged to the
model that makes it, when it is made (PassRun.ask): a reading the balance or a cap cannot pay waits. The scripted
judge reads alone.

A Message Batch keeps the readers: a batch session gathers the first reader's one order into its batch, at the
first reader's batch price; once that reply is in (a later session collects it), a yes gathers the judge
model's reading, and the audits drawn among the no's gather theirs, into that session's batch.
"""

from __future__ import annotations

from typing import Any

from .. import audits
from ..judge import Outcome
from ..passes import Candidate
from .batch import BATCHED, gathered
from .context import DOWN_AFTER as DOWN_AFTER
from .context import HELD, FirstReader, PassRun
from .rereads import FirstAnswer, audit_of, counted


def reader_of(run: PassRun, fps: list[str]) -> FirstReader:
    """The pass's first reader this session: decided in its first round and kept on its run, its miss-chance
    fit read again each round (a round's design audits move it)."""
    reader = run.decided_reader
    if reader is None:
        reader = run.decided_reader = first_reader(run, fps)
    if reader.model:
        reader.fit = audits.fit(run.ctx.store, run.name, reader.model)
    return reader


def first_reader(run: PassRun, fps: list[str]) -> FirstReader:
    """Who reads the pass's questions first this session, from the config and the window's audits; `fps`, the
    round's candidates, tell whether any of its no's still stand unread by the judge model."""
    p, ctx = run.p, run.ctx
    # none when off, or the judge model itself
    model = ctx.config.models().get("judge.first_reader")
    if model is None or not ctx.options.judge.anthropic:
        return FirstReader(None)
    target = ctx.config.judge.first_reader_recall
    standing = ctx.store.read_first_only(p.name, ctx.kind, model)
    # a changed fingerprint is a new question: not owed a reading
    all_read = not any(fp in standing for fp in fps)
    at = audits.standing(ctx.store, p.name, model, target, all_read)
    # re-trusted by its shadow sample: it reads, under a new window
    lifted = at.lifted
    return FirstReader(
        model,
        "" if lifted else at.suspended,
        standing,
        refused=ctx.store.refused(p.name, p.prompt.id, model),
        estimate=audits.Estimate() if lifted else at.estimate,
        target=target,
        at=at,
    )


def standing_first(reader: FirstReader, rest: list[Candidate], owed: set[str]) -> list[Candidate]:
    """While suspended, the standing no's are read after the owed, highest pi (the miss-chance fit) first."""
    if not reader.suspended:
        return rest
    return sorted(
        rest,
        key=lambda c: (
            c.fingerprint not in owed,
            c.fingerprint not in reader.standing,
            -reader.fit.weight(c.score) if c.fingerprint in reader.standing else 0.0,
        ),
    )


def reader_notes(run: PassRun) -> None:
    """What the first reader did in the pass this session, and what the window says of it, on the pass's line."""
    r, reader = run.result, run.decided_reader
    if reader is None or not reader.model:
        return
    r.first_reader = reader.model
    r.first_reader_state = reader.state
    if reader.at.lifted:
        ev = reader.at.shadow
        r.notes.append(
            f"first reader re-trusted: its shadow sample over {ev.sessions} session(s) cleared the target "
            f"({ev.hits} of the judge model's {ev.positives} yeses read alike, {ev.negatives} of its no's "
            f"read, ~{ev.rejected:.1f} of them its yeses); it reads again, under a new window"
        )
    if reader.midway:
        r.notes.append(
            f"first reader suspended: {reader.suspended}; suspended during this session, after "
            f"{r.first_reads} first read(s): the judge model read the rest, and "
            f"{len(reader.standing)} of its no's are askable again"
        )
    elif reader.suspended:
        r.notes.append(
            f"first reader suspended: {reader.suspended}; {reader.model} reads only its shadow sample "
            f"({r.shadow_reads} read, never acted on), {len(reader.standing)} of its no's are askable "
            f"again; it {reader.at.lifts_when(reader.target)}"
        )
    handed = sum(reader.handovers.values())
    r.handed_over = handed
    if handed:
        why = ", ".join(f"{k} {n}" for k, n in reader.handovers.items() if n)
        r.notes.append(f"{handed} question(s) handed to the judge model: {reader.model} {why}")
    if r.first_reads or r.audits or r.audits_batched:
        r.notes.append(
            f"first reads {r.first_reads} ({reader.model}): yes confirmed {r.first_confirmed}, "
            f"not {r.first_unconfirmed}; audits {r.audits}, misses {r.misses}"
            + (f"; {r.audits_batched} audit(s) in the batch" if r.audits_batched else "")
        )
    if line := reader.estimate.line(reader.target):
        r.notes.append(line)


async def read(run: PassRun, c: Candidate) -> tuple[Outcome, str, dict[str, Any] | None]:
    """Ask one question as the readers share it; returns the outcome that stands, the model that gave it, and
    what its verdict records of a first-reader answer (an Outcome of kind BATCHED: the reading it needs next waits
    in this session's Message Batch; of kind HELD: the balance or a cap could not pay the next reading)."""
    p, ctx, r, reader = run.p, run.ctx, run.result, run.reader
    strong = ctx.judge
    fp = c.fingerprint
    if reader.model and reader.reads_first(fp):
        first = strong.reader(reader.model)
        if gathered(run, first, c, one_order=True):
            return Outcome(kind=BATCHED), first.model, None
        out = await run.ask(c, first, one_order=True)
        if out.kind == "verdict":
            reader.unavailable_streak = 0
            r.first_reads += 1
            if out.answer == p.default:
                # among this session's draw of audits, once the pass has read
                reader.pending.append(c)
                return out, first.model, None
            # the judge model reads the first yes in the next collection
            if gathered(run, strong, c):
                return Outcome(kind=BATCHED), strong.model, None
            # a first yes acts on nothing: the judge model decides, if the balance and the caps can pay it (else it
            # waits, the first reader's reply in the cache)
            again = await run.ask(c, strong)
            if again.kind != "verdict":
                return again, strong.model, None
            confirmed = again.answer == out.answer
            r.first_confirmed += confirmed
            r.first_unconfirmed += not confirmed
            reader.judged_yes(confirmed, again.cost_usd)
            return (
                again,
                strong.model,
                audit_of("confirm", FirstAnswer(first.model, out.answer, ctx.session, 1.0, "confirm"), c),
            )
        if out.kind == HELD or out.kind == "unparsed" and not out.truncated:
            return out, first.model, None
        # unavailable after its retries, refused, or cut at max_tokens: the judge model reads it this session
        if out.kind == "unavailable":
            reader.unavailable_streak += 1
            reader.handovers["unavailable"] += 1
        # kept per model: the first reader is not asked it again, the judge model still is
        else:
            ctx.store.add_refusal(p.name, fp, first.model, p.prompt.id, c.subject, error=out.error, session=ctx.session)
            reader.refused.add(fp)
            reader.handovers["refused"] += 1
    # known refused by the first reader, or the first reader is down this session
    elif reader.reads:
        reader.handovers["refused" if fp in reader.refused else "unavailable"] += 1
    if gathered(run, strong, c):
        return Outcome(kind=BATCHED), strong.model, None
    # at the judge model's price: a hand-over, a suspension, or no first reader
    out = await run.ask(c, strong)
    if not reader.model or out.kind != "verdict":
        return out, strong.model, None
    if fp in reader.standing:
        # a standing first-reader no the judge model now reads: an audit; offered again only while its reader is
        # suspended (FirstReader.askable)
        first_no = FirstAnswer(reader.model, p.default, reader.standing.pop(fp), None, "suspended")
        return out, strong.model, counted(run, c, out, first_no)
    return out, strong.model, await shadow(run, c, out)


async def shadow(run: PassRun, c: Candidate, judged: Outcome) -> dict[str, Any] | None:
    """A suspended reader's shadow read of a question the judge model has just read: drawn at its pi (every yes of
    the judge model, its first no's, audits.SHADOW_RATE of the rest), read by the first reader in one order, never acted on; what
    the judge model's verdict records of it, or None when not drawn or not read."""
    p, ctx, reader = run.p, run.ctx, run.reader
    if not reader.shadowing or reader.model is None or c.fingerprint in reader.refused or ctx.batches.submitting:
        return None
    strong_yes = judged.answer != p.default
    pi = audits.shadow_pi(ctx.session, p.name, c.fingerprint, strong_yes, reader.shadow_nos)
    if not pi:
        return None
    # counted as drawn, read or not: the next no's pi is fixed by it
    reader.shadow_nos += not strong_yes
    out = await run.ask(c, ctx.judge.reader(reader.model), one_order=True, offered=False)
    if out.kind != "verdict":
        # not read (down, refused, a cap): nothing recorded, and nothing lost but the sample
        return None
    run.result.shadow_reads += 1
    first_yes = out.answer != p.default
    shadowed = FirstAnswer(reader.model, out.answer, ctx.session, pi, "shadow")
    return {**audit_of("shadow", shadowed, c), "first_yes": first_yes}
