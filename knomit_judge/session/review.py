"""A review session: corpus -> candidates -> judgments -> verdicts -> decisions -> commits -> status lines."""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from git import Repo

from .. import interrupts, metrics
from ..batches import Batches, batch_mode
from ..config import CONFIG_FILE, Config, load_config
from ..corpus import corpus_report, load_corpus
from ..embeddings import Embedder
from ..errors import ConfigError, JudgeRefused, KnomitError
from ..file_index import FileIndex
from ..gitops import Applier, merge_in_progress, open_repo, shared_lock, status_entries
from ..interrupts import Interrupted
from ..judge import make_backend
from ..layout import matches
from ..models import Lineup, has_key, read_lineup, require_usable
from ..neighbours import Memory
from ..passes import JUDGED_PASSES
from ..passes.alias import no_motif_note
from ..passes.base import DESCRIBE, Pass
from ..passes.registry import all_passes, answered
from ..proposals import Board
from ..recovery import locked_store, sync_git, sync_journal
from ..scripted import ScriptedBackend
from ..shortlist import gc_paused
from ..spend import Caps, summarise
from ..status import LinesResult, PassResult
from ..store import Store
from ..sync import Remote
from ..transport import require_key
from ..verdicts import Journal
from .batch import submit_batch
from .context import MAX_ROUNDS, Context, PassRun, ReviewOptions, SessionResult
from .dry_run import lower_bound, other_judge, unpriced
from .duplicates import run_exact
from .freshness import freshness
from .propose import Proposing, open_proposals
from .rounds import finish_pass, run_round

log = logging.getLogger(__name__)


def new_session_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


@dataclass
class Opening:
    """What a session is opened on: the tree it reads and commits in (the proposals branch's, proposing), how it is
    read (config, options, the models read before it), its store and the notes made before it."""

    root: Path
    repo: Repo
    config: Config
    store: Store
    options: ReviewOptions
    models: Lineup = field(default_factory=Lineup)
    notes: list[str] = field(default_factory=list)
    proposing: Proposing | None = None
    embedder: Embedder | None = None


def review(root: Path | str, options: ReviewOptions | None = None, config: Config | None = None) -> SessionResult:
    """Run one review session on the corpus at root (the library API behind `knomit-judge review`)."""
    options = options or ReviewOptions()
    root = Path(root).resolve()
    repo = open_repo(root)
    config = config or load_config(root)
    if not options.judge.anthropic:
        # a bad replies file fails here, before a session starts and stores anything
        make_backend(options.judge, config, answers=answered())
    elif not options.dry_run:
        # Whatever ends a session with exit 2 is checked before recovery or exact duplicates change the corpus:
        # no key here; a retired or unknown model, and no price (no cap that holds), once the lock is held.
        # A key the API refuses is known only at the first call.
        require_key()
    if options.dry_run:
        # Dry run: an in-memory copy of the db, no lock, no recovery. Of what it computes only the derived
        # caches (embeddings, neighbour and candidate lists) reach the db file: never a verdict, reply,
        # session or throttle row, nor a byte of the corpus or git.
        with Store.read_only(root) as store:
            return _dry_run(root, repo, config, store, options)
    # a bad path exits 2 now
    metrics_path = metrics.textfile(root, repo, config, options.metrics_file)
    # an unknown remote exits 2 now
    remote = Remote.of(repo, config)
    with locked_store(root) as opened:
        store = opened.store
        ran, result, proposing = False, None, None
        try:
            # a retired or unknown model exits 2 here: before recovery, a merge or an exact duplicate changes anything
            models = require_usable(config, store) if options.judge.anthropic else Lineup()
            # The embedding model too: one that cannot be loaded exits 2 (MissingResource) with nothing changed yet.
            # neighbour lists searched again only where vectors changed
            embedder = Embedder(store, memory=Memory(store))
            embedder.load()
            notes = opened.recover(keep_marks=True)
            # the session reads and commits in the proposals branch's tree
            if config.apply.mode == "propose":
                # a refresh is a change: a model retired since it was last read stops us first
                models.confirm()
                proposing = open_proposals(root, opened.repo, config, store)
            elif remote:
                # a merge is a change: a model retired since it was last read stops us first
                models.confirm()
                pull(remote, root, opened.repo, store)
            ran = True
            # the session's task sees the daemon's SIGTERM
            with interrupts.watching(options.interrupt):
                result = asyncio.run(
                    _session(
                        Opening(
                            proposing.root if proposing else root,
                            proposing.tree if proposing else opened.repo,
                            config,
                            store,
                            options,
                            models,
                            [*models.notes, *notes],
                            proposing,
                            embedder,
                        )
                    )
                )
            if proposing:
                # the proposals branch pushed; the reviewed one never moves
                proposing.finish()
                result.proposals, result.sync = proposing.report, proposing.remote.report if proposing.remote else None
            elif remote:
                # after the session's last commit, its journal's
                remote.push()
                remote.save()
                result.sync = remote.report
            result.spend = summarise(store, config).json()
            return result
        finally:
            # after a session that raised too: it recorded itself as aborted
            if ran and metrics_path:
                error = metrics.write(metrics_path, root, store, config, options.judge.kind)
                if error and result is not None:
                    result.metrics_error = error
                    result.notes.append(error)


