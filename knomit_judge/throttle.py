"""The outcome-funded throttle: judge attention is funded by verdicts that resolved something.

State is derived from the stored verdicts (how many, and whether a recent one
resolved something) and, for the probe, from the throttle history of earlier
sessions; nothing here can be reset by deleting a counter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import BudgetConfig


@dataclass
class ThrottleState:
    state: str  # optimistic | funded | unproven | defunded | unthrottled
    allowance: int | None  # offers this session; None = unlimited (the cost cap still holds)
    probe: bool  # this session's one offer is the defunded pass's probe
    why: str
    next_probe_in: int | None = None  # sessions, while defunded and not due


def defunded_run(rows: list[dict]) -> int:
    """Defunded sessions since the last probe that was spent (rows newest first)."""
    count = 0
    for row in rows:
        if row["state"] != "defunded" or row["probe_spent"]:
            break
        count += 1
    return count


def assess(store, pass_name: str, cfg: BudgetConfig) -> ThrottleState:
    if not cfg.enabled:
        return ThrottleState("unthrottled", None, False, "budget.enabled = false")
    n = store.count_verdicts(pass_name)
    if n == 0:
        return ThrottleState("optimistic", cfg.optimistic_cap, False,
                             f"no verdicts yet: at most {cfg.optimistic_cap} offers a session")
    recent = store.history(pass_name, cfg.window)
    if any(recent):
        return ThrottleState("funded", None, False,
                             f"{sum(recent)} of the last {len(recent)} verdicts resolved something")
    if n < cfg.patience:
        return ThrottleState("unproven", cfg.unproven_allowance, False,
                             f"{n} verdicts, none resolved, fewer than patience {cfg.patience}: "
                             f"{cfg.unproven_allowance} offers a session")
    waited = defunded_run(store.throttle_rows(pass_name, cfg.probe_every + 1)) + 1  # this session included
    why = f"{n} verdicts, none of the last {len(recent)} resolved anything"
    if waited >= cfg.probe_every:
        return ThrottleState("defunded", 1, True, why + ": probe due this session")
    return ThrottleState("defunded", 0, False, why, next_probe_in=cfg.probe_every - waited)


def record(store, session: str, pass_name: str, t: ThrottleState, offered: int, judged: int, resolved: int,
           probe_spent: bool) -> None:
    store.record_throttle({"session": session, "pass": pass_name, "state": t.state, "allowance": t.allowance,
                           "offered": offered, "judged": judged, "resolved": resolved,
                           "probe_due": int(t.probe), "probe_spent": int(probe_spent)})
