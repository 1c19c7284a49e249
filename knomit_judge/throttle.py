"""The outcome-funded throttle: judge attention is an amount, a balance of questions earned by resolutions.

Each judged pass holds a balance of questions, derived from its stored verdicts (oldest first): it
opens at `budget.optimistic_cap`, every verdict withdraws one question, every resolved verdict (a yes
not reverted) deposits `budget.questions_per_resolution`, and it never goes below zero (a question
asked at zero is the probe, which the balance does not charge). Nothing here can be reset by deleting
a counter: the verdicts come back from the journal in git. Within a session the balance moves live
(`Allowance`): each offer takes one, each resolution coming back deposits, so a session stops asking
when its balance runs out, not when the dollar cap is hit.

The states name where the balance stands:
- optimistic: no verdict yet; the balance is the opening cap.
- unproven: verdicts, none resolved, and what is left of the opening cap is above zero.
- funded: the balance is above zero and holds deposits (a verdict of the pass resolved something).
- defunded: the balance is zero; only the probe, every `probe_every` sessions.

Whatever the state, a fact or spelling changed since the pass's last session is owed its own best
questions (`budget.fresh_per_change` of the unanswered ones that touch it), asked in that session even
at a balance of zero: a duplicate a writer adds is asked while it is new. They withdraw what the
balance holds (never below zero), so the state stays what the verdicts make it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .config import BudgetConfig
from .store import of_judge
from .verdicts import MECHANICAL


@dataclass
class ThrottleState:
    state: str  # optimistic | funded | unproven | defunded | unthrottled
    allowance: int | None  # questions this pass may still ask this session (live); None = unlimited
    probe: bool  # this session's one offer is the defunded pass's probe
    why: str
    next_probe_in: int | None = None  # sessions after this one until the probe, while defunded and not due
    balance: int | None = None  # the balance at the session's start, derived from the verdicts (None: unthrottled)

    def __post_init__(self):
        self.granted = self.allowance  # what the session started with; `allowance` moves as it asks

    def probe_fresh(self, owed: int = 0) -> None:
        """Make this defunded session a probe: facts its questions touch changed since its last session.

        A duplicate a writer adds is then asked in the session that first sees it, while an unchanged corpus
        still waits `probe_every` sessions between probes. The probe is the best fresh question, or, in a
        pass that owes new facts their nearest questions, those `owed` questions: nothing more is granted,
        and a resolution among them deposits as a probe's would.
        """
        grant = 0 if owed else 1
        self.probe, self.allowance, self.granted, self.next_probe_in = True, grant, grant, None
        self.why += (f"; facts changed since its last session: it asks the {owed} question(s) owed to them" if owed
                     else "; facts changed since its last session: it probes the best fresh question")

    @property
    def probe_in(self) -> int | None:
        """Sessions until the probe, counting the session this state is for as 1 (None: not defunded)."""
        if self.state != "defunded":
            return None
        return 1 if self.probe else self.next_probe_in + 1


@dataclass
class Balance:
    """A pass's balance of questions as its stored verdicts make it."""

    questions: int  # verdicts counted (each withdrew one)
    resolved: int  # of them, resolved (each deposited questions_per_resolution)
    balance: int  # what is left, never below zero
    reserved: int = 0  # questions in Message Batches submitted and not yet collected: already spent


def defunded_run(rows: list[dict]) -> int:
    """Defunded sessions since the last probe that was spent (rows newest first)."""
    count = 0
    for row in rows:
        if row["state"] != "defunded" or row["probe_spent"]:
            break
        count += 1
    return count


def balance(store, pass_name: str, cfg: BudgetConfig, judge: str | None = None) -> Balance:
    """The pass's balance from its verdicts: the opening cap, -1 a verdict, +questions_per_resolution a resolution.

    Floored at zero after each verdict, computed in one query: a walk S_k = cap + sum(step) clamped at
    zero ends at S_n - min(0, min_k S_k) (the walk reflected at its lowest point), so 100k verdicts
    take one sorted scan in sqlite, not a Python loop. A reverted yes resolved nothing.
    """
    # a restated yes (model `mechanical`, decisions.restate) asked nothing: it neither withdraws nor deposits
    where, args = of_judge("pass = ? AND model != ?", [pass_name, MECHANICAL], judge)
    q = cfg.questions_per_resolution
    n, resolved, low = store.db.execute(
        "SELECT count(*), coalesce(sum(r), 0), min(s) FROM ("
        f"  SELECT r, sum(? * r - 1) OVER (ORDER BY created_at, rid ROWS UNBOUNDED PRECEDING) AS s FROM ("
        f"    SELECT (is_yes AND NOT reverted) AS r, created_at, rowid AS rid FROM verdicts WHERE {where}))",
        [q, *args]).fetchone()
    walk = cfg.optimistic_cap + q * resolved - n
    low = 0 if low is None else cfg.optimistic_cap + low
    reserved = store.reserved_questions(pass_name, judge)
    return Balance(n, resolved, max(0, walk - min(0, low) - reserved), reserved)