def _dry_run(root: Path, repo: Repo, config: Config, store: Store, options: ReviewOptions) -> SessionResult:
    """A dry run on an in-memory copy of the db: what a real session would ask, and what it would cost."""
    models = read_lineup(config, store, offline=not has_key()) if options.judge.anthropic else Lineup()
    try:
        result = asyncio.run(_session(Opening(root, repo, config, store, options, models, list(models.notes))))
    # interrupted (or failed): what it computed still spares the next run the work
    except BaseException:
        log.info(
            "dry run stopped: %d vector(s) embedded so far kept in the db, with the neighbour and candidate "
            "lists finished; nothing else written",
            _keep_derived(repo, store),
        )
        raise
    # what the session would do: stop before it starts
    if models.problem:
        result.notes.insert(0, f"a real session exits 2: {models.problem}")
        result.stops = True
    _keep_derived(repo, store)
    if note := other_judge(store, root, options):
        result.notes.insert(0, note)
    if config.apply.mode == "propose":
        result.notes.append(
            f"apply.mode = propose: planned on the checkout, not on {config.apply.proposals}, whose "
            "waiting proposals are left out of the plan"
        )
    result.spend = summarise(store, config).json()
    if options.judge.anthropic:
        unpriced(config, models, result)
    if any(e["calls"] for e in result.estimates.values()):
        result.notes.append(lower_bound(store, result, options.passes))
    return result


def waiting_here(root: Path, repo: Repo, config: Config, options: ReviewOptions) -> set[str]:
    """A dry run in propose mode reads the checkout: what waits on the proposals branch is not planned again."""
    if not options.dry_run or config.apply.mode != "propose":
        return set()
    return {p.verdict for p in Board(root, repo, config).waiting()}


def _keep_derived(repo: Repo, store: Store) -> int:
    """A dry run's derived caches (vectors, neighbour and candidate lists) written to the db file; returns how
    many vectors were kept."""
    vectors = sum(len(args[1]) for name, args in store.derived or () if name == "put_embeddings")
    # a session running now writes the db: its own derived state will do
    with shared_lock(repo) as holder:
        return vectors if holder is None and store.keep_derived() else 0


def pull(remote: Remote, root: Path, repo: Repo, store: Store) -> None:
    """Merge the remote branch before the corpus is read; what it brought is imported like a lost db's journal."""
    # journal lines a killed session left uncommitted would stop the merge: committed first, as its own commit
    Applier(repo).commit_paths(
        [Journal(root).relpath(p) for p in ("exact", *JUDGED_PASSES)],
        "journal: verdicts kept before merging the remote\n",
    )
    if remote.pull():
        # verdicts other machines journalled and pushed are answered here too: never paid for again
        sync_journal(root, store)
        sync_git(repo, store)


def open_context(at: Opening, result: SessionResult) -> Context:
    """Read the corpus (what is broken, what is dirty, into the result) and make the session's context."""
    root, repo, config, store, options = at.root, at.repo, at.config, at.store, at.options
    # 100k facts, their tuples and index rows: the collector would rescan them over and over
    with gc_paused():
        index = FileIndex(store)
        corpus = load_corpus(root, config.corpus.max_fact_bytes, index, config.corpus)
    result.problems = list(corpus.problems)
    for problem in corpus.problems:
        log.warning("skipped %s", problem)
    result.corpus = corpus_report(corpus)
    # An uncommitted change to a fact, or to the settings it is read by, holds every decision: the session read
    # it. Any other (.obsidian/workspace.json, an attachment, an edit in .knomit/) holds only a decision that would
    # write that file: a decision commits its own files from a private index, never the user's others.
    # An untracked file outside the fact paths holds nothing, but a decision that would write it (a relinked note
    # nobody has committed yet) waits too: a commit of it would take in someone's unfinished work.
    entries = status_entries(repo)
    held = [
        p
        for code, p in entries
        if (code != "??" or matches(p, config.corpus.paths)) and (corpus.covers(p) or p == CONFIG_FILE)
    ]
    others = frozenset(p for _, p in entries) - set(held)
    # a person's (recovery settled ours): a commit now would finish it
    if merging := merge_in_progress(repo):
        held = [merging]
        result.notes.append(f"{merging}: judging and storing, applying nothing")
    elif held:
        result.notes.append(
            f"work tree has {len(held)} uncommitted change(s) to facts (e.g. {held[0]}): "
            "judging and storing, applying nothing"
        )
    elif others:
        result.notes.append(
            f"{len(others)} uncommitted change(s) outside the facts (e.g. {min(others)}): left "
            "as they are; only a decision that would write one waits"
        )
    proposing = at.proposing
    return Context(
        root,
        config,
        store,
        corpus,
        at.embedder or Embedder(store, memory=Memory(store)),
        Journal(root),
        None if options.dry_run else Applier(repo),
        options,
        result,
        clean=not held,
        dirty=others,
        batches=Batches(store, result.session, batch_mode(options.batch, config, options.judge)),
        index=index,
        caps=Caps.for_session(store, config),
        lineup=at.models,
        proposals=config.apply.proposals if proposing else "",
        proposed=proposing.proposed if proposing else waiting_here(root, repo, config, options),
    )


