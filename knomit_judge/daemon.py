"""The scheduled daemon: review sessions on a cron trigger, one at a time, stopping cleanly on SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from .config import load_config
from .errors import ConfigError, KnomitError
from .review import ReviewOptions, review

log = logging.getLogger(__name__)


def cron_trigger(expr: str) -> CronTrigger:
    """A 5-field crontab expression, or a 6-field one whose first field is seconds."""
    fields = expr.split()
    try:
        if len(fields) == 6:
            second, minute, hour, day, month, dow = fields
            return CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=dow,
                               timezone="UTC")
        return CronTrigger.from_crontab(expr, timezone="UTC")
    except ValueError as e:
        raise ConfigError(f"--cron {expr!r}: {e}") from None


def run_daemon(root: Path | str, cron: str | None = None, judge: str = "anthropic",
               stop: threading.Event | None = None, on_session=None) -> int:
    """Run sessions until stop is set (SIGTERM/SIGINT set it); returns how many sessions ran."""
    root = Path(root).resolve()
    config = load_config(root)
    trigger = cron_trigger(cron or config.schedule.cron)
    stop = stop or threading.Event()
    done = []

    def session():
        if stop.is_set():
            return
        try:
            result = review(root, ReviewOptions(judge=judge, stop=stop))
            for line in result.lines():
                log.info("%s", line)
            done.append(result)
            if on_session:
                on_session(result)
        except KnomitError as e:  # a locked corpus or a refused key: say so, try again next time
            log.error("session failed: %s", e)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    scheduler = BackgroundScheduler(timezone="UTC")
    # one session at a time; missed runs collapse into one
    scheduler.add_job(session, trigger, max_instances=1, coalesce=True, misfire_grace_time=None, id="review")
    scheduler.start()
    log.info("daemon: reviewing %s on %r", root, cron or config.schedule.cron)
    try:
        stop.wait()
    finally:
        scheduler.shutdown(wait=True)  # the session in flight finishes its current judgment, then stops
        log.info("daemon: stopped after %d session(s)", len(done))
    return len(done)
