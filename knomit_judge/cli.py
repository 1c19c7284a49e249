"""The command line: a thin layer over the library. Results to stdout, logs to stderr."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .encoders import MODEL_NAME, model_sources
from .errors import KnomitError
from .jsonl import dumps
from .judge import JudgeSpec
from .migrations import migration_set
from .passes import JUDGED_PASSES
from .passes.base import DESCRIBE
from .prompts import load_prompt, prompt_names

if TYPE_CHECKING:
    from . import SessionResult

F = TypeVar("F", bound=Callable[..., Any])

corpus_arg = click.argument("corpus", type=click.Path(file_okay=False, path_type=Path), default=".", required=False)


def _remember_json(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    # for Group.invoke: with --json an error is a JSON object on stdout too
    ctx.meta["as_json"] = value
    return value


# Eager: read before any other option, so an error another option's callback raises (--judge) is JSON too.
json_opt = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout.", callback=_remember_json, is_eager=True
)


def _judge_spec(ctx: click.Context, param: click.Parameter, value: str) -> JudgeSpec:
    """--judge parsed once; a bad value is a ConfigError, said and exited on (2) by Group.invoke."""
    return JudgeSpec.parse(value)


def judge_opt(text: str) -> Callable[[F], F]:
    """--judge: anthropic, or scripted:FILE; the command gets it as a JudgeSpec."""
    return click.option("--judge", default="anthropic", show_default=True, callback=_judge_spec, help=text)


class Group(click.Group):
    """Turns expected failures into a message and an exit code; no traceback reaches the user."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KnomitError as e:
            click.echo(f"knomit-judge: {e}", err=True)
            _json_error(ctx, str(e), e.exit_code)
            sys.exit(e.exit_code)
        # Ctrl-C, or SIGTERM (sigterm_as_interrupt); the command said what it keeps
        except KeyboardInterrupt:
            said = "; ".join(["interrupted", *([ctx.meta[KEPT]] if KEPT in ctx.meta else [])])
            click.echo(f"knomit-judge: {said}", err=True)
            _json_error(ctx, said, 130)
            sys.exit(130)
        except BrokenPipeError:
            # The reader stopped reading (`verdicts | head`): exit as a process ended by SIGPIPE does (141),
            # not 1, which says a pass is broken; and make no noise flushing the closed pipe at exit.
            sys.stdout = open(os.devnull, "w")
            sys.exit(128 + signal.SIGPIPE)
        # a command's own usage checks, after --json was read
        except click.ClickException as e:
            _json_error(ctx, e.format_message(), e.exit_code)
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        # a bug: the traceback follows on stderr, and a script still reads JSON
        except Exception as e:
            _json_error(ctx, f"{type(e).__name__}: {e}", 1)
            raise


# -q, in ctx.meta for the commands' output
QUIET = "knomit_judge.quiet"
# What an interrupted command keeps, said on Ctrl-C or SIGTERM; a command that keeps something sets it in ctx.meta.
KEPT = "knomit_judge.kept"
SESSION_KEEPS = "the verdicts parsed and the vectors embedded so far are kept"
DRY_RUN_KEEPS = (
    "a dry run buys and commits nothing: only the derived caches computed so far (vectors, neighbour "
    "and candidate lists) are kept in the db"
)


def _json_error(ctx: click.Context, message: str, exit_code: int) -> None:
    """With --json, stdout holds one JSON object on every exit: on an error, {"error": ..., "exit_code": N}."""
    if ctx.meta.get("as_json"):
        click.echo(dumps({"error": message, "exit_code": exit_code}, ensure_ascii=False))


def version_lines() -> list[str]:
    """What a bug report needs: the package's version, every shipped prompt's version, the embedding model, and
    the judge model and first reader a review here would use."""
    from importlib.metadata import version

    return [
        f"knomit-judge {version('knomit-judge')}",
        "prompts " + " ".join(load_prompt(name).id for name in prompt_names()),
        f"embedding model {MODEL_NAME} ({model_sources()})",
        judge_line(),
    ]