def assess(store, pass_name: str, cfg: BudgetConfig, judge: str | None = None) -> ThrottleState:
    """The throttle state of the pass's next session, from its verdicts and its earlier sessions' records.

    Given a judge kind, only that kind's verdicts and sessions count: a scripted judge's defaults must not
    defund the real judge (nor the real judge's spending fund a script).
    """
    if not cfg.enabled:
        return ThrottleState("unthrottled", None, False, "budget.enabled = false")
    b = balance(store, pass_name, cfg, judge)
    held = f", {b.reserved} in a running batch" if b.reserved else ""
    if b.questions == 0 and not b.reserved:
        why = f"no verdicts yet: a balance of {b.balance} questions (the opening cap)"
        return ThrottleState("optimistic", b.balance, False, why, balance=b.balance)
    if b.balance > 0:
        state = "funded" if b.resolved else "unproven"
        why = (f"balance {b.balance} questions: {b.questions} asked, {b.resolved} resolved "
               f"x {cfg.questions_per_resolution}, opening {cfg.optimistic_cap}{held}")
        return ThrottleState(state, b.balance, False, why, balance=b.balance)
    # A due probe that was not spent (no candidate, or no verdict came back) leaves the run unbroken,
    # so the next session is due again: the probe is retried until it buys a verdict.
    waited = defunded_run(store.throttle_rows(pass_name, cfg.probe_every, judge)) + 1  # this session included
    why = (f"balance 0: {b.questions} asked, {b.resolved} resolved x {cfg.questions_per_resolution}, "
           f"opening {cfg.optimistic_cap}{held}")
    if waited >= cfg.probe_every:
        return ThrottleState("defunded", 1, True, why, balance=0)
    return ThrottleState("defunded", 0, False, why, next_probe_in=cfg.probe_every - waited, balance=0)


class Allowance:
    """A pass's balance as it moves during a session: an offer takes one, a resolution coming back deposits.

    Offers wait while the balance is spent but questions are still in flight, since one of them may
    resolve something and deposit more; with nothing in flight and nothing left, the pass stops asking.
    The live figure is kept in `t.allowance`, which others read as "questions this pass may still ask".
    """

    def __init__(self, t: ThrottleState, per_resolution: int):
        self.t, self.per_resolution = t, per_resolution
        self.in_flight = 0
        self.probe: str | None = None  # the fingerprint the probe was spent on
        self.uncharged: set[str] = set()  # owed questions asked at a balance of zero: they took nothing
        self._settled = asyncio.Event()

    async def take(self, fingerprint: str) -> bool:
        """Reserve one question; False once the balance is spent and nothing in flight can refill it."""
        while self.t.allowance is not None and self.t.allowance <= 0:
            if not self.in_flight:
                return False
            self._settled.clear()
            await self._settled.wait()
        if self.t.allowance is not None:
            self.t.allowance -= 1
        if self.t.probe and self.probe is None and self.t.granted:  # a probe of owed questions grants nothing more
            self.probe = fingerprint
        self.in_flight += 1
        return True

    def owe(self, fingerprint: str) -> None:
        """Take a question owed to a fresh fact: asked whatever is left, withdrawing one if the balance holds one."""
        if self.t.allowance is not None:
            if self.t.allowance > 0:
                self.t.allowance -= 1
            else:
                self.uncharged.add(fingerprint)
        self.in_flight += 1

    def settle(self, fingerprint: str, asked: bool, resolved: bool = False) -> None:
        """A reserved question is done: given back if it was never asked; a resolution deposits.

        The probe, and an owed question asked at zero, take the derived balance nowhere below zero: one
        that resolved leaves questions_per_resolution - 1, as the verdicts will say next session.
        """
        self.in_flight -= 1
        if self.t.allowance is not None:
            free = fingerprint in self.uncharged
            self.uncharged.discard(fingerprint)
            probe = fingerprint == self.probe
            self.t.allowance += (not asked and not free) + (self.per_resolution - (probe or free)) * resolved
            if probe and not asked:
                self.probe = None  # not spent: the grant goes to the next question
        self._settled.set()

    def deposit(self, resolutions: int) -> None:
        """Resolutions of questions the balance did not pay for now (paid batch results): their deposits."""
        if self.t.allowance is not None:
            self.t.allowance += self.per_resolution * resolutions
        self._settled.set()


def record(store, session: str, pass_name: str, t: ThrottleState, offered: int, judged: int, resolved: int,
           probe_spent: bool, judge: str = "anthropic") -> None:
    """Keep this session's throttle record of a pass: what it allowed, what it bought, whether a probe was spent."""
    store.record_throttle({"session": session, "pass": pass_name, "state": t.state, "allowance": t.granted,
                           "offered": offered, "judged": judged, "resolved": resolved,
                           "probe_due": int(t.probe), "probe_spent": int(probe_spent), "judge": judge})
