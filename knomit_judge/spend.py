"""Spend: what the sessions on a corpus cost, by UTC day and month, for the dollar caps and for the reports.

One computation serves the caps a session enforces (judge.max_cost_usd, budget.max_usd_per_day,
budget.max_usd_per_month), `status`, `review --json` and the metrics file, so they cannot disagree.

What a session cost is what it recorded when it ended: per pass, `charged_usd` (the cost, with each call
of unknown cost at its upper bound) or, for sessions recorded before that key, `cost_usd`. A session that
never ended (killed) or that the db no longer holds (deleted and rebuilt from the journal) counts what
its journalled verdicts cost: the spend of a day cannot be reset by deleting a row. A session's spend
counts on the UTC day it started.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .config import Config
from .passes import JUDGED_PASSES
from .passes.registry import steps
from .store import Store

# the longest window any report or cap reads; a calendar month fits in it, plus one day
WINDOW_DAYS = 30
ROUND = 6


@dataclass
class PassSpend:
    """What one pass of one session cost."""

    session: str
    started_at: str
    pass_name: str
    # counted against the caps: unknown costs at their bound
    usd: float
    # False: some call's cost is unknown (usd holds its bound), or only the verdicts' costs are known
    known: bool
    resolved: int
    # offered to the judge: what the spend bought
    questions: int


def utc(now: datetime | None = None) -> datetime:
    """`now` (or the present) in UTC."""
    return (now or datetime.now(UTC)).astimezone(UTC)


def day_start(now: datetime) -> datetime:
    """Midnight that began `now`'s day."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    """Midnight that began `now`'s month."""
    return day_start(now).replace(day=1)


def stamp(t: datetime) -> str:
    """A datetime as the store writes timestamps (verdicts.now_text), so strings compare in time order."""
    return t.isoformat(timespec="milliseconds")


def pass_spends(store: Store, since: datetime) -> list[PassSpend]:
    """Every pass of every session started at or after `since`, with what it cost."""
    out: list[PassSpend] = []
    ended = store.db.execute(
        "SELECT id, started_at, ended_at, passes FROM sessions "
        "WHERE ended_at IS NOT NULL AND ended_at >= ? ORDER BY started_at",
        [stamp(since)],
    ).fetchall()
    every = steps()
    for sid, started, _, passes in ended:
        if started < stamp(since):
            continue
        for name, counts in json.loads(passes).items():
            usd = counts.get("charged_usd", counts.get("cost_usd"))
            known = counts.get("cost_usd") is not None
            # the describe step's `offered` are spellings asked for lines, not questions
            lines = name in every and every[name].writes_lines
            out.append(
                PassSpend(
                    sid,
                    started,
                    name,
                    usd if usd is not None else 0.0,
                    known,
                    int(counts.get("resolved") or 0),
                    0 if lines else int(counts.get("offered") or 0),
                )
            )
    # A session with no ended record (killed, or lost with a deleted db) counts what its journalled
    # verdicts cost. Its verdicts lie outside every ended session's span, so only those gaps are read,
    # through the (pass, created_at) index: a backfill's 100k recorded verdicts are never scanned.
    gaps: list[tuple[str, str | None, bool]] = []
    lo, first = stamp(since), True
    for _, started, end, _ in ended:
        if started > lo:
            gaps.append((lo, started, first))
        lo, first = max(lo, end), False
    gaps.append((lo, None, first))
    # (session, pass) -> [first verdict at, usd, resolved, n]
    by_session: dict[tuple[str, str], list[Any]] = {}
    for name in JUDGED_PASSES:
        for lo, hi, inclusive in gaps:
            where = f"pass = ? AND created_at {'>=' if inclusive else '>'} ?" + (" AND created_at < ?" if hi else "")
            rows = store.db.execute(
                "SELECT session, min(created_at), total(cost_usd), total(is_yes AND NOT reverted), count(*) "
                f"FROM verdicts WHERE {where} GROUP BY session",
                [name, lo, *([hi] if hi else [])],
            )
            for sid, at, usd, resolved, n in rows:
                row = by_session.setdefault((sid or "", name), [at, 0.0, 0, 0])
                row[0], row[1], row[2], row[3] = min(row[0], at), row[1] + usd, row[2] + int(resolved), row[3] + n
    started = dict(store.db.execute("SELECT id, started_at FROM sessions WHERE ended_at IS NULL").fetchall())
    for (sid, name), (at, usd, resolved, n) in by_session.items():
        # known only per question: calls that bought no verdict are not in it, so never complete
        out.append(PassSpend(sid, started.get(sid, at), name, usd, False, resolved, n))
    return out


@dataclass
class Spend:
    """The spend figures of a corpus at one moment: for the caps, `status`, `review --json` and metrics."""

    now: datetime
    caps: dict[str, float]  # session_usd, day_usd, month_usd
    today_usd: float = 0.0
    last_7_days_usd: float = 0.0
    last_30_days_usd: float = 0.0
    month_to_date_usd: float = 0.0
    month_projection_usd: float = 0.0
    # False: some spend in the last 30 days is a bound or a lower bound, not a bill
    complete: bool = True
    # over the last 30 days; None: nothing asked
    usd_per_question: float | None = None
    # name -> today_usd, last_30_days_usd, resolved, usd_per_resolution (None: nothing resolved)
    per_pass: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        """The figures as --json and status --json give them."""
        return {
            "today_usd": self.today_usd,
            "last_7_days_usd": self.last_7_days_usd,
            "last_30_days_usd": self.last_30_days_usd,
            "month_to_date_usd": self.month_to_date_usd,
            "month_projection_usd": self.month_projection_usd,
            "complete": self.complete,
            "usd_per_question": self.usd_per_question,
            "caps": self.caps,
            "left_today_usd": round(max(0.0, self.caps["day_usd"] - self.today_usd), ROUND),
            "left_this_month_usd": round(max(0.0, self.caps["month_usd"] - self.month_to_date_usd), ROUND),
            "per_pass": self.per_pass,
        }

    def text_lines(self) -> list[str]:
        """The spend lines of `status`."""
        c = self.caps
        text = [
            f"spend: today ${self.today_usd:.4f} (cap ${c['day_usd']:g}), last 7 days ${self.last_7_days_usd:.4f}, "
            f"last 30 days ${self.last_30_days_usd:.4f}; this month ${self.month_to_date_usd:.4f} "
            f"(cap ${c['month_usd']:g}), projected ${self.month_projection_usd:.2f} at the last 7 days' rate"
            + ("" if self.complete else "; incomplete: calls of unknown cost are counted at their upper bound")
        ]
        per = []
        for name, p in self.per_pass.items():
            if p["usd_per_resolution"] is None:
                per.append(f"{name} ${p['last_30_days_usd']:.4f} for 0 resolved")
            else:
                per.append(f"{name} ${p['usd_per_resolution']:.4f} ({p['resolved']} resolved)")
        text.append("cost per resolution, last 30 days: " + ", ".join(per))
        return text


def caps_of(config: Config) -> dict[str, float]:
    """The configured caps: the session's, the day's and the month's."""
    return {
        "session_usd": config.judge.max_cost_usd,
        "day_usd": config.budget.max_usd_per_day,
        "month_usd": config.budget.max_usd_per_month,
    }