def judge_line() -> str:
    """The judge model and first reader as a review in the current directory reads them (its knomit-judge.toml
    and the environment); the shipped defaults when that file does not load, so --version never fails on it."""
    from .config import Config, load_config

    try:
        judge = load_config(Path.cwd()).judge
    except KnomitError:
        judge = Config().judge
    return f"judge model {judge.model}, first reader {judge.first_reader or 'off'}"


def check_install() -> None:
    """The files the package ships (migrations, each pass's prompt) are there: else exit 2 before any work."""
    migration_set()
    for name in (*JUDGED_PASSES, DESCRIBE):
        load_prompt(name)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    try:
        # a bug report from a broken install should say so first
        check_install()
        lines = version_lines()
    except KnomitError as e:
        click.echo(f"knomit-judge: {e}", err=True)
        ctx.exit(2)
    click.echo("\n".join(lines))
    ctx.exit()


@click.group(cls=Group)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version, the prompts' versions and the embedding model, and exit.",
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Print no progress or confirmation line and log only errors; results (status lines, the corpus "
    "line with what it skipped, --json) still print.",
)
@click.pass_context
def cli(ctx: click.Context, quiet: bool) -> None:
    """knomit-judge keeps a git-backed knowledge corpus tidy: embeddings shortlist, an LLM judge decides,
    git records every decision.

    Example: knomit-judge review ~/corpus --judge scripted:replies.jsonl
    """
    check_install()
    ctx.meta[QUIET] = quiet
    logger = logging.getLogger("knomit_judge")
    logger.handlers = [h for h in logger.handlers if not isinstance(h, _StderrHandler)] + [_StderrHandler()]
    # issue 54: -q says nothing but errors
    logger.setLevel(logging.ERROR if quiet else logging.INFO)


class _StderrHandler(logging.Handler):
    """Logs to whatever stderr is at the moment of the call (so CliRunner and cron both see them)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"knomit-judge: {record.getMessage()}", err=True)


def emit(data: dict[str, Any], as_json: bool, lines: list[str], confirms: bool = False) -> None:
    """The command's JSON object, or its lines; lines that only confirm what was done are not printed under -q."""
    if as_json:
        click.echo(dumps(data, ensure_ascii=False))
    elif not (confirms and click.get_current_context().meta.get(QUIET)):
        for line in lines:
            click.echo(line)


@cli.command()
@corpus_arg
@click.option("--create", is_flag=True, help="Make the directory if it does not exist.")
def init(corpus: Path, create: bool) -> None:
    """Write knomit-judge.toml, the .gitignore entry and the db, and commit them.

    A directory that is not yet a git repository is initialised, and the fact files found in it are
    committed too. Refuses a path inside another repository, and a missing one unless --create.

    Example: knomit-judge init ~/corpus
    """
    from .init import init_corpus

    emit({}, False, init_corpus(corpus, create=create), confirms=True)


