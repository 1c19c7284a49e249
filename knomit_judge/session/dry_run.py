"""A dry run's plan: what a real session would offer and what it would cost, and what the plan can not say
(a lower bound, a model with no price, verdicts that count only for another judge)."""

from __future__ import annotations

import shlex
from pathlib import Path

from .. import audits
from ..config import CONFIG_FILE, Config, retired_model
from ..judge import REPLY_TOKENS, swap_sampled
from ..models import Lineup
from ..passes import Candidate
from ..scripted import ScriptedBackend
from ..store import Store
from .context import MAX_ROUNDS, PassRun, ReviewOptions, SessionResult
from .lines import describe_model


def plan_dry(run: PassRun, offer: list[Candidate]) -> None:
    """What a real session would offer, with its evidence and an estimate of calls and cost (both readers)."""
    p, ctx, r, reader, result = run.p, run.ctx, run.result, run.reader, run.ctx.result
    cfg = ctx.config.judge
    chars = sum(len(p.prompt.system) + len(p.prompt.render(c.orders[0])) for c in offer)
    per_call_in = chars / max(len(offer), 1) / 4  # ~4 characters a token

    def usd(model: str, calls: int) -> float | None:
        """`calls` of `model`: the answer, and thinking at judge.effort where it thinks (docs/real-api.md)."""
        price = ctx.config.price(model)
        if price is None:
            return None
        out = calls * price.usd(per_call_in, ctx.lineup.dialect(model, cfg.effort).expected_out(REPLY_TOKENS))
        # one batch: the batch price
        return out * (1 - price.batch_discount) if ctx.batches.submitting else out

    # one order each by the first reader; the audits it would draw, by the judge
    if reader.model and reader.reads:
        # priced as if every offered question came back a no: the draw's pi summed is the audits it expects
        d = audits.draw(
            ctx.session,
            p.name,
            [(c.fingerprint, c.score) for c in offer],
            [],
            reads=len(offer),
            share=cfg.audit_share,
            target=reader.target,
            confirmed=reader.estimate.confirmed,
            fit=reader.fit,
        )
        first, strong = len(offer), round(d.expected)
        parts = [usd(reader.model, first), usd(cfg.model, strong)]
        how = (
            f" ({first} by {reader.model}, about {d.expected:.1f} audits drawn, floor {d.floor:.3f}; "
            "a first yes adds the judge model's reading)"
        )
    # the first order of each, both for the swap sample; a first answer not the default adds its second
    else:
        first, strong = (
            0,
            cfg.samples
            * sum(
                1 + (cfg.position_swap and len(c.orders) == 2 and swap_sampled(c.fingerprint, cfg.swap_sample))
                for c in offer
            ),
        )
        parts, how = [usd(cfg.model, strong)], ""
    calls = first + strong
    # recorded replies cost nothing, and nor does asking nothing; a model with no price is unknown
    estimate = (
        0.0 if not ctx.options.judge.anthropic or not calls else None if None in parts else sum(u or 0.0 for u in parts)
    )
    result.estimates[p.name] = {
        "questions": len(offer),
        "calls": calls,
        "estimate_usd": None if estimate is None else round(estimate, 6),
    }
    r.offered = len(offer)
    r.notes.append(
        f"would ask {len(offer)} question(s) = {calls} call(s)"
        + how
        + (f", about ${estimate:.4f}" if estimate is not None else "")
        + (" at batch prices" if ctx.batches.submitting else "")
    )
    result.plan[p.name] = [{"subject": c.subject, "score": round(c.score, 4), "evidence": c.orders[0]} for c in offer]


def lower_bound(store: Store, result: SessionResult, passes: tuple[str, ...], sessions: int = 20) -> str:
    """What a dry run says of its estimate: the first round's only, so a lower bound; and, from the last sessions
    that recorded their first round, how many questions they asked over all rounds for each of it."""
    said = (
        f"the estimate covers the first round only: a real session asks, in up to {MAX_ROUNDS - 1} more "
        "rounds, the questions its applied decisions make, so it is a lower bound"
    )
    counted = [
        s["passes"][n]
        for s in store.sessions(sessions)
        for n in passes
        # sessions before it was recorded say nothing
        if s["passes"].get(n, {}).get("first_round")
    ]
    first, total = sum(c["first_round"] for c in counted), sum(c["offered"] for c in counted)
    if not first:
        return said
    usd = result.estimate_usd
    return (
        said + f"; the last sessions asked {total / first:.2f} question(s) over all rounds for each one of "
        f"their first round ({total} for {first})"
        + (f": at that rate about ${usd * total / first:.4f}" if usd is not None else "")
    )


def unpriced(config: Config, models: Lineup, result: SessionResult) -> None:
    """A dry run names every model it could not price, and what a real session would do (exit 2); a model the
    Models API says is gone is named for that alone (one cause)."""
    keys = {**config.models(), **({"describe.model": describe_model(config)} if config.describe.enabled else {})}
    said = set(models.stopping)
    for key, model in keys.items():
        if model in said or config.price(model) is not None:
            continue
        # once, under the first key that names it
        said.add(model)
        result.unpriced.append(f"{key} {model!r}")
        # known retired without asking the API (a dry run with no key)
        if retired := retired_model(model):
            result.notes.append(
                f"{key} {model!r} is {retired}; a real session exits 2 until a current model is "
                f"named in {config.where(key)}"
            )
            continue
        result.notes.append(
            f'no price for {key} {model!r}: a real session exits 2 until [prices."{model}"] '
            f"input_per_mtok and output_per_mtok are set in {CONFIG_FILE}, or a priced model is "
            f"named in {config.where(key)}"
        )


def other_judge(store: Store, root: Path, options: ReviewOptions) -> str | None:
    """A dry run for a judge with no verdicts here while another kind has some: say so, since only a judge's
    own verdicts count for it (docs/memory.md), and name the command that would use the others."""
    kind = options.judge.kind
    counts = store.judges(options.passes)
    if counts.get(kind) or not counts:
        return None
    other, n = max(counts.items(), key=lambda kv: kv[1])
    flag = " --judge scripted:FILE" if other == ScriptedBackend.kind else ""
    return (
        f"the {kind} judge has no verdicts here; the {n} {other} verdict(s) count only for the {other} judge, "
        f"so this plan asks everything again: `knomit-judge review {shlex.quote(str(root))} --dry-run{flag}` "
        "uses them"
    )
