"""A session's Message Batch: a question's next request gathered into it, and the batch submitted at the end."""

from __future__ import annotations

from ..judge import Judge, OutcomeKind
from ..passes import Candidate
from .context import Context, PassRun

# an Outcome's kind: the question's next request went into this session's Message Batch
BATCHED: OutcomeKind = "batched"


def gathered(run: PassRun, judge: Judge, c: Candidate, *, one_order: bool = False) -> bool:
    """In a batch session, whether the question's next request by `judge` went into the batch (none was
    needed: its reply is in the cache or came in this session, and is read from there without a call)."""
    batches = run.ctx.batches
    return batches.submitting and batches.gather(judge, run.p, c, one_order) > 0


async def submit_batch(ctx: Context) -> None:
    """Submit the questions gathered this session as a Message Batch, stored in the db before returning."""
    for batch_id, per_pass, error in await ctx.batches.submit(ctx.judge):
        for name, fps in per_pass.items():
            r = ctx.result.passes[name]
            if batch_id:
                r.notes.append(f"batch {batch_id}: {ctx.batches.requests_in(batch_id, name)} requests submitted")
            # not submitted: as unavailable as a call that failed; asked again next session
            else:
                r.batched -= len(fps)
                r.unavailable += len(fps)
                r.first_error = r.first_error or f"unavailable: {error}"