@cli.command()
@corpus_arg
@click.option(
    "--dry-run",
    is_flag=True,
    help="No judge call, nothing bought or committed: list what would be offered (derived caches are kept).",
)
@click.option("--evidence", is_flag=True, help="With --dry-run: print each offer's evidence under it.")
@click.option("--pass", "passes", multiple=True, type=click.Choice(JUDGED_PASSES), help="Run only these passes.")
@json_opt
@judge_opt("anthropic, or scripted:FILE (recorded replies).")
@click.option(
    "--batch",
    is_flag=True,
    help="Submit the offered questions as one Message Batch (half price); the next session collects it.",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a Prometheus textfile-collector file here after the session (wins over [metrics] textfile).",
)
def review(
    corpus: Path,
    dry_run: bool,
    evidence: bool,
    passes: tuple[str, ...],
    as_json: bool,
    judge: JudgeSpec,
    batch: bool,
    metrics_file: Path | None,
) -> None:
    """Run one review session: exact duplicates, then the alias, prune and discovery judges.

    Exit 0 done, 1 a pass (or the corpus, or the sync with [git] remote) is broken or the metrics file was not
    written, 2 usage or configuration error, 3 corpus locked.

    Example: knomit-judge review ~/corpus --pass alias --json --metrics-file /var/lib/node_exporter/knomit.prom
    """
    from .session.context import ReviewOptions
    from .session.review import review as run

    click.get_current_context().meta[KEPT] = DRY_RUN_KEEPS if dry_run else SESSION_KEEPS
    with sigterm_as_interrupt():
        result = run(
            corpus,
            ReviewOptions(
                dry_run=dry_run,
                passes=tuple(passes) or JUDGED_PASSES,
                judge=judge,
                batch=batch or None,  # None: judge.mode decides
                metrics_file=metrics_file,
            ),
        )
    # a dry run's answer first, then what it rests on
    lines = [
        *([result.summary()] if result.dry_run else []),
        *(f"note: {n}" for n in result.notes),
        *result.text_lines(),
        *(_batch_line(b) for b in result.batches),
        *(f"commit {sha}" for sha in result.commits),
        *_plan_lines(result, evidence),
    ]
    emit(result.json(), as_json, lines)
    sys.exit(1 if result.broken or result.metrics_error else 0)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (kill, systemd, a cron timeout) cancels a session as Ctrl-C does: nothing half-written.

    Raising SIGINT hands it to asyncio.run's own handler, which cancels the session task at its next
    await, or at the next text in an embedding (interrupts.py); the session's cleanup then commits the
    verdicts parsed so far, and the vectors embedded so far are in the db.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    # A shell starts background jobs (`review &`, nohup, scripts) with SIGINT ignored; asyncio.run then
    # installs no handler, the raised SIGINT is lost, and the session runs on to exit 0. So SIGINT gets
    # Python's default handler for the session, which asyncio.run replaces with its cancelling one.
    sigint_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if sigint_ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if sigint_ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _batch_line(b: dict[str, Any]) -> str:
    if b["status"] == "submitted":
        return f"batch {b['id']}: {b['requests']} requests submitted"
    if b["status"] == "waiting":
        return f"waiting on batch {b['id']}, {b['requests']} requests"
    if b["status"] == "lost":
        return f"batch {b['id']}: lost by the API; its {b['requests']} requests are asked again"
    if b["status"] == "not submitted":
        return (
            f"batch submission {b['id']}: cut short before the API made it; its {b['requests']} requests are "
            "asked again"
        )
    return f"batch {b['id']}: {b['requests']} requests collected"


def _plan_lines(result: SessionResult, evidence: bool) -> list[str]:
    """A dry run's plan, one line an offer; with --evidence each offer's evidence under it (--json always has it)."""
    out = []
    for name, items in result.plan.items():
        for item in items:
            # exact duplicates, mechanical: nothing is offered to a judge
            if name not in JUDGED_PASSES:
                out.append(
                    f"would retract exact {', '.join(item['evidence']['retract'])}, keeping "
                    f"{item['evidence']['survivor']}"
                )
                continue
            out.append(
                f"would offer {name} {dumps(item['subject'], ensure_ascii=False)} (similarity {item['score']:.3f})"
            )
            if evidence:
                out.append("  evidence: " + dumps(item["evidence"], ensure_ascii=False))
    return out


@cli.command()
@corpus_arg
@json_opt
@click.option("--sessions", "limit", default=10, show_default=True, help="How many past sessions to list.")
def status(corpus: Path, as_json: bool, limit: int) -> None:
    """Show the last session's lines, each pass's throttle state and why, and recent sessions. No judge call.

    Example: knomit-judge status ~/corpus --json
    """
    from .history import status as get

    data = get(corpus, limit)
    emit(data, as_json, data["text"])