def summarise(store: Store, config: Config, now: datetime | None = None) -> Spend:
    """Spend today, over the last 7 and 30 days and this month, per pass, and the month's projection."""
    now = utc(now)
    today, month = day_start(now), month_start(now)
    since = min(now - timedelta(days=WINDOW_DAYS), month)
    rows = pass_spends(store, since)
    s = Spend(now, caps_of(config))
    week, thirty = stamp(now - timedelta(days=7)), stamp(now - timedelta(days=WINDOW_DAYS))
    per: dict[str, dict[str, float]] = {
        name: {"today_usd": 0.0, "last_30_days_usd": 0.0, "resolved": 0} for name in JUDGED_PASSES
    }
    first: str | None = None
    questions = 0
    for r in rows:
        if r.started_at >= stamp(today):
            s.today_usd += r.usd
            if r.pass_name in per:
                per[r.pass_name]["today_usd"] += r.usd
        first = r.started_at if first is None else min(first, r.started_at)
        if r.started_at >= week:
            s.last_7_days_usd += r.usd
        if r.started_at >= stamp(month):
            s.month_to_date_usd += r.usd
        if r.started_at >= thirty:
            s.last_30_days_usd += r.usd
            s.complete = s.complete and r.known
            questions += r.questions
            if r.pass_name in per:
                per[r.pass_name]["last_30_days_usd"] += r.usd
                per[r.pass_name]["resolved"] += r.resolved
    # The rate of the last 7 days, carried to the end of the calendar month (what the month cap is compared
    # with); a corpus first reviewed less than 7 days ago has its rate over the days since.
    days = 7.0
    if first is not None:
        days = min(7.0, max(1.0, (now - datetime.fromisoformat(first)).total_seconds() / 86400))
    next_month = (month + timedelta(days=32)).replace(day=1)
    s.month_projection_usd = s.month_to_date_usd + s.last_7_days_usd / days * (next_month - now).total_seconds() / 86400
    s.per_pass = {
        name: {
            "today_usd": round(p["today_usd"], ROUND),
            "last_30_days_usd": round(p["last_30_days_usd"], ROUND),
            "resolved": p["resolved"],
            "usd_per_resolution": round(p["last_30_days_usd"] / p["resolved"], ROUND) if p["resolved"] else None,
        }
        for name, p in per.items()
    }
    s.usd_per_question = round(s.last_30_days_usd / questions, 9) if questions else None
    for name in ("today_usd", "last_7_days_usd", "last_30_days_usd", "month_to_date_usd", "month_projection_usd"):
        setattr(s, name, round(getattr(s, name), ROUND))
    return s


