"""Who reads a question: the first reader of each pass, decided once a session, and one question read as the two
readers share it.

Two readers (DESIGN "The judge client"). The first reader (judge.first_reader, the cheapest current model) reads
every offered question in one order. Its no is a verdict like any other (fingerprinted, journalled, its model
recorded); its yes acts on nothing: the question goes to judge.model, asked as always (one order, the second only
after a yes, both must agree), and only that agreeing yes is applied. Once a pass has read, some of its no's are
read again by judge.model: audits (rereads.py), drawn with recorded inclusion probabilities (audits.py) among the
session's no's and the older ones the judge model has not read, so no miss is lost for good. The window's audits
estimate the first reader's recall; when the evidence puts it below judge.first_reader_recall, or the judge model
rejects most of its yeses, the pass reads with judge.model alone and its standing no's are asked again, highest pi
first, until the window clears (docs/choices.md). A first reader that is unavailable or refuses hands the question
to judge.model in the same session. The scripted judge reads alone.

A Message Batch keeps the readers: a batch session gathers the first reader's one order into its batch, at the
first reader's batch price; once that reply is in (a later session collects it), a yes gathers the judge
model's reading, and the audits drawn among the no's gather theirs, into that session's batch.
"""

from __future__ import annotations

from typing import Any

from .. import audits
from ..candidate_lists import CandidateList
from ..judge import Outcome
from ..passes import Candidate
from ..passes.base import Pass
from ..status import PassResult
from .batch import BATCHED, gathered
from .context import Context, FirstReader
from .rereads import audit_of, counted

DOWN_AFTER = 3  # unavailable answers in a row after which the judge model reads the rest of the session alone


def reader_of(ctx: Context, p: Pass, fps: list[str]) -> FirstReader:
    """The pass's first reader this session: decided in its first round and kept in ctx.readers, its miss-chance
    fit read again each round (a round's design audits move it)."""
    reader = ctx.readers.get(p.name)
    if reader is None:
        reader = ctx.readers[p.name] = first_reader(ctx, p, fps)
    if reader.model:
        reader.fit = audits.fit(ctx.store, p.name, reader.model)
    return reader


def first_reader(ctx: Context, p: Pass, fps: list[str]) -> FirstReader:
    """Who reads the pass's questions first this session, from the config and the window's audits; `fps`, the
    round's candidates, tell whether any of its no's still stand unread by the judge model."""
    model = ctx.config.models().get("judge.first_reader")  # none when off, or the judge model itself
    if model is None or not ctx.options.judge.anthropic:
        return FirstReader(None)
    target = ctx.config.judge.first_reader_recall
    est = audits.estimate(ctx.store, p.name, model)
    standing = ctx.store.read_first_only(p.name, ctx.kind, model)
    all_read = not any(fp in standing for fp in fps)  # a changed fingerprint is a new question: not owed a reading
    return FirstReader(model, est.reason(target, all_read), standing,
                       refused=ctx.store.refused(p.name, p.prompt.id, model), estimate=est, target=target)


def meet(reader: FirstReader, candidates: CandidateList, fps: list[str]) -> None:
    """Take this round's standing no's into the audit pool (a changed fingerprint is a new question: not here)."""
    if reader.model and reader.standing:
        seen = {c.fingerprint for c in reader.pool}
        reader.pool += [candidates[i] for i, fp in enumerate(fps) if fp in reader.standing and fp not in seen]


def standing_first(reader: FirstReader, rest: list[Candidate], owed: set[str]) -> list[Candidate]:
    """While suspended, the standing no's are read after the owed, highest pi (the miss-chance fit) first."""
    if not reader.suspended:
        return rest
    return sorted(rest, key=lambda c: (c.fingerprint not in owed, c.fingerprint not in reader.standing,
                                       -reader.fit.weight(c.score) if c.fingerprint in reader.standing else 0.0))


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


async def read(p: Pass, c: Candidate, ctx: Context, r: PassResult,
               reader: FirstReader) -> tuple[Outcome, str, dict[str, Any] | None]:
    """Ask one question as the readers share it; returns the outcome that stands, the model that gave it, and
    what its verdict records of an audit (an Outcome of kind BATCHED: the reading it needs next waits in this
    session's Message Batch)."""
    strong = ctx.judge
    fp = c.fingerprint
    if reader.model and reader.reads and reader.down < DOWN_AFTER and fp not in reader.refused:
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
        # a standing first-reader no the judge model now reads: an audit; offered again only while its reader is
        # suspended (FirstReader.askable)
        return out, strong.model, counted(p, c, out, r, reader.model, reader.standing.pop(fp), None, "suspended")
    return out, strong.model, None