@cli.command()
@corpus_arg
@click.option("--pass", "pass_name", type=click.Choice(("exact", *JUDGED_PASSES)), help="Only this pass.")
@json_opt
def verdicts(corpus: Path, pass_name: str | None, as_json: bool) -> None:
    """List stored verdicts, yes and no, with rationale and applying commit.

    Example: knomit-judge verdicts ~/corpus --pass alias
    """
    from .history import list_verdicts

    rows = list_verdicts(corpus, pass_name)
    lines = [
        f"{r['id']} {r['pass']} {r['answer']:<9} {dumps(r['subject'], ensure_ascii=False)}"
        f"{' redundant ' + r['payload']['redundant'] if (r['payload'] or {}).get('redundant') else ''}"
        f"{' commit ' + r['commit_sha'][:10] if r['commit_sha'] else ''}{' REVERTED' if r['reverted'] else ''}"
        f"{' - ' + r['rationale'] if r['rationale'] else ''}"
        for r in rows
    ]
    emit({"verdicts": rows}, as_json, lines or ["no verdicts"])


@cli.command()
@corpus_arg
@json_opt
def links(corpus: Path, as_json: bool) -> None:
    """List the links that lead to no note or file, or to a retracted note, in every note of the corpus.

    Read-only. A link is resolved as Obsidian resolves it (see docs/corpus.md, "Links"); links inside code
    are not links. Exit 0 when none is broken, 1 when some are.

    Example: knomit-judge links ~/vault --json
    """
    from .linkcheck import check_links, links_lines

    report = check_links(corpus)
    emit(report, as_json, links_lines(report))
    sys.exit(1 if report["broken"] else 0)


@cli.command()
@corpus_arg
@click.option(
    "--check",
    is_flag=True,
    help="Change nothing: compare the db's derived state with a fresh rebuild and name what differs.",
)
@json_opt
def rebuild(corpus: Path, check: bool, as_json: bool) -> None:
    """Rebuild the db: verdicts from the journal, applied state from git, derived tables from the corpus.

    With --check nothing is written: every derived table (parsed files, embeddings, neighbour lists,
    candidate lists, and the verdicts' applied state) is compared with a fresh computation in memory.
    Exit 0 when they are equal, 1 when anything differs (each difference is printed), 3 when a session holds the corpus.

    Example: rm ~/corpus/.knomit/judge.db && knomit-judge rebuild ~/corpus
    """
    from .rebuild import check as compare
    from .rebuild import rebuild as run
    from .rebuild import rebuilt_line

    if check:
        result = compare(corpus)
        emit(result.json(), as_json, result.text_lines())
        sys.exit(0 if result.equal else 1)
    counts = run(corpus)
    # what it counted: a result, -q or not
    emit(counts, as_json, [rebuilt_line(counts)])


@cli.command()
@click.argument("verdict")
@corpus_arg
@click.option("--reason", default="reverted by hand", show_default=True, help="Recorded with the revert.")
def revert(verdict: str, corpus: Path, reason: str) -> None:
    """Undo an applied decision with a new commit; the question then counts as answered "no".

    Example: knomit-judge revert v1a2b3c4d5e6 ~/corpus --reason "not the same mechanism"
    """
    from .revert import revert as run

    sha = run(verdict, corpus, reason)
    emit({}, False, [f"reverted {verdict}: commit {sha}"], confirms=True)


@cli.command()
@corpus_arg
@click.option("--cron", default=None, help='Cron expression; default [schedule] cron, e.g. "0 3 * * *".')
@judge_opt("anthropic, or scripted:FILE.")
def daemon(corpus: Path, cron: str | None, judge: JudgeSpec) -> None:
    """Run review sessions on a cron schedule, one at a time; SIGTERM stops after the current judgment.

    Example: knomit-judge daemon ~/corpus --cron "0 3 * * *"
    """
    from .daemon import run_daemon

    run_daemon(corpus, cron, str(judge))


