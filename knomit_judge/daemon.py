"""The scheduled daemon: review sessions on a cron trigger, one at a time, stopping cleanly on SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger

from .config import load_config
from .errors import ConfigError, KnomitError
from .gitops import open_repo

log = logging.getLogger(__name__)

_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab's numbering: 0 (and 7) is Sunday


def _day(token: str) -> int:
    token = token.strip().lower()
    if token.isdigit() and int(token) <= 7:
        return int(token)
    if token[:3] in _DAYS:
        return _DAYS.index(token[:3])
    raise ValueError(f"bad day of week {token!r}")


def crontab_weekdays(field: str) -> str:
    """A crontab day-of-week field as APScheduler day names.

    APScheduler 3 counts 0 as Monday where crontab counts 0 as Sunday, so "0 3 * * 0" would run on
    Mondays if passed through; numbers, ranges, lists and steps are expanded to names instead.
    """
    if field == "*":
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            lo, hi = 0, 6
        elif "-" in span:
            lo, hi = (_day(t) for t in span.split("-", 1))
        else:
            lo = _day(span)
            hi = 6 if step else lo  # "1/2": from Monday on, every other day
        if lo > hi or (step and int(step) < 1):
            raise ValueError(f"bad day-of-week range {part!r}")
        days.update(d % 7 for d in range(lo, hi + 1, int(step or 1)))
    return ",".join(_DAYS[d] for d in sorted(days))


def cron_trigger(expr: str, key: str = "--cron"):
    """A 5-field crontab expression (minute hour day month weekday), or 6 fields with seconds first.

    Crontab semantics are kept where APScheduler differs: weekday 0 is Sunday, and when both day of
    month and day of week are restricted a time matching either runs (cron's OR, not APScheduler's AND).
    Times are UTC.
    """
    fields = expr.split()
    try:
        if len(fields) not in (5, 6):
            raise ValueError(f"{len(fields)} fields; expected 5 (minute hour day month weekday) "
                             "or 6 (seconds first)")
        second, minute, hour, day, month, dow = fields if len(fields) == 6 else ["0", *fields]
        at = dict(second=second, minute=minute, hour=hour, month=month, timezone="UTC")
        weekdays = crontab_weekdays(dow)
        if not day.startswith("*") and not dow.startswith("*"):
            return OrTrigger([CronTrigger(day=day, **at), CronTrigger(day_of_week=weekdays, **at)])
        return CronTrigger(day=day, day_of_week=weekdays, **at)
    except ValueError as e:
        raise ConfigError(f"{key} {expr!r}: {e}") from None


def run_daemon(root: Path | str, cron: str | None = None, judge: str = "anthropic",
               stop: threading.Event | None = None, on_session=None) -> int:
    """Run review sessions on a cron schedule until stop is set (SIGTERM/SIGINT set it); returns how many ran."""
    root = Path(root).resolve()
    open_repo(root)  # a wrong CORPUS or schedule fails now, not at the first scheduled run
    config = load_config(root)
    expr = cron or config.schedule.cron
    trigger = cron_trigger(expr, "--cron" if cron else "schedule.cron")
    if judge == "anthropic":
        config.require_price(config.judge.model)  # every session would exit 2: say so now, not once a day
    from .review import ReviewOptions, review  # imported here: config imports this module for cron_trigger

    stop = stop or threading.Event()
    done = []

    def session():
        if stop.is_set():
            return
        try:
            # The same library call as `knomit-judge review`; it re-reads the config, so edits apply next run.
            result = review(root, ReviewOptions(judge=judge, stop=stop))
        except KnomitError as e:  # a locked corpus or a refused key: say so, try again next time
            log.error("session failed: %s", e)
            return
        except Exception as e:  # a bug must not end the daemon silently; every session after it still runs
            log.exception("session crashed: %s: %s", type(e).__name__, e)
            return
        for line in result.lines():
            log.info("%s", line)
        done.append(result)
        if on_session:
            on_session(result)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum, frame):
            stop.set()  # nothing new is offered; the judgment in flight finishes and is stored
            signal.signal(signum, signal.SIG_DFL)  # a second signal ends it at once (the kernel drops the lock)

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
        scheduler.pause()  # no new run is submitted while the executor winds down
        scheduler.shutdown(wait=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("daemon: stopped after %d session(s)", len(done))
    return len(done)
