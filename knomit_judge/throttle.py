"""The outcome-funded throttle: judge attention is funded by verdicts that resolved something.

State is derived from the stored verdicts (how many, and whether one of the recent ones
resolved something) and, for the probe, from the throttle history of earlier
sessions; nothing here can be reset by deleting a counter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import BudgetConfig
from .store import of_judge


@dataclass
class ThrottleState:
    state: str  # optimistic | funded | unproven | defunded | unthrottled
    allowance: int | None  # offers this session; None = unlimited (the cost cap still holds)
    probe: bool  # this session's one offer is the defunded pass's probe
    why: str
    next_probe_in: int | None = None  # sessions after this one until the probe, while defunded and not due

    @property
    def probe_in(self) -> int | None:
        """Sessions until the probe, counting the session this state is for as 1 (None: not defunded)."""
        if self.state != "defunded":
            return None
        return 1 if self.probe else self.next_probe_in + 1


def defunded_run(rows: list[dict]) -> int:
    """Defunded sessions since the last probe that was spent (rows newest first)."""
    count = 0
    for row in rows:
        if row["state"] != "defunded" or row["probe_spent"]:
            break
        count += 1
    return count


def recent_outcomes(store, pass_name: str, window: int, judge: str | None = None) -> list[bool]:
    """Resolved-or-not of the pass's last `window` verdicts, newest first, widened to whole sessions.

    A session asks its candidates best-ranked first, so its yeses come early and its last verdicts are its
    least likely ones; a window that cut through a session would defund a pass in the very session that
    resolved things. A reverted yes resolved nothing. Given a judge kind, only that kind's verdicts count.
    """
    out: list[bool] = []
    last, of_last, rest = None, [], False
    where, args = of_judge("pass = ?", [pass_name], judge)
    rows = store.db.execute(f"SELECT session, is_yes AND NOT reverted FROM verdicts WHERE {where} "
                            "ORDER BY created_at DESC, rowid DESC", args)
    try:
        for session, resolved in rows:  # read lazily: stops at the window's edge
            if len(out) >= window:
                rest = session is not None and session == last
                break
            if session != last:
                of_last = []
            of_last.append(bool(resolved))
            out.append(bool(resolved))
            last = session
    finally:
        rows.close()  # an unfinished statement would hold the db's read lock
    if rest:  # the rest of the last session in one count: a backfill session can hold 100k verdicts
        n, yes = store.db.execute(f"SELECT count(*), total(is_yes AND NOT reverted) FROM verdicts "
                                  f"WHERE {where} AND session = ?", [*args, last]).fetchone()
        yes = int(yes) - sum(of_last)
        out += [True] * yes + [False] * (n - len(of_last) - yes)
    return out


def assess(store, pass_name: str, cfg: BudgetConfig, judge: str | None = None) -> ThrottleState:
    """The throttle state of the pass's next session, from its verdicts and its earlier sessions' records.

    Given a judge kind, only that kind's verdicts and sessions count: a scripted judge's defaults must not
    defund the real judge (nor the real judge's spending fund a script).
    """
    if not cfg.enabled:
        return ThrottleState("unthrottled", None, False, "budget.enabled = false")
    n = store.count_verdicts(pass_name, judge)
    if n == 0:
        return ThrottleState("optimistic", cfg.optimistic_cap, False,
                             f"no verdicts yet: at most {cfg.optimistic_cap} offers a session")
    recent = recent_outcomes(store, pass_name, cfg.window, judge)
    if any(recent):
        return ThrottleState("funded", None, False,
                             f"{sum(recent)} of the last {len(recent)} verdicts resolved something")
    if n < cfg.patience:
        return ThrottleState("unproven", cfg.unproven_allowance, False,
                             f"{n} verdicts, none resolved, fewer than patience {cfg.patience}: "
                             f"{cfg.unproven_allowance} offers a session")
    # A due probe that was not spent (no candidate, or no verdict came back) leaves the run unbroken,
    # so the next session is due again: the probe is retried until it buys a verdict.
    waited = defunded_run(store.throttle_rows(pass_name, cfg.probe_every, judge)) + 1  # this session included
    why = f"{n} verdicts, none of the last {len(recent)} resolved anything (patience {cfg.patience})"
    if waited >= cfg.probe_every:
        return ThrottleState("defunded", 1, True, why)
    return ThrottleState("defunded", 0, False, why, next_probe_in=cfg.probe_every - waited)


def record(store, session: str, pass_name: str, t: ThrottleState, offered: int, judged: int, resolved: int,
           probe_spent: bool, judge: str = "anthropic") -> None:
    """Keep this session's throttle record of a pass: what it allowed, what it bought, whether a probe was spent."""
    store.record_throttle({"session": session, "pass": pass_name, "state": t.state, "allowance": t.allowance,
                           "offered": offered, "judged": judged, "resolved": resolved,
                           "probe_due": int(t.probe), "probe_spent": int(probe_spent), "judge": judge})