@cli.command()
@click.argument("labels", required=False, type=click.Path(path_type=Path))
@corpus_arg
@json_opt
@judge_opt("anthropic, or scripted:FILE (recorded replies).")
@click.option(
    "--journal",
    "from_journal",
    is_flag=True,
    help="Score the stored verdicts against the labels given with `label` (then the one argument is CORPUS).",
)
def calibrate(labels: Path | None, corpus: Path, as_json: bool, judge: JudgeSpec, from_journal: bool) -> None:
    """Score the judge against human labels (JSONL): precision, recall, kappa, position flips, cost.

    Applies nothing and stores no verdict; answers go through the reply cache, so a rerun is free.
    With --journal no labels file is needed: the labels journalled in the corpus score the verdicts
    they were given on, with no judge call.

    Example: knomit-judge calibrate labels.jsonl ~/corpus --json; knomit-judge calibrate --journal ~/corpus
    """
    from .calibrate import calibrate as run
    from .calibrate import calibrate_journal, calibration_lines

    if from_journal:
        if labels and corpus != Path("."):
            raise click.UsageError("with --journal give only CORPUS")
        result = calibrate_journal(labels or corpus)
    elif labels is None:
        raise click.UsageError("missing LABELS (a JSONL file), or use --journal")
    else:
        result = run(labels, corpus, str(judge))
    emit(result, as_json, calibration_lines(result))


@cli.command()
@corpus_arg
@json_opt
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="Items listed, best first.")
def inbox(corpus: Path, as_json: bool, limit: int) -> None:
    """What a person should look at now: undecided questions, held yeses, old retracts that kept the shorter
    fact, proposals, a sample of decisions.

    Read-only: no lock, no judge call, nothing written. Each item names its verdict and the `label` command.

    Example: knomit-judge inbox ~/corpus --limit 5
    """
    from .inbox import inbox as get
    from .inbox import inbox_lines

    result = get(corpus)
    data = {**result, "items": [i.json() for i in result["items"][:limit]], "total": len(result["items"])}
    emit(data, as_json, inbox_lines(result, limit))


@cli.command()
@click.argument("args", nargs=-1, metavar="VERDICT yes|no [CORPUS]")
@click.option("--note", default="", help="Why; kept with the label.")
@click.option(
    "--file",
    "label_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='JSONL of {"verdict": ID, "label": "yes"|"no", "note": ...}; then the one argument is CORPUS.',
)
@json_opt
def label(args: tuple[str, ...], note: str, label_file: Path | None, as_json: bool) -> None:
    """Record a person's label on a verdict in .knomit/labels.jsonl, committed alone with a Knomit-Label trailer.

    yes: the question's answer is yes (one mechanism, one fact, the fact follows); no: it is not.
    A no on an applied decision prints the `revert` command that would undo it; it reverts nothing.

    Example: knomit-judge label v1a2b3c4d5e6 no ~/corpus --note "different mechanisms"
    """
    from .labels import label as run
    from .labels import read_label_file

    if label_file:
        if len(args) > 1 or note:
            raise click.UsageError("with --file give only CORPUS (notes go in the file)")
        corpus, entries = Path(args[0] if args else "."), read_label_file(label_file)
    elif len(args) in (2, 3) and args[1] in ("yes", "no"):
        corpus, entries = Path(args[2] if len(args) == 3 else "."), [(args[0], args[1], note)]
    else:
        raise click.UsageError("expected VERDICT yes|no [CORPUS], or --file FILE [CORPUS]")
    result = run(corpus, entries, source=str(label_file) if label_file else None)
    lines = [f"labelled {r['verdict']} {r['label']} ({r['pass']} {r['answer']})" for r in result["labels"]]
    lines.append(f"commit {result['commit']}")
    lines += [f"applied decision labelled no; to undo it: {cmd}" for cmd in result["revert"]]
    emit(result, as_json, lines, confirms=True)


VERDICT_ID = re.compile(r"^v[0-9a-f]{12}$")


