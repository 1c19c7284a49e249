"""The outcome-funded throttle: judge attention is an amount, a balance of money earned by resolutions.

Each judged pass holds a balance, derived from its stored verdicts (oldest first): it opens at
`budget.opening_usd`, every verdict withdraws what its calls cost at its model's price (a typical question's
price, config.QUESTION_TOKENS, per call: a first-reader no costs a twentieth of a judge-model read), every
resolved verdict (a yes not reverted) deposits `budget.usd_per_resolution`, and it never goes below zero (a
question asked at zero is the probe, which the balance does not charge). A file that sets the older
`optimistic_cap` / `questions_per_resolution` means them in judge-model questions, converted at that price.
A judge with no price (the scripted one) keeps the balance in questions: one a verdict. Nothing here can be
reset by deleting a counter: the verdicts come back from the journal in git. Within a session the balance
moves live (`Allowance`): each read withdraws the price of the model that made it (the first reader, the judge
model reading a first yes, a hand-over, an audit), each resolution coming back deposits, so a session stops
asking when its balance runs out, not when the dollar cap is hit; and within the balance a
question is offered only while it is worth its price (worth.py).

The states name where the balance stands:
- optimistic: no verdict yet; the balance is the opening.
- unproven: verdicts, none resolved, and what is left of the opening is above zero.
- funded: the balance is above zero and holds deposits (a verdict of the pass resolved something).
- defunded: the balance is zero; only the probe, every `probe_every` sessions.

Whatever the state, a fact or spelling changed since the pass's last session is owed its own best
questions (`budget.fresh_per_change` of the unanswered ones that touch it), asked in that session even
at a balance of zero: a duplicate a writer adds is asked while it is new. They withdraw what the
balance holds (never below zero), so the state stays what the verdicts make it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from .config import Config
from .store import Store, of_judge
from .verdicts import MECHANICAL
from .worth import Worth

# USD: what is left of a balance after reads that spent it exactly (float sums) counts as zero
EPS = 1e-9
# What a balance is counted in: money, or questions (a judge with no price: the scripted one).
Unit = Literal["usd", "questions"]
# Where a pass's balance stands (the module's docstring); unthrottled: budget.enabled = false.
Standing = Literal["optimistic", "funded", "unproven", "defunded", "unthrottled"]
STANDINGS: tuple[Standing, ...] = get_args(Standing)


@dataclass
class Terms:
    """What a pass's balance is counted in, and at what rates: money at each reader's price, or questions."""

    unit: Unit
    opening: float
    # per resolution; also what one resolution is worth to the worth rule
    deposit: float
    # model -> price of one call (usd); a model not here costs `default`
    prices: dict[str, float] = field(default_factory=dict)
    # the judge model's price of one call: a retired or unpriced model's calls count at it
    default: float = 1.0
    probe_every: int = 5
    enabled: bool = True
    # the first reader (if any), then the judge model
    readers: list[str] = field(default_factory=list)

    @classmethod
    def questions(cls, opening: int, deposit: int, probe_every: int = 5, enabled: bool = True) -> Terms:
        return cls("questions", opening, deposit, probe_every=probe_every, enabled=enabled, readers=["question"])

    def price(self, model: str | None) -> float:
        """What one call of `model` withdraws (None, no reader named: the judge model's price)."""
        if self.unit != "usd":
            return 1.0
        return self.default if model is None else self.prices.get(model, self.default)

    def amount(self, x: float) -> str:
        """An amount as the terms count it: `$0.0412` or `12 questions`."""
        return f"${x:.4f}" if self.unit == "usd" else f"{round(x)} questions"


def terms(config: Config, judge: str | None = "anthropic") -> Terms:
    """The balance's terms for a kind of judge: the real one pays each model's price; the scripted one, questions."""
    b = config.budget
    # both None when judge.model has no price
    usd, default = config.budget_usd(), config.question_usd()
    if judge == "scripted" or usd is None or default is None:
        return Terms.questions(*config.budget_questions(), probe_every=b.probe_every, enabled=b.enabled)
    prices = {m: config.question_usd(m) for m in {config.judge.model, *config.models().values()}}
    first = config.models().get("judge.first_reader")
    return Terms(
        "usd",
        usd[0],
        usd[1],
        {m: p for m, p in prices.items() if p is not None},
        default,
        b.probe_every,
        b.enabled,
        [*([first] if first else []), config.judge.model],
    )


@dataclass
class ThrottleState:
    state: Standing
    # what this pass may still spend this session (live, in the terms' unit); None = unlimited
    allowance: float | None
    # this session's one offer is the defunded pass's probe
    probe: bool
    why: str
    # sessions after this one until the probe, while defunded and not due
    next_probe_in: int | None = None
    # the balance at the session's start, derived from the verdicts (None: unthrottled)
    balance: float | None = None
    # reads the probe may still take whatever the balance (1 for a due probe, 0 once taken)
    probes: int = 0

    def __post_init__(self) -> None:
        # what the session started with; `allowance` moves as it asks
        self.granted = self.allowance
        self.probes = self.probes or int(self.probe)

    def probe_fresh(self, owed: int = 0) -> None:
        """Make this defunded session a probe: facts its questions touch changed since its last session.

        A duplicate a writer adds is then asked in the session that first sees it, while an unchanged corpus
        still waits `probe_every` sessions between probes. The probe is the best fresh question, or, in a
        pass that owes new facts their nearest questions, those `owed` questions: nothing more is granted,
        and a resolution among them deposits as a probe's would.
        """
        self.probe, self.probes, self.next_probe_in = True, 0 if owed else 1, None
        self.why += (
            f"; facts changed since its last session: it asks the {owed} question(s) owed to them"
            if owed
            else "; facts changed since its last session: it probes the best fresh question"
        )

    @property
    def probe_in(self) -> int | None:
        """Sessions until the probe, counting the session this state is for as 1 (None: not defunded)."""
        if self.state != "defunded":
            return None
        # not due: assess set next_probe_in (a due probe has none)
        return 1 if self.probe or self.next_probe_in is None else self.next_probe_in + 1


@dataclass
class Balance:
    """A pass's balance as its stored verdicts make it."""

    # verdicts counted (each withdrew its price)
    questions: int
    # of them, resolved (each deposited the deposit)
    resolved: int
    # what is left, never below zero
    balance: float
    # questions in Message Batches submitted and not yet collected: already spent
    reserved: int = 0
    # what the verdicts withdrew in all
    spent: float = 0.0


def defunded_run(rows: list[dict[str, Any]]) -> int:
    """Defunded sessions since the last probe that was spent (rows newest first)."""
    count = 0
    for row in rows:
        if row["state"] != "defunded" or row["probe_spent"]:
            break
        count += 1
    return count


def balance(store: Store, pass_name: str, t: Terms, judge: str | None = None) -> Balance:
    """The pass's balance from its verdicts: the opening, minus each verdict's price, plus a deposit a resolution.

    Floored at zero after each verdict, computed in one query: a walk S_k = opening + sum(step) clamped at
    zero ends at S_n - min(0, min_k S_k) (the walk reflected at its lowest point), so 100k verdicts
    take one sorted scan in sqlite, not a Python loop. A reverted yes resolved nothing. A verdict's price is
    its calls at its model's price (usd), or one (questions); a verdict from the reply cache made no call.
    """
    # a restated yes (model `mechanical`, decisions.restate) asked nothing: it neither withdraws nor deposits
    where, args = of_judge("pass = ? AND model != ?", [pass_name, MECHANICAL], judge)
    if t.unit == "usd":
        models = sorted(t.prices)
        cost = (
            ("calls * CASE model " + "".join(" WHEN ? THEN ?" for _ in models) + " ELSE ? END")
            if models
            else "calls * ?"
        )
        cost_args = [x for m in models for x in (m, t.prices[m])] + [t.default]
    else:
        cost, cost_args = "1", []
    n, resolved, spent, low = store.db.execute(
        "SELECT count(*), coalesce(sum(r), 0), coalesce(sum(c), 0), min(s) FROM ("
        f"  SELECT r, c, sum(? * r - c) OVER (ORDER BY created_at, rid ROWS UNBOUNDED PRECEDING) AS s FROM ("
        f"    SELECT (is_yes AND NOT reverted) AS r, {cost} AS c, created_at, rowid AS rid FROM verdicts "
        f"WHERE {where}))",
        [t.deposit, *cost_args, *args],
    ).fetchone()
    walk = t.opening + t.deposit * resolved - spent
    low = 0 if low is None else t.opening + low
    reserved = store.reserved_questions(pass_name, judge)
    left = walk - min(0, low) - reserved * t.default
    return Balance(n, resolved, left if left > EPS else 0.0, reserved, spent)


def assess(store: Store, pass_name: str, t: Terms, judge: str | None = None) -> ThrottleState:
    """The throttle state of the pass's next session, from its verdicts and its earlier sessions' records.

    Given a judge kind, only that kind's verdicts and sessions count: a scripted judge's defaults must not
    defund the real judge (nor the real judge's spending fund a script).
    """
    if not t.enabled:
        return ThrottleState("unthrottled", None, False, "budget.enabled = false")
    b = balance(store, pass_name, t, judge)
    held = f", {b.reserved} in a running batch" if b.reserved else ""
    if b.questions == 0 and not b.reserved:
        why = f"no verdicts yet: a balance of {t.amount(b.balance)} (the opening)"
        return ThrottleState("optimistic", b.balance, False, why, balance=b.balance)
    terms_text = f"{b.resolved} resolved x {t.amount(t.deposit)}, opening {t.amount(t.opening)}{held}"
    if b.balance > 0:
        state: Standing = "funded" if b.resolved else "unproven"
        why = f"balance {t.amount(b.balance)}: {b.questions} asked for {t.amount(b.spent)}, {terms_text}"
        return ThrottleState(state, b.balance, False, why, balance=b.balance)
    # A due probe that was not spent (no candidate, or no verdict came back) leaves the run unbroken,
    # so the next session is due again: the probe is retried until it buys a verdict.
    waited = defunded_run(store.throttle_rows(pass_name, t.probe_every, judge)) + 1  # this session included
    why = f"balance 0: {b.questions} asked for {t.amount(b.spent)}, {terms_text}"
    if waited >= t.probe_every:
        return ThrottleState("defunded", 0.0, True, why, balance=0.0)
    return ThrottleState("defunded", 0.0, False, why, next_probe_in=t.probe_every - waited, balance=0.0)


def shown(state: ThrottleState, t: Terms) -> dict[str, Any]:
    """The balance as status, the metrics and the report show it: in money, and in the reads it buys at each
    reader's price. `balance` and `allowance` stay what they always were, counts of judge-model questions (None:
    unthrottled; a due probe's allowance is its one question)."""
    amount = state.balance
    buys = {m: None if amount is None else int(amount / t.price(m) + EPS) for m in t.readers}
    judge = t.readers[-1] if t.readers else None
    live = state.allowance
    return {
        "allowance": None if live is None else int(live / t.price(judge) + EPS) if live > EPS else state.probes,
        "balance": None if amount is None else int(amount / t.price(judge) + EPS),
        "balance_usd": round(amount, 6) if amount is not None and t.unit == "usd" else None,
        "buys": buys,
    }


def buys_text(state: ThrottleState, t: Terms) -> str:
    """`$0.0712: 356 reads at claude-haiku-5-5, 17 at claude-sonnet-5-5` (empty when unthrottled)."""
    # unthrottled, nothing left, or counted in questions already
    if not state.balance or t.unit != "usd":
        return ""
    figures = shown(state, t)["buys"]
    reads = ", ".join(f"{n} {'reads ' if i == 0 else ''}at {m}" for i, (m, n) in enumerate(figures.items()))
    return f"balance {t.amount(state.balance)} buys {reads}"


class Allowance:
    """A pass's balance as it moves during a session: every read withdraws its own model's price as it is made,
    a resolution deposits.

    An offer takes the price of one call at the model that would read it (and, read by the first reader, its audit
    share: the audits its no may draw are put by in `fund`); a further reading of the same question (the judge
    model's reading of a first yes, a hand-over) must find its price in the balance too (`cover`), or the question
    waits. What a question's reads cost at their models' prices replaces what it took once it is settled. Offers
    wait while the balance is spent but questions are still in flight, since one of them may resolve something
    and deposit more; with nothing in flight and nothing left, the pass stops asking. The live figure is kept in
    `t.allowance`, which others read as "what this pass may still spend".
    """

    def __init__(self, t: ThrottleState, terms: Terms, worth: Worth | None = None) -> None:
        self.t, self.terms, self.worth = t, terms, worth
        self.in_flight = 0
        # fingerprint -> what its offer holds from the balance (reserved, topped up)
        self.taken: dict[str, float] = {}
        # fingerprint -> what its reads cost so far, at their models' prices
        self.spent: dict[str, float] = {}
        # the audit share first reads put by this round: what the round's audits are paid from
        self.fund = 0.0
        # the fingerprint the probe was spent on
        self.probe: str | None = None
        # owed questions asked at a balance of zero: they took nothing
        self.uncharged: set[str] = set()
        # questions owed to a fresh fact: asked past the balance, every reading of them too (the judge model's read
        # of a first yes), so a new duplicate is decided in the session that first sees it
        self.owed: set[str] = set()
        # questions passed over this session: not worth their price
        self.unworthy = 0
        # fingerprint -> score of a question offered as worth its price
        self.scores: dict[str, float] = {}
        self._settled = asyncio.Event()

    def price(self, model: str | None) -> float:
        """What one call of `model` withdraws (the terms' price: a typical question's at that model)."""
        return self.terms.price(model)

    def room(self, usd: float) -> bool:
        """Whether the balance holds `usd` (always, unthrottled)."""
        return self.t.allowance is None or self.t.allowance + EPS >= usd

    def worth_asking(self, fingerprint: str, score: float, model: str | None = None) -> bool:
        """Whether a question at `score` is worth its price at the model that would read it (worth.py); always,
        with no rule."""
        if self.worth is None or self.t.allowance is None or (self.t.allowance <= EPS and self.t.probes):
            # no rule, unthrottled, or the defunded pass's probe: asked whatever its chance
            return True
        if self.worth.worth(score, self.worth.price(model or self.worth.judge), self.terms.deposit):
            self.scores[fingerprint] = score
            return True
        self.unworthy += 1
        return False

    async def take(self, fingerprint: str, price: float, fund: float = 0.0) -> bool:
        """Reserve one read at `price` (and `fund` for its audits); False once the balance cannot pay it and nothing
        in flight can refill it. With nothing in flight, what is left above zero pays for one question more whatever
        its price (the balance's last: past it by less than that question), so a price above the opening never
        latches a pass off; at zero, only the probe is asked."""
        while not self.room(price + fund):
            if self.t.probes and self.t.allowance is not None and self.t.allowance <= EPS:
                break  # the probe
            if not self.in_flight:
                if self.t.allowance is not None and self.t.allowance > EPS:
                    break  # the balance's last question
                return False
            self._settled.clear()
            await self._settled.wait()
        if self.t.allowance is not None and self.t.allowance <= EPS and not self.room(price + fund):
            # the probe: asked at zero, charged nothing
            self.t.probes -= 1
            self.probe = fingerprint
            self.uncharged.add(fingerprint)
        elif self.t.allowance is not None:
            self.taken[fingerprint] = price
            self.t.allowance -= price + fund
            self.fund += fund
        self.in_flight += 1
        return True

    def owe(self, fingerprint: str, price: float) -> None:
        """Take a question owed to a fresh fact: asked whatever is left, withdrawing its price if the balance holds it."""
        self.owed.add(fingerprint)
        if self.t.allowance is not None:
            if self.room(price):
                self.taken[fingerprint] = price
                self.t.allowance -= price
            else:
                self.uncharged.add(fingerprint)
        self.in_flight += 1

    def cover(self, fingerprint: str, price: float) -> bool:
        """Whether the question in hand may be read (again) at `price`: what it took and has not spent pays it, or the
        balance tops it up. Asked at zero (the probe, an owed question), it is read whatever the balance."""
        if self.t.allowance is None or fingerprint in self.uncharged or fingerprint not in self.taken:
            return True
        # counted in questions (the scripted judge): one a verdict, taken at its offer
        if self.terms.unit != "usd":
            return True
        short = price - (self.taken[fingerprint] - self.spent.get(fingerprint, 0.0))
        if short <= EPS:
            return True
        # read past the balance: it pays what it holds, the rest goes uncharged
        if fingerprint in self.owed:
            short = min(short, max(self.t.allowance, 0.0))
        elif not self.room(short) and (self.in_flight > 1 or self.t.allowance <= EPS):
            # alone in flight, what is left above zero pays for it, as for the balance's last question
            return False
        self.t.allowance -= short
        self.taken[fingerprint] += short
        return True

    def spend(self, fingerprint: str, usd: float) -> None:
        """A read of the question in hand was made: `usd`, its calls at its model's price (a paid batch result's
        question took nothing and is not settled here: nothing to keep)."""
        if fingerprint in self.taken or fingerprint in self.uncharged:
            self.spent[fingerprint] = self.spent.get(fingerprint, 0.0) + usd

    def charge(self, usd: float) -> None:
        """A read outside any offer (an audit, a shadow read) was made: withdrawn from the audit fund first."""
        if self.t.allowance is not None:
            from_fund = min(self.fund, usd)
            self.fund -= from_fund
            self.t.allowance -= usd - from_fund

    def close_round(self) -> None:
        """The round's audits are read: what its first reads put by for them and they did not use goes back."""
        if self.t.allowance is not None:
            self.t.allowance += self.fund
        self.fund = 0.0
        self._settled.set()

    def settle(self, fingerprint: str, asked: bool, resolved: bool = False, judged: bool = True) -> None:
        """A reserved question is done: given back if it was never asked, else what it took is replaced by what its
        reads cost; a resolution deposits; a verdict (`judged`: not a refusal or a failed call) teaches the worth
        rule's curve.

        The probe, and an owed question asked at zero, take the derived balance nowhere below zero: one
        that resolved leaves the deposit less its cost, as the verdicts will say next session.
        """
        self.in_flight -= 1
        spent = self.spent.pop(fingerprint, 0.0)
        owed = fingerprint in self.owed
        self.owed.discard(fingerprint)
        if self.t.allowance is not None:
            free = fingerprint in self.uncharged
            self.uncharged.discard(fingerprint)
            took = self.taken.pop(fingerprint, 0.0)
            if not asked:
                self.t.allowance += took
                if fingerprint == self.probe:
                    # not spent: the grant goes to the next
                    self.probe, self.t.probes = None, self.t.probes + 1
            # in questions, a verdict costs the one its offer took
            elif not free and self.terms.unit == "usd":
                self.t.allowance += took - spent
                if owed and self.t.allowance < 0:
                    # read past the balance: the derived one is floored at zero too
                    self.t.allowance = 0.0
            if asked and resolved:
                cost = spent if self.terms.unit == "usd" else self.terms.price(None)
                self.t.allowance += self.terms.deposit - cost * free
        score = self.scores.pop(fingerprint, None)
        # scored only with a rule
        if asked and judged and score is not None and self.worth is not None:
            self.worth.seen(score, resolved)
        self._settled.set()

    def deposit(self, resolutions: int) -> None:
        """Resolutions of questions the balance did not pay for now (paid batch results): their deposits."""
        if self.t.allowance is not None:
            self.t.allowance += self.terms.deposit * resolutions
        self._settled.set()


def record(
    store: Store,
    session: str,
    pass_name: str,
    t: ThrottleState,
    *,
    offered: int,
    judged: int,
    resolved: int,
    probe_spent: bool,
    judge: str = "anthropic",
) -> None:
    """Keep this session's throttle record of a pass: what it allowed, what it bought, whether a probe was spent."""
    store.record_throttle(
        {
            "session": session,
            "pass": pass_name,
            "state": t.state,
            "allowance": t.granted,
            "offered": offered,
            "judged": judged,
            "resolved": resolved,
            "probe_due": int(t.probe),
            "probe_spent": int(probe_spent),
            "judge": judge,
        }
    )
