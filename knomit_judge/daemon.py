"""The scheduled daemon: review sessions on a cron trigger, one at a time, stopping cleanly on SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler

from .config import load_config
from .cron import cron_trigger
from .errors import KnomitError
from .gitops import open_repo
from .judge import JudgeSpec
from .models import require_usable
from .session.context import ReviewOptions, SessionResult
from .session.review import review
from .store import Store
from .transport import require_key

log = logging.getLogger(__name__)


def run_daemon(
    root: Path | str,
    cron: str | None = None,
    judge: str = "anthropic",
    stop: threading.Event | None = None,
    on_session: Callable[[SessionResult], object] | None = None,
) -> int:
    """Run review sessions on a cron schedule until stop is set (SIGTERM/SIGINT set it); returns how many ran."""
    root = Path(root).resolve()
    # a wrong CORPUS or schedule fails now, not at the first scheduled run
    open_repo(root)
    config = load_config(root)
    expr = cron or config.schedule.cron
    trigger = cron_trigger(expr, "--cron" if cron else "schedule.cron")
    # a wrong --judge fails now too, not at every scheduled run
    spec = JudgeSpec.parse(judge)
    if spec.anthropic:
        require_key()
        # every session would exit 2: say so now, not once a day (a retirement before a missing price)
        with Store.for_corpus(root) as store:
            require_usable(config, store)

    stop = stop or threading.Event()
    done: list[SessionResult] = []

    def session() -> None:
        if stop.is_set():
            return
        try:
            # The same library call as `knomit-judge review`; it re-reads the config, so edits apply next run.
            # stop: nothing new is offered, the judgment in flight finishes; interrupt: a long step (embedding a cold
            # corpus) ends at once, its vectors kept
            result = review(root, ReviewOptions(judge=spec, stop=stop, interrupt=stop))
        # a locked corpus or a refused key: say so, try again next time
        except KnomitError as e:
            log.error("session failed: %s", e)
            return
        # a bug must not end the daemon silently; every session after it still runs
        except Exception as e:
            log.exception("session crashed: %s: %s", type(e).__name__, e)
            return
        for line in result.text_lines():
            log.info("%s", line)
        done.append(result)
        if on_session:
            on_session(result)

    previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}
    if threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: FrameType | None) -> None:
            # nothing new is offered; the judgment in flight finishes and is stored
            stop.set()
            # a second signal ends it at once (the kernel drops the lock)
            signal.signal(signum, signal.SIG_DFL)

        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, on_signal)
    scheduler = BackgroundScheduler(timezone="UTC")
    # One session at a time (a run that comes due while one is in flight is skipped); missed runs collapse
    # into one, however late.
    job = scheduler.add_job(session, trigger, max_instances=1, coalesce=True, misfire_grace_time=None, id="review")
    scheduler.start()
    log.info("daemon: reviewing %s on %r (UTC); next session at %s", root, expr, job.next_run_time)
    try:
        stop.wait()
        log.info("daemon: stopping after the session in flight, if any")
    finally:
        # no new run is submitted while the executor winds down
        scheduler.pause()
        scheduler.shutdown(wait=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("daemon: stopped after %d session(s)", len(done))
    return len(done)