@cli.command()
@click.argument("args", nargs=-1, metavar="[VERDICT...] [CORPUS]")
@click.option("--all", "every", is_flag=True, help="Every proposal waiting, in the order they were proposed.")
@json_opt
def approve(args: tuple[str, ...], every: bool, as_json: bool) -> None:
    """Land proposals ([apply] mode = "propose") on the reviewed branch, checked out here, as the same decision
    commits; record a `yes` label for each; push with [git] remote.

    What writers pushed is merged first, as a session merges it. A proposal whose files changed since it was
    proposed is left (named), and the next session proposes it again or asks afresh. Exit 1 when the reviewed
    branch could not be pushed (no proposing session pushes it: run approve again).

    Example: knomit-judge approve v1a2b3c4d5e6 ~/corpus; knomit-judge approve --all ~/corpus
    """
    from .approve import approve as run

    ids = [a for a in args if VERDICT_ID.match(a)]
    rest = [a for a in args if not VERDICT_ID.match(a)]
    if len(rest) > 1 or (rest and args[-1] != rest[0]):
        raise click.UsageError("expected [VERDICT...] [CORPUS]: verdict ids (v and 12 hex digits), then the corpus")
    if bool(ids) == every:
        raise click.UsageError("name the proposals to approve (VERDICT...) or give --all, not both")
    result = run(Path(rest[0] if rest else "."), ids, every)
    lines = [f"approved {vid}: commit {sha}" for vid, sha in result["approved"].items()]
    lines += [f"left {vid}: {why}" for vid, why in result["left"].items()]
    lines += [
        *([f"labels commit {result['label_commit']}"] if result["label_commit"] else []),
        *([_sync_line(result["sync"])] if result.get("sync") else []),
        _proposals_line(result["proposals"]),
    ]
    unpushed = result.get("sync") and result["sync"]["state"] != "synced"
    # no proposing session pushes the reviewed branch: say so, and exit 1
    if unpushed:
        lines.append(
            "the reviewed branch was not pushed: run `knomit-judge approve --all` (or `git push`) again "
            "once the remote takes it"
        )
    emit(result, as_json, lines if result["approved"] or result["left"] else ["nothing approved", *lines])
    sys.exit(1 if unpushed else 0)


@cli.command()
@click.argument("verdict")
@corpus_arg
@click.option("--note", default="", help="Why; kept with the `no` label.")
@json_opt
def reject(verdict: str, corpus: Path, note: str, as_json: bool) -> None:
    """Drop a proposal ([apply] mode = "propose") from the proposals branch and record a `no` label: it is never
    proposed or applied again while its facts stand. The reviewed branch does not move.

    Example: knomit-judge reject v1a2b3c4d5e6 ~/corpus --note "different mechanisms"
    """
    from .approve import reject as run

    result = run(corpus, verdict, note)
    lines = [
        f"rejected {verdict}: commit {result['commit']}",
        *(f"dropped {vid}: {why}" for vid, why in result["dropped"].items() if vid != verdict),
        *([_sync_line(result["sync"])] if result.get("sync") else []),
        _proposals_line(result["proposals"]),
    ]
    emit(result, as_json, lines, confirms=True)


def _sync_line(sync: dict[str, Any]) -> str:
    return (
        f"sync {sync['remote']}/{sync['branch']}: {sync['state']} - pushed {sync['pushed']}, unpushed "
        f"{sync['unpushed']}" + (f"; error: {sync['error']}" if sync.get("error") else "")
    )


def _proposals_line(report: dict[str, Any]) -> str:
    return f"proposals {report['branch']} on {report['base']}: {len(report['waiting'])} waiting"


@cli.command()
@corpus_arg
@click.option(
    "--html", "html_file", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Write the page here."
)
def report(corpus: Path, html_file: Path) -> None:
    """Write one self-contained HTML page: sessions, throttle history, applied decisions, calibration.

    Example: knomit-judge report ~/corpus --html report.html
    """
    from .report import write_report

    emit({}, False, [f"wrote {write_report(corpus, html_file)}"], confirms=True)


def main() -> None:
    cli(prog_name="knomit-judge")
