"""A review session: corpus -> candidates -> judgments -> verdicts -> decisions -> commits -> status lines."""

from __future__ import annotations

import asyncio
import logging
import secrets
import shlex
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import metrics
from .asking import (
    FirstReader,
    audits_due,
    collected_audits,
    first_reader,
    judge_all,
    meet,
    note_skipped,
    plan_dry,
    reader_notes,
    standing_first,
    submit_batch,
)
from .batches import Batches, batch_mode
from .candidate_lists import CandidateLists
from .config import CONFIG_FILE, Config, load_config, retired_model
from .corpus import Corpus, CorpusReport, corpus_report, load_corpus
from .decisions import decide, restatable, restate
from .duplicates import run_exact
from .embeddings import Embedder
from .errors import BadFact, ConfigError, JudgeRefused, KnomitError
from .freshness import fresh_first, fresh_names, new_names, owed_to_fresh
from .gitops import Applier, Lock, dirty_paths, merge_in_progress, open_repo, shared_lock
from .judge import Judge, ScriptedBackend, judge_kind, make_backend
from .lines import describe
from .models import Lineup, has_key, read_lineup, require_usable
from .neighbours import Memory
from .passes import JUDGED_PASSES
from .passes.describe import PASS as DESCRIBE
from .passes.describe import describe_model
from .passes.registry import all_passes
from .recovery import recover, sync_git, sync_journal
from .shortlist import gc_paused, remembered
from .spend import Caps, summarise
from .status import PassResult, total_cost
from .store import FileIndex, Store
from .sync import Remote, SyncReport, changed_since_last_session
from .throttle import Allowance, assess, record, terms
from .transport import require_key
from .verdicts import Journal, Verdict
from .worth import Worth

log = logging.getLogger(__name__)
MAX_ROUNDS = 4


@dataclass
class ReviewOptions:
    dry_run: bool = False
    passes: tuple[str, ...] = JUDGED_PASSES
    judge: str = "anthropic"
    stop: threading.Event | None = None  # once set, nothing new is offered; judgments in flight finish
    batch: bool | None = None  # submit offered questions as a Message Batch; None: judge.mode decides
    metrics_file: Path | None = None  # review --metrics-file: wins over [metrics] textfile