@dataclass
class Caps:
    """The dollar caps of one session: its own, and what the day and the month have left when it starts."""

    session_usd: float
    day_usd: float
    month_usd: float
    # spent today by earlier sessions
    today_before: float = 0.0
    # spent this month by earlier sessions
    month_before: float = 0.0
    # model -> what one of its calls cost on this corpus over the last 30 days: the measured price before this
    # session's own calls of it (a model with none here counts at its nominal price: session.context.call_usd)
    per_call: dict[str, float] = field(default_factory=dict)

    @classmethod
    def for_session(cls, store: Store, config: Config, now: datetime | None = None) -> Caps:
        """The caps of a session starting `now`, with what the day and month spent before it."""
        s = summarise(store, config, now)
        since = stamp(utc(now) - timedelta(days=WINDOW_DAYS))
        per_call = {
            m: usd
            for m, usd in store.db.execute(
                "SELECT model, sum(cost_usd) / sum(calls) FROM verdicts WHERE cost_usd IS NOT NULL AND calls > 0 "
                "AND judge = 'anthropic' AND created_at >= ? GROUP BY model",
                [since],
            )
        }
        return cls(
            config.judge.max_cost_usd,
            config.budget.max_usd_per_day,
            config.budget.max_usd_per_month,
            s.today_usd,
            s.month_to_date_usd,
            per_call,
        )

    def reached(self, spent: float, next_usd: float = 0.0) -> str | None:
        """Which cap the session's spend would exceed by asking once more, if any (checked before each question).

        `next_usd` is what the reads with a model now and the next one may cost (session.context.Context.capped,
        each read at most its calls at its model's price): a cap stops the session before the read that would
        cross it, not after.
        """

        def over(before: float, cap: float) -> bool:
            return before + spent >= cap or before + spent + next_usd > cap

        if over(0.0, self.session_usd):
            return f"session cost cap ${self.session_usd:g} reached"
        if over(self.today_before, self.day_usd):
            return f"daily cost cap ${self.day_usd:g} reached (budget.max_usd_per_day; ${self.today_before + spent:.4f} today)"
        if over(self.month_before, self.month_usd):
            return (
                f"monthly cost cap ${self.month_usd:g} reached "
                f"(budget.max_usd_per_month; ${self.month_before + spent:.4f} this month)"
            )
        return None
