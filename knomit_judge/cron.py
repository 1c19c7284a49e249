"""Cron expressions: crontab's 5 fields read as crontab means them, as an APScheduler trigger.

Its own module so that config (which validates schedule.cron) and the daemon (which runs it) both
import it from below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import ConfigError

# apscheduler is imported only when a schedule is read (see cron_trigger)
if TYPE_CHECKING:
    from apscheduler.triggers.base import BaseTrigger

# crontab's numbering: 0 (and 7) is Sunday
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _day(token: str) -> int:
    """A day of week as crontab numbers it: a number 0-7 or a name's first three letters."""
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
            # "1/2": from Monday on, every other day
            hi = 6 if step else lo
        if lo > hi or (step and int(step) < 1):
            raise ValueError(f"bad day-of-week range {part!r}")
        days.update(d % 7 for d in range(lo, hi + 1, int(step or 1)))
    return ",".join(_DAYS[d] for d in sorted(days))


def cron_trigger(expr: str, key: str = "--cron") -> BaseTrigger:
    """A 5-field crontab expression (minute hour day month weekday), or 6 fields with seconds first.

    Crontab semantics are kept where APScheduler differs: weekday 0 is Sunday, and when both day of
    month and day of week are restricted a time matching either runs (cron's OR, not APScheduler's AND).
    Times are UTC.
    """
    # apscheduler is imported only when a schedule is read: every config load validates one
    from apscheduler.triggers.combining import OrTrigger
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    try:
        if len(fields) not in (5, 6):
            raise ValueError(f"{len(fields)} fields; expected 5 (minute hour day month weekday) or 6 (seconds first)")
        second, minute, hour, day, month, dow = fields if len(fields) == 6 else ["0", *fields]
        at = dict(second=second, minute=minute, hour=hour, month=month, timezone="UTC")
        weekdays = crontab_weekdays(dow)
        if not day.startswith("*") and not dow.startswith("*"):
            return OrTrigger([CronTrigger(day=day, **at), CronTrigger(day_of_week=weekdays, **at)])
        return CronTrigger(day=day, day_of_week=weekdays, **at)
    except ValueError as e:
        raise ConfigError(f"{key} {expr!r}: {e}") from None