async def _session(at: Opening) -> SessionResult:
    # what Ctrl-C cancels: a long step in it, or in a task it starts, looks at it
    interrupts.session_task()
    config, store, options, models = at.config, at.store, at.options, at.models
    # an older budget key beside its newer one: said, in the log and the notes
    for ignored in config.ignored:
        log.warning("%s", ignored)
    result = SessionResult(session=new_session_id(), dry_run=options.dry_run, notes=[*config.ignored, *at.notes])
    ctx = open_context(at, result)
    index, report = ctx.index, result.corpus
    assert report is not None  # open_context read the corpus
    result.batch_prices = ctx.batches.submitting
    if not options.dry_run:
        store.start_session(result.session)
    try:
        if report.state == "broken":
            # Nothing read is not "nothing qualified": every pass says it could not look.
            for name in ("exact", *(n for n in JUDGED_PASSES if n in options.passes)):
                result.passes[name] = PassResult(name, state="broken", notes=["no fact read: see the corpus line"])
            return result
        result.passes["exact"] = run_exact(ctx)
        passes: list[Pass] = [p for name, p in all_passes().items() if name in options.passes]
        # before collecting: questions in a batch still running count as spent, and collected ones are
        # judged as paid below, so the balance charges each batched question once; each pass's run keeps
        # what is fresh for it, and what its new facts are owed
        changed = freshness(ctx, passes, at.repo)
        runs = [PassRun.open(ctx, p, changed[p.name]) for p in passes]
        if not options.dry_run and ctx.batches.unsettled():
            # finished batches first, whatever --pass says
            await ctx.batches.collect(ctx.judge, all_passes())
        for run in runs:
            p = run.p
            result.passes[p.name] = run.result
            # the describe step's own line, after the alias pass's
            if p.reads_lines:
                result.passes[DESCRIBE] = LinesResult(DESCRIBE, throttle="never budgeted")
                # not `nothing-qualified` alone: the keys hold no motif
                if note := no_motif_note(ctx.corpus):
                    run.result.notes.append(note)
        await _rounds(ctx, runs)
        if options.stop is not None and options.stop.is_set():
            # Stopped before its end (the daemon's SIGTERM): recorded as a plain review's interruption is, so
            # status, the metrics and the report read one record; the passes it never reached are not defunded.
            aborted(result, options, KeyboardInterrupt())
            for r in result.passes.values():
                ctx.charge(r)
            return result
        if ctx.batches.gathered:
            await submit_batch(ctx)
        for run in runs:
            finish_pass(run)
        if (judge := ctx.judge_if_asked) and isinstance(judge.backend, ScriptedBackend):
            if note := judge.backend.unmatched_note():
                log.warning("%s", note)
                result.notes.append(note)
    # an error, or a signal's cancellation: recorded as such, then re-raised
    except BaseException as e:
        # a 404 naming a model: read it again at once, and say "retired" (one cause) when the API says so
        gone = models.gone(e.model) if isinstance(e, JudgeRefused) and e.model else None
        if not options.dry_run:
            aborted(result, options, ConfigError(gone) if gone else e)
            for r in result.passes.values():
                ctx.charge(r)
        if gone:
            raise ConfigError(gone) from None
        if isinstance(e, Interrupted) and options.interrupt is not None and options.interrupt.is_set():
            # the daemon's SIGTERM, seen in a long step: recorded as its stop between judgments is
            return result
        raise
    finally:
        result.batches = ctx.batches.reports
        result.embedded, result.parsed = ctx.embedder.computed, index.parsed
        if ctx.applier is not None:  # not a dry run
            index.save()
            # a model found retired stops before its journal is committed: the lines wait for the next session
            paths = [ctx.journal.relpath(p) for p in ("exact", *JUDGED_PASSES, DESCRIBE)]
            sha = (
                None
                if models.problem
                else ctx.applier.commit_paths(
                    paths, f"journal: verdicts of session {result.session}\n\nKnomit-Session: {result.session}\n"
                )
            )
            if sha:
                result.commits.append(sha)
            store.end_session(
                result.session,
                {n: r.json() for n, r in result.passes.items()},
                result.cost_usd,
                result.commits,
                corpus=report.json(),
            )
    return result


async def _rounds(ctx: Context, runs: list[PassRun]) -> None:
    """Applied decisions change fingerprints, and so make new questions: ask them in this session, round after
    round, until a round applies nothing (each pass's allowance is per session)."""
    for round_no in range(1 if ctx.options.dry_run else MAX_ROUNDS):
        applied = 0
        for run in runs:
            r = run.result
            before = r.applied
            await run_round(run, first=round_no == 0)
            applied += r.applied - before
            # what a dry run's estimate covers: a later dry run says how far it falls short
            if round_no == 0:
                r.first_round = r.offered
        if not applied:
            return


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