@dataclass
class SessionResult:
    session: str
    dry_run: bool
    commits: list[str] = field(default_factory=list)
    passes: dict[str, PassResult] = field(default_factory=dict)
    problems: list[BadFact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plan: dict[str, list[dict]] = field(default_factory=dict)  # dry run: what would be offered, with evidence
    estimates: dict[str, dict] = field(default_factory=dict)  # dry run: questions, calls and estimate_usd per pass
    batches: list[dict] = field(default_factory=list)  # Message Batches submitted, waiting or collected
    batch_prices: bool = False  # a batch session: its dry-run estimate is at batch prices (not in --json)
    embedded: int = 0  # texts embedded this session (0 when nothing changed: the model is not even loaded)
    parsed: int = 0  # fact files parsed this session (unchanged ones come from the file index)
    corpus: CorpusReport | None = None  # what was read: no fact read is broken, never a silent zero
    spend: dict | None = None  # spend.Spend.json() after the session: today, 7 and 30 days, per pass, projection
    metrics_error: str | None = None  # the metrics file could not be written after the session: exit 1
    sync: SyncReport | None = None  # [git] remote set: what was merged before the session and pushed after
    unpriced: list[str] = field(default_factory=list)  # dry run: "key 'model'" of each model with no price
    stops: bool = False  # dry run: a real session would exit 2 on a retired or unknown model (see the notes)

    @property
    def broken(self) -> bool:
        return any(r.state == "broken" for r in self.passes.values()) or \
            (self.corpus is not None and self.corpus.state == "broken") or \
            (self.sync is not None and self.sync.state == "broken")

    @property
    def cost_usd(self) -> float | None:
        return total_cost(self.passes.values())

    @property
    def estimate_usd(self) -> float | None:
        """A dry run's estimated cost over every pass; None when any pass's is unknown (a model with no price)."""
        usd = [e["estimate_usd"] for e in self.estimates.values()]
        return None if None in usd else round(sum(usd), 6)

    def lines(self) -> list[str]:
        return [*([self.sync.line()] if self.sync else []), *([self.corpus.line()] if self.corpus else []),
                *(r.line() for r in self.passes.values())]

    def summary(self) -> str:
        """A dry run's first line: what a real session would ask and cost, above the plan it lists."""
        if self.corpus is not None and self.corpus.state == "broken":  # said first: a $0.0000 would read as fine
            return ("dry run: broken: no fact read (see the corpus line), so a real session asks nothing and exits 1; "
                    "no judge call was made and nothing was written but derived caches")
        asked = {n: e for n, e in self.estimates.items() if n != DESCRIBE}
        questions = sum(e["questions"] for e in asked.values())
        calls = sum(e["calls"] for e in asked.values())
        lines = self.estimates.get(DESCRIBE)
        if self.estimate_usd is not None:
            usd = f"about ${self.estimate_usd:.4f}"
        elif self.unpriced:  # named, with what a real session does about it
            usd = (f"unknown (no price for the model): {', '.join(self.unpriced)} "
                   f"{'has' if len(self.unpriced) == 1 else 'have'} none, so a real session exits 2")
        else:
            usd = "unknown (a real session exits 2 before it asks: see the notes)" if self.stops else "unknown"
        exact = self.passes.get("exact")
        retract = sum(len(i["evidence"]["retract"]) for i in self.plan.get("exact", []))
        return (f"dry run: would ask {questions} question(s) = {calls} call(s)"
                + (f", and {lines['calls']} describe request(s) for lines" if lines else "")
                + (f", retract {retract} exact duplicate(s) in {exact.offered} group(s) without a call"
                   if retract and exact else "")
                + f", {usd}" + " at batch prices" * self.batch_prices
                + "; no judge call was made and nothing was written but derived caches")

    def json(self) -> dict:
        passes = {name: r.json() for name, r in self.passes.items()}
        if self.dry_run:
            for name, r in passes.items():  # exact duplicates never call a judge
                r["estimate_usd"] = self.estimates[name]["estimate_usd"] if name in self.estimates else 0.0
        return {"session": self.session, "dry_run": self.dry_run, "commits": self.commits,
                "passes": passes, "cost_usd": self.cost_usd,
                "problems": [{"path": p.path, "line": p.line, "reason": p.reason} for p in self.problems],
                "notes": self.notes, "batches": self.batches, "embedded": self.embedded, "parsed": self.parsed,
                **({"corpus": self.corpus.json()} if self.corpus else {}),
                **({"spend": self.spend} if self.spend is not None else {}),
                **({"metrics_error": self.metrics_error} if self.metrics_error else {}),
                **({"sync": self.sync.json()} if self.sync is not None else {}),
                **({"plan": self.plan, "estimate_usd": self.estimate_usd} if self.dry_run else {})}


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
    problems: list[BadFact] = field(default_factory=list)  # the session's, for decisions refused as they were applied
    batches: Batches | None = None
    index: FileIndex | None = None
    allowances: dict[str, Allowance] = field(default_factory=dict)
    fresh: dict[str, set] = field(default_factory=dict)  # pass -> the facts or spellings changed since its last session
    since: dict[str, tuple] = field(default_factory=dict)  # pass -> when its last recorded session started, ended
    new: dict[str, set] = field(default_factory=dict)  # pass -> the fresh names the writer brought: owed a question
    caps: Caps | None = None  # the session's dollar caps, with what the day and month spent before it
    lines: dict[str, str] = field(default_factory=dict)  # spelling -> its describe line (passes/describe.py)
    readers: dict[str, FirstReader] = field(default_factory=dict)  # pass -> who reads its questions first
    no_line: list[str] = field(default_factory=list)  # spellings asked this session whose reply gave no line
    described: set = field(default_factory=set)  # (spelling, carriers) asked for a line this session: not again
    asked: int = 0  # questions that came back from the judge this session
    in_flight: int = 0  # questions with the judge now
    lineup: Lineup = field(default_factory=Lineup)  # the models' lifecycles and dialects, read before the session
    _judge: Judge | None = None

    @property
    def judge(self) -> Judge:
        if self._judge is None:  # made when a question needs it: a caught-up session never loads the SDK
            self._judge = Judge(make_backend(self.options.judge, self.config, self.lineup), self.store, self.config)
        return self._judge

    @property
    def kind(self) -> str:
        """The kind of judge this session asks: only its own verdicts bind it (see verdicts.judge_of)."""
        return judge_kind(self.options.judge)

    def spent(self) -> float:
        gathered = self.batches.estimated_usd if self.batches else 0.0  # a batch to submit counts at its estimate
        if self._judge is None:
            return gathered
        return self._judge.spent() + gathered  # unknown costs at their bound: an unknown cost must not lift a cap

    def next_usd(self) -> float:
        """What the questions in flight and one more should cost: at this session's mean once it has one,
        before that at the last 30 days' (0 on a corpus never asked)."""
        lines = self._judge.ledgers[DESCRIBE].charged_usd if self._judge and DESCRIBE in self._judge.ledgers else 0.0
        mean = (self.spent() - lines) / self.asked if self.asked else self.caps.usd_per_question  # questions only
        return mean * (self.in_flight + 1)


def new_session_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def review(root: Path | str, options: ReviewOptions | None = None, config: Config | None = None) -> SessionResult:
    """Run one review session on the corpus at root (the library API behind `knomit-judge review`)."""
    options = options or ReviewOptions()
    root = Path(root).resolve()
    repo = open_repo(root)
    config = config or load_config(root)
    if options.judge != "anthropic":
        # a bad --judge or replies file fails here, before a session starts and stores anything
        make_backend(options.judge, config)
    elif not options.dry_run:
        # Whatever ends a session with exit 2 is checked before recovery or exact duplicates change the corpus:
        # no key here; a retired or unknown model, and no price (no cap that holds), once the lock is held.
        # A key the API refuses is known only at the first call.
        require_key()
    if options.dry_run:
        # Dry run: an in-memory copy of the db, no lock, no recovery. Of what it computes only the derived
        # caches (embeddings, neighbour and candidate lists) reach the db file: never a verdict, reply,
        # session or throttle row, nor a byte of the corpus or git.
        store = Store.read_only(root)
        models = read_lineup(config, store, offline=not has_key()) if options.judge == "anthropic" else Lineup()
        with remembered(Memory(store)):
            result = asyncio.run(_session(root, repo, config, store, options, list(models.notes), models))
        if models.problem:  # what the session would do: stop before it starts
            result.notes.insert(0, f"a real session exits 2: {models.problem}")
            result.stops = True
        with shared_lock(repo) as holder:  # a session running now writes the db: its own derived state will do
            if holder is None:
                store.keep_derived()
        if note := other_judge(store, root, options):
            result.notes.insert(0, note)
        result.spend = summarise(store, config).json()
        if options.judge == "anthropic":
            unpriced(config, models, result)
        if any(e["calls"] for e in result.estimates.values()):
            result.notes.append(lower_bound(store, result, options.passes))
        return result
    metrics_path = metrics.textfile(root, repo, config, options.metrics_file)  # a bad path exits 2 now
    remote = Remote.of(repo, config)  # an unknown remote exits 2 now
    with Lock(repo) as lock:
        store = Store.for_corpus(root)
        ran, result = False, None
        try:
            # a retired or unknown model exits 2 here: before recovery, a merge or an exact duplicate changes anything
            models = require_usable(config, store) if options.judge == "anthropic" else Lineup()
            notes = recover(root, repo, store, lock, keep_marks=True)
            if remote:
                models.confirm()  # a merge is a change: a model retired since it was last read stops us first
                pull(remote, root, repo, store)
            with remembered(Memory(store)):  # neighbour lists are searched again only where vectors changed
                ran = True
                result = asyncio.run(_session(root, repo, config, store, options, [*models.notes, *notes], models))
            if remote:
                remote.push()  # after the session's last commit, its journal's
                remote.save()
                result.sync = remote.report
            result.spend = summarise(store, config).json()
            return result
        finally:
            if ran and metrics_path:  # after a session that raised too: it recorded itself as aborted
                error = metrics.write(metrics_path, root, store, config, judge_kind(options.judge))
                if error and result is not None:
                    result.metrics_error = error
                    result.notes.append(error)
            store.close()


def lower_bound(store: Store, result: SessionResult, passes: tuple[str, ...], sessions: int = 20) -> str:
    """What a dry run says of its estimate: the first round's only, so a lower bound; and, from the last sessions
    that recorded their first round, how many questions they asked over all rounds for each of it."""
    said = (f"the estimate covers the first round only: a real session asks, in up to {MAX_ROUNDS - 1} more "
            "rounds, the questions its applied decisions make, so it is a lower bound")
    counted = [s["passes"][n] for s in store.sessions(sessions) for n in passes
               if s["passes"].get(n, {}).get("first_round")]  # sessions before it was recorded say nothing
    first, total = sum(c["first_round"] for c in counted), sum(c["offered"] for c in counted)
    if not first:
        return said
    usd = result.estimate_usd
    return (said + f"; the last sessions asked {total / first:.2f} question(s) over all rounds for each one of "
            f"their first round ({total} for {first})"
            + (f": at that rate about ${usd * total / first:.4f}" if usd is not None else ""))


def unpriced(config: Config, models: Lineup, result: SessionResult) -> None:
    """A dry run names every model it could not price, and what a real session would do (exit 2); a model the
    Models API says is gone is named for that alone (one cause)."""
    keys = {**config.models(), **({"describe.model": describe_model(config)} if config.describe.enabled else {})}
    said = set(models.stopping)
    for key, model in keys.items():
        if model in said or config.price(model) is not None:
            continue
        said.add(model)  # once, under the first key that names it
        result.unpriced.append(f"{key} {model!r}")
        if retired := retired_model(model):  # known retired without asking the API (a dry run with no key)
            result.notes.append(f"{key} {model!r} is {retired}; a real session exits 2 until a current model is "
                                f"named in {config.where(key)}")
            continue
        result.notes.append(f'no price for {key} {model!r}: a real session exits 2 until [prices."{model}"] '
                            f"input_per_mtok and output_per_mtok are set in {CONFIG_FILE}, or a priced model is "
                            f"named in {config.where(key)}")


def other_judge(store: Store, root: Path, options: ReviewOptions) -> str | None:
    """A dry run for a judge with no verdicts here while another kind has some: say so, since only a judge's
    own verdicts count for it (docs/memory.md), and name the command that would use the others."""
    kind = judge_kind(options.judge)
    counts = store.judges(options.passes)
    if counts.get(kind) or not counts:
        return None
    other, n = max(counts.items(), key=lambda kv: kv[1])
    flag = " --judge scripted:FILE" if other == ScriptedBackend.kind else ""
    return (f"the {kind} judge has no verdicts here; the {n} {other} verdict(s) count only for the {other} judge, "
            f"so this plan asks everything again: `knomit-judge review {shlex.quote(str(root))} --dry-run{flag}` "
            "uses them")


def pull(remote: Remote, root: Path, repo, store: Store) -> None:
    """Merge the remote branch before the corpus is read; what it brought is imported like a lost db's journal."""
    # journal lines a killed session left uncommitted would stop the merge: committed first, as its own commit
    Applier(repo).commit_paths([Journal(root).relpath(p) for p in ("exact", *JUDGED_PASSES)],
                               "journal: verdicts kept before merging the remote\n")
    if remote.pull():
        # verdicts other machines journalled and pushed are answered here too: never paid for again
        sync_journal(root, store)
        sync_git(repo, store)


async def _session(root, repo, config, store, options, notes, models: Lineup) -> SessionResult:
    result = SessionResult(session=new_session_id(), dry_run=options.dry_run, notes=list(notes))
    with gc_paused():  # 100k facts, their tuples and index rows: the collector would rescan them over and over
        index = FileIndex(store)
        corpus = load_corpus(root, config.corpus.max_fact_bytes, index, config.corpus)
    result.problems = list(corpus.problems)
    for problem in corpus.problems:
        log.warning("skipped %s", problem)
    result.corpus = corpus_report(corpus)
    dirty = dirty_paths(repo, config.corpus.paths)  # an untracked file outside the fact paths is not ours to mind
    if merging := merge_in_progress(repo):  # a person's (recovery settled ours): a commit now would finish it
        dirty = [merging]
        result.notes.append(f"{merging}: judging and storing, applying nothing")
    elif dirty:
        result.notes.append(f"work tree has {len(dirty)} uncommitted change(s) (e.g. {dirty[0]}): "
                            "judging and storing, applying nothing")
    ctx = Context(root, config, store, corpus, Embedder(store), Journal(root), None if options.dry_run else Applier(repo),
                  options, result.session, clean=not dirty, commits=result.commits, problems=result.problems)
    ctx.batches = Batches(store, result.session, batch_mode(options.batch, config, options.judge))
    result.batch_prices = ctx.batches.submitting
    ctx.index = index
    ctx.lineup = models
    ctx.caps = Caps.for_session(store, config)
    if not options.dry_run:
        store.start_session(result.session)
    try:
        if result.corpus.state == "broken":
            # Nothing read is not "nothing qualified": every pass says it could not look.
            for name in ("exact", *(n for n in JUDGED_PASSES if n in options.passes)):
                result.passes[name] = PassResult(name, state="broken", notes=["no fact read: see the corpus line"])
            return result
        result.passes["exact"] = run_exact(ctx, result)
        passes = [p for name, p in all_passes().items() if name in options.passes]
        # before collecting: questions in a batch still running count as spent, and collected ones are
        # judged as paid below, so the balance charges each batched question once
        money = terms(config, ctx.kind)
        throttles = {p.name: assess(store, p.name, money, ctx.kind) for p in passes}
        in_git = False  # what changed since the last session in the history, for a db that has none of its own
        for p in passes:
            # the scripted judge has no price: its balance counts questions, and every question is worth one
            worth = Worth.of_pass(store, p.name, ctx.kind) if money.unit == "usd" else None
            ctx.allowances[p.name] = Allowance(throttles[p.name], money, worth)
            since = ctx.store.last_session(p.name, ctx.kind) if ctx.index is not None else (None, None)
            paths = None
            if since == (None, None) and config.git.remote:  # unset, a session is exactly as before the remote
                if in_git is False:
                    # a fresh clone of a shared corpus: what writers changed since any machine's last session
                    # is as new to this one as to the machine that would have run it
                    in_git = changed_since_last_session(repo, set(corpus.facts))
                if in_git:  # and what is owed is counted from that session's end, as that machine would
                    paths, since = in_git[0], (in_git[1], in_git[1])
            ctx.since[p.name] = since
            ctx.fresh[p.name] = fresh_names(p, ctx, since[0], paths)
            ctx.new[p.name] = new_names(p, ctx, since[1], paths)
        if not options.dry_run and ctx.batches.open_batches():
            await ctx.batches.collect(ctx.judge, all_passes())  # finished batches first, whatever --pass says
        for p in passes:
            result.passes[p.name] = PassResult(p.name)
            if p.name == "alias":  # the describe step's own line, after the alias pass's
                result.passes[DESCRIBE] = PassResult(DESCRIBE, throttle="never budgeted")
        # Applied decisions change fingerprints, and so make new questions: ask them in this session,
        # round after round, until a round applies nothing (each pass's allowance is per session).
        for round_no in range(1 if options.dry_run else MAX_ROUNDS):
            applied = 0
            for p in passes:
                before = result.passes[p.name].applied
                await run_round(p, ctx, result, result.passes[p.name], throttles[p.name], first=round_no == 0)
                applied += result.passes[p.name].applied - before
                if round_no == 0:  # what a dry run's estimate covers: a later dry run says how far it falls short
                    result.passes[p.name].first_round = result.passes[p.name].offered
            if not applied:
                break
        if options.stop is not None and options.stop.is_set():
            # Stopped before its end (the daemon's SIGTERM): recorded as a plain review's interruption is, so
            # status, the metrics and the report read one record; the passes it never reached are not defunded.
            aborted(result, options, KeyboardInterrupt())
            for r in result.passes.values():
                charge(ctx, r)
            return result
        if ctx.batches.gathered:
            await submit_batch(ctx, result)
        for p in passes:
            finish_pass(p, ctx, result.passes[p.name], throttles[p.name])
        if ctx._judge and isinstance(ctx._judge.backend, ScriptedBackend):
            if note := ctx._judge.backend.unmatched_note():
                log.warning("%s", note)
                result.notes.append(note)
    except BaseException as e:  # an error, or a signal's cancellation: recorded as such, then re-raised
        # a 404 naming a model: read it again at once, and say "retired" (one cause) when the API says so
        gone = models.gone(e.model) if isinstance(e, JudgeRefused) and e.model else None
        if not options.dry_run:
            aborted(result, options, ConfigError(gone) if gone else e)
            for r in result.passes.values():
                charge(ctx, r)
        if gone:
            raise ConfigError(gone) from None
        raise
    finally:
        result.batches = ctx.batches.reports
        result.embedded, result.parsed = ctx.embedder.computed, index.parsed
        if not options.dry_run:
            index.save()
            # a model found retired stops before its journal is committed: the lines wait for the next session
            paths = [ctx.journal.relpath(p) for p in ("exact", *JUDGED_PASSES, DESCRIBE)]
            sha = None if models.problem else ctx.applier.commit_paths(
                paths, f"journal: verdicts of session {result.session}\n\nKnomit-Session: {result.session}\n")
            if sha:
                result.commits.append(sha)
            store.end_session(result.session, {n: r.json() for n, r in result.passes.items()},
                              result.cost_usd, result.commits, corpus=result.corpus.json())
    return result


def aborted(result: SessionResult, options: ReviewOptions, error: BaseException) -> None:
    """Name the judged passes of a session that did not finish `aborted`, with why.

    Left unsettled they would read as `nothing-qualified`: a zero that hides a missing key or a refused
    request. No throttle record is written for them: the session neither spent nor probed anything.
    """
    if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
        why = "aborted: interrupted"  # SIGTERM or Ctrl-C
    else:
        why = f"aborted: {error}" if isinstance(error, KnomitError) else f"aborted: {type(error).__name__}: {error}"
    # the describe step too: a session that stopped is no success of its step, whatever it did before
    for name in (*options.passes, *([DESCRIBE] if DESCRIBE in result.passes else ())):
        r = result.passes.setdefault(name, PassResult(name))
        r.state = "aborted"
        r.notes.append(why)


async def run_round(p, ctx: Context, result: SessionResult, r: PassResult, t, first: bool) -> None:
    """One round of a pass: shortlist, skip what is answered, judge what the budget allows, apply the yeses."""
    restating = set()
    if p.stands and not ctx.options.dry_run:
        restate(p, ctx, r)  # first: the candidates are then made from the corpus its merges leave
    elif p.stands:
        restating = restatable(p, ctx)
        if restating:
            r.notes.append(f"{len(restating)} merge(s) the judge decided before would be restated without a call")
    if p.name == "alias":
        await describe(ctx, result.passes[DESCRIBE], result)
    with gc_paused():  # millions of small objects at 100k facts; see shortlist.gc_paused
        candidates = CandidateLists(ctx.store).candidates(p, ctx)  # read back when nothing it depends on changed
    yeses = ctx.store.unapplied_yes(p.name, ctx.kind)  # read once a round: asked again, or applied below
    fps = candidates.fingerprints  # compared without making the candidates: most are answered
    reader = ctx.readers.get(p.name) or ctx.readers.setdefault(p.name, first_reader(ctx, p, fps))
    allowance = ctx.allowances[p.name]
    allowance.reader = reader.model if reader.reads else ctx.config.judge.model  # whose price a read takes
    if allowance.worth is not None:
        allowance.read_price = allowance.worth.price(allowance.reader, ctx.config.judge.model, allowance.terms.price,
                                                     ctx.config.judge.audit_share)
    # a suspended first reader's standing no's are asked again of the judge model
    answered = ctx.store.answered(p.name, ctx.kind) - asked_again(p, ctx, yeses) - reader.askable
    # not asked now: refused by the API under this prompt version (by the judge model: a first reader's refusal
    # hands the question over), or in a Message Batch not yet collected
    refused = ctx.store.refused(p.name, p.prompt.id, ctx.config.judge.model if ctx.kind == "anthropic" else None) \
        - answered
    busy = ctx.batches.busy(p.name) - answered
    waiting = fresh_first([candidates[i] for i, fp in enumerate(fps) if fp not in answered and fp not in refused
                           and fp not in busy and fp not in restating], ctx.fresh.get(p.name, set()))
    seen = ctx.seen.setdefault(p.name, set())
    seen.update(fps)
    r.candidates = len(seen)  # distinct questions met this session, over all rounds
    # questions whose batch results came in this session are paid for: judged whatever the budget says
    paid = ctx.batches.take_paid(p.name, {c.fingerprint for c in waiting})
    rest = [c for c in waiting if c.fingerprint not in paid]
    owed = owed_to_fresh(p, ctx, waiting, paid)
    rest.sort(key=lambda c: c.fingerprint not in owed)  # stable: the owed first, then fresh, then backlog
    rest = standing_first(reader, ctx, p, rest, owed)
    meet(reader, candidates, fps)  # the first reader's standing no's among them: in the audit pool
    if first:
        if t.state == "defunded" and not t.probe and (owed or (waiting and waiting[0].fresh)):
            t.probe_fresh(len(owed))  # a new duplicate is asked while it is new, not probe_every sessions later
        # answered, or refused earlier (with a note); questions in a running batch count as batched instead
        r.cached = len(fps) - len(waiting) - sum(fp in busy for fp in fps)
        r.throttle = t.state + (" (probe)" if t.probe else "")
        r.next_probe_in = t.next_probe_in
        note_skipped(p, ctx, r, fps, refused, busy)
    # yes verdicts not yet applied (dirty tree, or a killed session rolled back): apply without asking again
    unapplied = {v.fingerprint: v for v in yeses if not outdated(p, v)}
    pending = [unapplied[fp] for fp in fps if fp in unapplied]
    r.fresh = max(r.fresh, sum(c.fresh for c in rest))
    if ctx.options.dry_run:  # no verdict comes back to move the balance: what it holds now is what is offered
        # the owed withdraw from the balance, and are asked past it; the rest as many as the balance buys
        room = max(len(owed), int((t.allowance or 0) / allowance.price + 1e-9), t.probes)
        # as the session's producer does: the owed and a suspended reader's standing no's whatever they are worth,
        # the rest only while the worth rule finds them worth their price
        rest = [c for c in rest if c.fingerprint in owed or c.fingerprint in reader.askable
                or allowance.worth_asking(c.fingerprint, c.score)]
        offer = [c for c in waiting if c.fingerprint in paid] + (rest if t.allowance is None else rest[:room])
        r.waiting = len(waiting) - len(offer)
        plan_dry(ctx, p, r, offer, result)
        return
    # every waiting question is offered, best first; the live balance decides how far down the list it goes
    offer = [c for c in waiting if c.fingerprint in paid] + rest
    r.waiting = len(waiting) - len(offer)
    before = r.offered
    # audits a batch bought of questions the first reader answered no: read now, a miss applied with the rest
    audited = await collected_audits(p, ctx, r, audits_due(p, ctx, candidates, answered))
    fresh = await judge_all(p, offer, ctx, r, paid, owed, reader) + audited
    r.waiting += len(offer) - (r.offered - before)  # held back by the cost cap or a stop
    decide(p, ctx, r, pending + fresh)


def outdated(p, v: Verdict) -> bool:
    """A stored yes the pass no longer applies as it stands (prune: a retract naming no redundant fact)."""
    return hasattr(p, "outdated") and p.outdated(v)


def asked_again(p, ctx: Context, yeses: list[Verdict]) -> set[str]:
    """Fingerprints whose latest verdict is an unapplied yes (of `yeses`) the pass no longer applies: asked
    again under the current prompt (a prune@1 retract, which left the survivor to the fixed rules), never applied."""
    out = set()
    for v in yeses:
        if outdated(p, v) and ctx.store.verdict_for(p.name, v.fingerprint).id == v.id:
            out.add(v.fingerprint)
    return out


def finish_pass(p, ctx: Context, r: PassResult, t) -> None:
    """Name the pass's state, take its spend from the ledger, and record the throttle's session."""
    r.settle(held=r.waiting > 0, dry_run=ctx.options.dry_run)
    if r.waiting and r.state == "worked" and t.allowance is not None and t.allowance <= 1e-9 and \
            not any("wait" in n for n in r.notes):
        r.notes.append(f"balance spent: {r.waiting} candidate(s) wait until resolutions refill it")
    unworthy = ctx.allowances[p.name].unworthy if p.name in ctx.allowances else 0
    if unworthy and not ctx.options.dry_run:
        r.notes.append(f"{unworthy} question(s) not worth their price at the pass's chance of resolving something "
                       "by score: they wait")
    charge(ctx, r)
    reader_notes(r, ctx.readers.get(p.name))
    if r.cost_usd is None:
        r.notes.append("cost incomplete: a call reported no usage or its model has no price")
    if not ctx.options.dry_run:
        record(ctx.store, ctx.session, p.name, t, r.offered, r.judged, r.resolved,
               probe_spent=t.probe and r.judged > 0, judge=ctx.kind)


def charge(ctx: Context, r: PassResult) -> None:
    """The pass's calls and cost, from the judge's ledger (a session that was stopped or failed asked them too)."""
    ledger = ctx._judge.ledgers.get(r.name) if ctx._judge else None
    if ledger:
        r.judge_calls, r.attempts, r.cost_usd = ledger.calls, ledger.attempts, ledger.cost_usd
        r.charged_usd = round(ledger.charged_usd, 6)
