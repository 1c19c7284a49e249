"""The describe step of a session: a line for each motif spelling that lacks one, before each alias round.

What a line is, how it is asked for and kept is lines.py; this is the session's side: which
spellings are asked, what the dollar caps let through, and the step's own status line and state.

The state is one of every pass's (status.py), from what the session's requests did:
- `nothing-qualified`: no spelling has an active carrier;
- `caught-up`: every spelling has a line, or was given none by describe.max_tries requests and waits for its
  key to change (counted in `missing`, named in a note);
- `defunded`: spellings lack a line and a dollar cap held every request back;
- `broken`: requests were sent and none came back as the contract's JSON (unavailable, refused, unparsed);
- `worked`: a request came back as the contract's JSON, whether or not it gave every spelling a line: a paid
  call is never `caught-up`.
"""

from __future__ import annotations

from ..passes.base import DESCRIBE
from ..scripted import ScriptedBackend
from ..status import PassResult
from .context import Context
from .lines import LineKeeper, Shown, Written, batches, current, describe_model, model_of, request, write_lines


async def describe(ctx: Context) -> None:
    """The describe step: a line for each spelling that lacks one for its carriers as they are now, then
    ctx.lines for the alias pass. Skipped (the alias pass then nominates from the embeddings alone) when
    describe.enabled is false, or with a scripted judge whose file holds no lines (without a key no session
    starts: review checks it first).
    Run before each alias round: a merge rewrites carriers, and a changed carrier set needs a new line.
    A key asked this session is not asked again in a later round: the next session asks it.
    """
    cfg, step, r = ctx.config.describe, ctx.describing, ctx.result.passes[DESCRIBE]
    now = current(
        ctx.store, ctx.corpus, ctx.config, model_of(ctx.options.judge, ctx.config), frozenset(step.keys_asked)
    )
    step.lines, todo = now.lines, now.todo
    # as the session found them; a later round asks again for carriers a merge rewrote
    if not r.candidates:
        r.candidates, r.cached = now.spellings, len(now.lines)
    r.missing = now.missing
    if not cfg.enabled:
        step.lines = {}
        r.state, r.notes = "skipped", ["describe.enabled is false"]
        return
    if (
        todo
        and not ctx.options.dry_run
        and isinstance(ctx.judge.backend, ScriptedBackend)
        and not ctx.judge.backend.lines
    ):
        r.state, r.notes = "skipped", ["the scripted replies file holds no describe lines"]
        return
    if now.held:
        r.notes = [n for n in r.notes if "not asked again until" not in n]
        name, why = next(iter(now.held.items()))
        r.notes.append(
            f"{len(now.held)} spelling(s) have no line and are not asked again until their carriers, "
            f"describe.model or the prompt change (e.g. {name}: {why or 'no line'})"
        )
    if todo and ctx.options.dry_run:
        plan(ctx, r, todo)
        return
    if todo:
        # its lines go into the journal: a change, after the models' lifecycle is read
        ctx.lineup.confirm()
        step.keys_asked.update((s.spelling, s.carriers) for s in todo)
        done = await write_lines(
            now,
            ctx.judge,
            ctx.config,
            LineKeeper(ctx.store, ctx.journal, ctx.session),
            lambda next_usd: ctx.caps.reached(ctx.spent(), next_usd),
        )
        # its calls and cost: the judge's ledger holds them, as for every pass
        ctx.charge(r)
        count(ctx, r, done, len(todo))
    settle(r)


def plan(ctx: Context, r: PassResult, todo: list[Shown]) -> None:
    """A dry run: how many spellings would get a line, in how many requests, at about what cost."""
    cfg = ctx.config.describe
    requests = [request(b, cfg.body_chars) for b in batches(todo, cfg.batch)]
    scripted = not ctx.options.judge.anthropic
    price = None if scripted else ctx.config.price(describe_model(ctx.config))
    # about a token per 4 prompt characters, and 50 tokens a line
    estimate = (
        0.0
        if scripted
        else None
        if price is None
        else sum(price.usd((len(q.system) + len(q.user)) / 4, 50 * len(q.spellings)) for q in requests)
    )
    ctx.result.estimates[DESCRIBE] = {
        "questions": 0,
        "calls": len(requests),
        "estimate_usd": None if estimate is None else round(estimate, 6),
    }
    r.state, r.offered = "would-offer", len(todo)
    r.notes.insert(
        0,
        f"would write lines for {len(todo)} spelling(s) in {len(requests)} request(s)"
        + (f", about ${estimate:.4f}" if estimate is not None else ""),
    )


def count(ctx: Context, r: PassResult, done: Written, asked: int) -> None:
    """Add one run of write_lines to the step's counts and notes."""
    ctx.describing.lines.update(done.lines)
    r.offered += asked - done.waiting
    r.written += done.written
    r.waiting = done.waiting
    r.missing = max(0, r.missing - done.written)
    r.unavailable += sum(f.startswith("unavailable") for f in done.failed)
    r.unparsed += sum(f.startswith("unparsed") for f in done.failed)
    r.refused += sum(f.startswith("refused") for f in done.failed)
    r.first_error = r.first_error or (done.failed[0] if done.failed else "")
    no_line = ctx.describing.no_line
    # one note for the session, over its rounds
    if done.missing:
        no_line.extend(done.missing)
        r.notes = [n for n in r.notes if "got no line (e.g." not in n]
        scripted = isinstance(ctx.judge.backend, ScriptedBackend)
        r.notes.append(
            f"{len(no_line)} spelling(s) got no line (e.g. {', '.join(no_line[:3])})"
            + (
                ": the scripted replies file does not describe them"
                if scripted
                else f": asked again next session, up to describe.max_tries ({ctx.config.describe.max_tries}) "
                "request(s) for each"
            )
        )
    if done.waiting:
        r.notes.append(f"{done.held}: {done.waiting} spelling(s) wait")


def settle(r: PassResult) -> None:
    """Name the step's state from its counts over the session's rounds (the module's docstring says which)."""
    # a reply came back as the JSON
    if r.written or r.judge_calls > r.unavailable + r.unparsed + r.refused:
        r.state = "worked"
    elif r.judge_calls:
        r.state = "broken"
    elif r.waiting:
        r.state = "defunded"
    elif r.candidates == 0:
        r.state = "nothing-qualified"
    else:
        r.state = "caught-up"
