"""A review session: corpus -> candidates -> judgments -> verdicts -> decisions -> commits -> status lines."""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .config import Config, load_config
from .corpus import Corpus, load_corpus
from .embeddings import Embedder
from .errors import BadFact
from .gitops import Applier, Decision, Lock, decision_trailers, dirty_paths, message, open_repo
from .judge import Judge, make_backend
from .passes import JUDGED_PASSES, Candidate, Change, all_passes
from .passes.exact import duplicate_groups, exact_change, exact_verdict
from .recovery import recover
from .neighbours import Memory
from .shortlist import gc_paused, remembered
from .status import PassResult, total_cost
from .store import FileIndex, Store
from .throttle import assess, record
from .verdicts import Journal, Verdict

log = logging.getLogger(__name__)
MAX_ROUNDS = 4


@dataclass
class ReviewOptions:
    dry_run: bool = False
    passes: tuple[str, ...] = JUDGED_PASSES
    judge: str = "anthropic"
    stop: threading.Event | None = None  # once set, nothing new is offered; judgments in flight finish


@dataclass
class SessionResult:
    session: str
    dry_run: bool
    commits: list[str] = field(default_factory=list)
    passes: dict[str, PassResult] = field(default_factory=dict)
    problems: list[BadFact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plan: dict[str, list[dict]] = field(default_factory=dict)  # dry run: what would be offered, with evidence
    embedded: int = 0  # texts embedded this session (0 when nothing changed: the model is not even loaded)
    parsed: int = 0  # fact files parsed this session (unchanged ones come from the file index)

    @property
    def broken(self) -> bool:
        return any(r.state == "broken" for r in self.passes.values())

    @property
    def cost_usd(self) -> float | None:
        return total_cost(self.passes.values())

    def lines(self) -> list[str]:
        return [r.line() for r in self.passes.values()]

    def json(self) -> dict:
        return {"session": self.session, "dry_run": self.dry_run, "commits": self.commits,
                "passes": {name: r.json() for name, r in self.passes.items()}, "cost_usd": self.cost_usd,
                "problems": [{"path": p.path, "line": p.line, "reason": p.reason} for p in self.problems],
                "notes": self.notes, "embedded": self.embedded, "parsed": self.parsed,
                **({"plan": self.plan} if self.dry_run else {})}


@dataclass
class Context:
    """What one session's passes share."""

    root: Path
    config: Config
    store: Store
    corpus: Corpus
    embedder: Embedder
    journal: Journal
    applier: Applier | None
    options: ReviewOptions
    session: str
    clean: bool
    commits: list[str] = field(default_factory=list)
    seen: dict[str, set] = field(default_factory=dict)
    _judge: Judge | None = None

    @property
    def judge(self) -> Judge:
        if self._judge is None:  # a caught-up corpus needs no judge at all, nor a key
            self._judge = Judge(make_backend(self.options.judge, self.config), self.store, self.config)
        return self._judge

    def spent(self) -> float:
        if self._judge is None:
            return 0.0
        return self._judge.spent()  # the priced part: an unknown cost must not lift the cap


def new_session_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def review(root: Path | str, options: ReviewOptions | None = None, config: Config | None = None) -> SessionResult:
    """Run one review session on the corpus at root (the library API behind `knomit-judge review`)."""
    options = options or ReviewOptions()
    root = Path(root).resolve()
    repo = open_repo(root)
    config = config or load_config(root)
    if options.dry_run:
        # Dry run: an in-memory copy of the db, no lock, no recovery: not one byte is written.
        store = Store.read_only(root)
        with remembered(Memory(store)):
            return asyncio.run(_session(root, repo, config, store, options, []))
    with Lock(repo) as lock:
        store = Store.for_corpus(root)
        try:
            notes = recover(root, repo, store, lock)
            with remembered(Memory(store)):  # neighbour lists are searched again only where vectors changed
                return asyncio.run(_session(root, repo, config, store, options, notes))
        finally:
            store.close()


async def _session(root, repo, config, store, options, notes) -> SessionResult:
    result = SessionResult(session=new_session_id(), dry_run=options.dry_run, notes=list(notes))
    index = FileIndex(store)
    corpus = load_corpus(root, config.corpus.max_fact_bytes, index)
    result.problems = corpus.problems
    for problem in corpus.problems:
        log.warning("skipped %s", problem)
    dirty = dirty_paths(repo)
    if dirty:
        result.notes.append(f"work tree has {len(dirty)} uncommitted change(s) (e.g. {dirty[0]}): "
                            "judging and storing, applying nothing")
    ctx = Context(root, config, store, corpus, Embedder(store), Journal(root), None if options.dry_run else Applier(repo),
                  options, result.session, clean=not dirty, commits=result.commits)
    if not options.dry_run:
        store.start_session(result.session)
    try:
        result.passes["exact"] = run_exact(ctx)
        passes = [p for name, p in all_passes().items() if name in options.passes]
        throttles = {p.name: assess(store, p.name, config.budget) for p in passes}
        for p in passes:
            result.passes[p.name] = PassResult(p.name)
        # Applied decisions change fingerprints, and so make new questions: ask them in this session,
        # round after round, until a round applies nothing (each pass's allowance is per session).
        for round_no in range(1 if options.dry_run else MAX_ROUNDS):
            applied = 0
            for p in passes:
                before = result.passes[p.name].applied
                await run_round(p, ctx, result, result.passes[p.name], throttles[p.name], first=round_no == 0)
                applied += result.passes[p.name].applied - before
            if not applied:
                break
        for p in passes:
            finish_pass(p, ctx, result.passes[p.name], throttles[p.name])
    finally:
        result.embedded, result.parsed = ctx.embedder.computed, index.parsed
        if not options.dry_run:
            index.save()
            sha = ctx.applier.commit_paths([ctx.journal.relpath(p) for p in ("exact", *JUDGED_PASSES)],
                                           f"journal: verdicts of session {result.session}\n\n"
                                           f"Knomit-Session: {result.session}\n")
            if sha:
                result.commits.append(sha)
            store.end_session(result.session, {n: r.json() for n, r in result.passes.items()},
                              result.cost_usd, result.commits)
    return result


def apply(ctx: Context, pass_name: str, verdict: Verdict, change: Change) -> str:
    """Commit one decision (its files and the journal holding its verdict) and take it into the corpus."""
    judge = f"{verdict.model} / {verdict.prompt}"
    msg = message(change.subject, change.body,
                  decision_trailers(Decision(pass_name, verdict.id, judge, verdict.rationale)))
    sha = ctx.applier.commit(change.writes, [ctx.journal.relpath(pass_name)], msg, verdict.id)
    for path, text in change.writes.items():
        ctx.corpus.put(path, text)
    ctx.store.mark_applied(verdict.id, sha)
    ctx.commits.append(sha)
    log.info("%s (%s)", change.subject, sha[:10])
    return sha


def keep(ctx: Context, verdict: Verdict) -> None:
    """Store a verdict: journal first (the durable copy in git), then the db, which recovery fills from it."""
    ctx.journal.append(verdict.pass_name, verdict.journal_line())
    ctx.store.add_verdict(verdict)


def run_exact(ctx: Context) -> PassResult:
    """Exact duplicates are retracted mechanically, before any judged pass, whatever the throttle says."""
    r = PassResult("exact", throttle="never budgeted")
    groups = duplicate_groups(ctx.corpus)
    r.candidates = len(groups)
    answered = ctx.store.answered("exact")
    for group in groups:
        verdict = exact_verdict(group, ctx.session)
        if verdict.fingerprint in answered:  # a reverted exact retraction stays a "no"
            r.cached += 1
            continue
        r.offered += 1
        if ctx.options.dry_run or not ctx.clean:
            continue
        keep(ctx, verdict)
        apply(ctx, "exact", verdict, exact_change(group, verdict, ctx.corpus))
        r.judged += 1
        r.resolved += 1
        r.applied += 1
    if r.offered and not r.applied and not ctx.options.dry_run:
        r.notes.append(f"{r.offered} group(s) wait for a clean work tree")
    r.state = "worked" if r.applied else ("nothing-qualified" if not groups else "caught-up")
    return r


async def run_round(p, ctx: Context, result: SessionResult, r: PassResult, t, first: bool) -> None:
    """One round of a pass: shortlist, skip what is answered, judge what the budget allows, apply the yeses."""
    with gc_paused():  # millions of small objects at 100k facts; see shortlist.gc_paused
        candidates = p.candidates(ctx)
    answered = ctx.store.answered(p.name)
    waiting = [c for c in candidates if c.fingerprint not in answered]
    seen = ctx.seen.setdefault(p.name, set())
    seen.update(c.fingerprint for c in candidates)
    r.candidates = len(seen)  # distinct questions met this session, over all rounds
    if first:
        r.cached = len(candidates) - len(waiting)
        r.throttle = t.state + (" (probe)" if t.probe else "")
        r.next_probe_in = t.next_probe_in
    # yes verdicts not yet applied (dirty tree, or a killed session rolled back): apply without asking again
    unapplied = {v.fingerprint: v for v in ctx.store.unapplied_yes(p.name)}
    pending = [unapplied[c.fingerprint] for c in candidates if c.fingerprint in unapplied]
    room = None if t.allowance is None else max(0, t.allowance - r.offered)
    offer = waiting if room is None else waiting[:room]
    r.waiting = len(waiting) - len(offer)

    if ctx.options.dry_run:
        plan_dry(ctx, p, r, offer, result)
        return
    before = r.offered
    fresh = await judge_all(p, offer, ctx, r)
    r.waiting += len(offer) - (r.offered - before)  # held back by the cost cap or a stop
    decide(p, ctx, r, pending + fresh)


def finish_pass(p, ctx: Context, r: PassResult, t) -> None:
    """Name the pass's state, take its spend from the ledger, and record the throttle's session."""
    r.settle(held=r.waiting > 0, dry_run=ctx.options.dry_run)
    ledger = ctx._judge.ledgers.get(p.name) if ctx._judge else None
    if ledger:
        r.judge_calls, r.attempts, r.cost_usd = ledger.calls, ledger.attempts, ledger.cost_usd
    if r.cost_usd is None:
        r.notes.append("cost incomplete: a call reported no usage or its model has no price")
    if not ctx.options.dry_run:
        record(ctx.store, ctx.session, p.name, t, r.offered, r.judged, r.resolved,
               probe_spent=t.probe and r.judged > 0)


async def judge_all(p, offer: list[Candidate], ctx: Context, r: PassResult) -> list[Verdict]:
    """Stream candidates through a bounded queue to `concurrency` workers; store each verdict as it comes."""
    cfg = ctx.config.judge
    queue: asyncio.Queue = asyncio.Queue(maxsize=2 * cfg.concurrency)
    yes: list[tuple[float, Verdict]] = []
    stop = ctx.options.stop
    before = r.offered
    held: list[str] = []

    def hold() -> str | None:
        """Why nothing new may be offered now, if so."""
        if stop is not None and stop.is_set():
            return "stopping"
        if ctx.spent() >= cfg.max_cost_usd:
            return f"session cost cap ${cfg.max_cost_usd:g} reached"
        return None

    async def produce():
        for c in offer:
            if hold():
                break
            await queue.put(c)
        # Not in a `finally`: once cancelled the workers are gone, and a put into a full queue never returns.
        for _ in range(cfg.concurrency):
            await queue.put(None)

    async def work():
        while (c := await queue.get()) is not None:
            # checked again here, not only at put: the queue holds candidates not yet paid for
            if reason := hold():
                held.append(reason)
                continue
            r.offered += 1
            out = await ctx.judge.ask(p, c)
            if out.kind == "verdict":
                v = Verdict(pass_name=p.name, fingerprint=c.fingerprint, subject=c.subject, answer=out.answer,
                            is_yes=out.answer in p.yes, rationale=out.rationale, model=ctx.judge.model,
                            prompt=p.prompt.id, attempts=out.attempts, calls=out.calls, agreement=out.agreement,
                            tokens_in=out.tokens_in, tokens_out=out.tokens_out, cost_usd=out.cost_usd,
                            replies=out.replies, payload=out.payload, session=ctx.session)
                keep(ctx, v)
                r.judged += 1
                if v.is_yes:
                    r.resolved += 1
                    yes.append((c.score, v))
                else:
                    r.declined += 1
            else:
                setattr(r, out.kind, getattr(r, out.kind) + 1)
                r.first_error = r.first_error or f"{out.kind}: {out.error}"

    tasks = [asyncio.ensure_future(produce()), *(asyncio.ensure_future(work()) for _ in range(cfg.concurrency))]
    try:
        await asyncio.gather(*tasks)
    finally:
        # A refused key in one worker stops all of them, before the session's own cleanup runs.
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    reason = hold() or (held[0] if held else None)
    if reason and len(offer) > r.offered - before:
        waiting = len(offer) - (r.offered - before)
        r.notes.append(f"{reason}: {waiting} candidate(s) wait" + (" for the next session" * (reason == "stopping")))
    return [v for _, v in sorted(yes, key=lambda sv: -sv[0])]


def decide(p, ctx: Context, r: PassResult, verdicts: list[Verdict]) -> None:
    """Apply yes verdicts best first, each checked against the corpus as it now is."""
    waiting = stale = 0
    for v in verdicts:
        if not ctx.clean:
            waiting += 1
            continue
        if not p.still_holds(v, ctx.corpus):
            stale += 1  # an earlier decision changed one side; the question will be asked afresh
            continue
        apply(ctx, p.name, v, p.change(v, ctx))
        r.applied += 1
    if waiting:
        r.notes.append(f"{waiting} decision(s) wait for a clean work tree")
    if stale:
        r.notes.append(f"{stale} yes verdict(s) no longer match the corpus after earlier decisions")


def plan_dry(ctx: Context, p, r: PassResult, offer: list[Candidate], result: SessionResult) -> None:
    """What a real session would offer, with its evidence and an estimate of calls and cost."""
    cfg = ctx.config.judge
    orders = 2 if cfg.position_swap else 1
    calls = len(offer) * cfg.samples * (orders if p.name != "discovery" else 1)
    chars = sum(len(p.prompt.system) + len(p.prompt.render(c.orders[0])) for c in offer)
    price = ctx.config.price(cfg.model) if not ctx.options.judge.startswith("scripted:") else None
    per_call_in = chars / max(len(offer), 1) / 4  # ~4 characters a token
    estimate = None
    if price:
        estimate = calls * (per_call_in * price.input_per_mtok + 60 * price.output_per_mtok) / 1e6
    r.offered = len(offer)
    r.notes.append(f"would ask {len(offer)} question(s) = {calls} call(s)"
                   + (f", about ${estimate:.4f}" if estimate is not None else ""))
    result.plan[p.name] = [{"subject": c.subject, "score": round(c.score, 4), "evidence": c.orders[0]} for c in offer]
