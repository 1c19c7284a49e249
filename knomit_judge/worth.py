"""Whether a read is worth its price: the chance that a question at a given score resolves something.

A pass's own verdicts say how often a question at a score resolved something: the `WINDOW` verdicts
nearest in score (each verdict keeps its candidate's score, migration 0019), shrunk toward a prior by score
worth `PRIOR_READS` reads. The prior (`prior`) is what the shipped calibration data show before any read:
nothing at a score below the pass's floor has ever resolved, and the chance rises to `PRIOR_TOP` (the one in
ten the rule always assumed) at the score where true pairs become common. A pass's first `EXPLORE` reads are
asked whatever the curve says, as they always were, but none the prior calls hopeless (at or below the floor,
with no resolution read near it): so the opening of a small corpus asks no pair the prior rules out, and a
long run of no's near a score makes that score not worth a read. The
estimate is refit as the session's verdicts come back (the latest reads are nearest the next score, as
candidates are offered best first).

A question is offered while chance x value of a resolution >= its price: a call of the reader that reads it
at what this pass's calls of that model cost on average, plus `judge.audit_share` of a judge-model call when the
first reader reads. The price is measured from the pass's first calls, the first session's included, before
the rule holds anything back (the first `EXPLORE` reads are asked whatever it says), not a typical question's
until a session ends and the measured one after: on an unchanged corpus no read resolves anything, so the
chance only falls and the price is the one the last session ended with, and a question the rule held back
stays held. The money balance stays the ceiling (throttle.py). docs/throttle.md and docs/choices.md say why
these numbers.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable

from .store import Store, of_judge
from .verdicts import MECHANICAL

# verdicts nearest in score that estimate the chance at a score
WINDOW = 500
# the prior's weight: about a resolution's worth of reads that all say no turns a score down
PRIOR_READS = 10.0
# A pass's first reads are asked whatever the curve says, but never where the prior is 0: before them the pass's
# own verdicts are too few to go on, and a judge model's read may cost more than PRIOR_TOP of a resolution.
EXPLORE = 20
# the prior's chance at and above a pass's `full` score: one resolution in ten reads
PRIOR_TOP = 0.1
# (floor, full) of a pass's score, its `prior` (passes/alias.py, prune.py, discovery.py): the prior is 0 at and
# below `floor` and rises in a line to PRIOR_TOP at `full`. From benchmarks/worth_prior.py (docs/choices.md): the
# lowest score of a true pair was alias 0.20 on the calibration corpus and 0.30 on knomit's KB, prune 0.74 (0.65 in
# the aekb replay), discovery 0.35; each floor sits below it with room (prune's far below: two instances of one
# mechanism, worded apart, can score 0.34 and still be a containment); the line is above the shares measured low
# down, and at the top it stays at the old flat PRIOR_TOP though the labels show more, so the top of a list is read
# as deep as before.
Prior = tuple[float, float]
# a pass with no prior: PRIOR_TOP everywhere
NO_PRIOR: Prior = (-1.0, -1.0)


def prior(bounds: Prior, score: float) -> float:
    """P(resolve | score) before any read of the pass: 0 up to its floor, PRIOR_TOP from its full score."""
    floor, full = bounds
    if score >= full:
        return PRIOR_TOP
    return PRIOR_TOP * max(0.0, (score - floor) / (full - floor))


class Worth:
    """The chance of resolving something, by score, from one pass's verdicts (and this session's reads)."""

    def __init__(
        self,
        scored: list[tuple[float, bool]],
        pass_name: str = "",
        store: Store | None = None,
        judge: str | None = None,
        *,
        prior: Prior = NO_PRIOR,
    ) -> None:
        self.scores = sorted(scored)  # (score, resolved), by score
        self.pass_name = pass_name
        self.prior = prior  # the pass's (floor, full)
        self._judge, self._share = "", 0.0
        self._nominal: Callable[[str], float] = lambda model: 0.0
        # what this pass's calls of each model cost, as the store holds them (this session's as they come back):
        # model -> [USD, calls], read on from the last verdict row counted
        self._store, self._kind = store, judge
        self._costs: dict[str, list[float]] = {}
        self._counted, self._stale = 0, True

    @classmethod
    def of_pass(cls, store: Store, pass_name: str, judge: str | None, *, prior: Prior) -> Worth:
        """From the pass's stored verdicts that kept a score (those before migration 0019 kept none), with its
        prior (Pass.prior)."""
        where, args = of_judge("pass = ? AND model != ? AND score IS NOT NULL", [pass_name, MECHANICAL], judge)
        rows = store.db.execute(f"SELECT score, is_yes AND NOT reverted FROM verdicts WHERE {where}", args)
        return cls([(float(s), bool(r)) for s, r in rows], pass_name, store, judge, prior=prior)

    def pricing(self, judge: str, nominal: Callable[[str], float], audit_share: float) -> None:
        """How a read is priced: the judge model, a typical question's price at a model (what a model not yet
        called costs), and the share of a first reader's reads the judge model audits."""
        self._judge, self._nominal, self._share = judge, nominal, audit_share

    @property
    def judge(self) -> str:
        """The judge model the reads are priced against (set by pricing)."""
        return self._judge

    def price(self, reader: str) -> float:
        """What a read costs the pass: a call of `reader` at what this pass's calls of it cost, and, when the
        first reader reads, audit_share of a judge-model call at what the pass's calls of that model cost.

        Measured from the pass's first calls, the first session's included, so by the time the rule holds a
        question back (after EXPLORE reads) the price is the one the next session starts from. Before the
        judge model's first call its price is the reader's measured one scaled by the two models' typical
        prices: a guess from below (a model that thinks bills more), and a price that rises when measured
        only holds more back, never asks what was held."""
        own = self.cost(reader)
        if own is None:
            own = self._nominal(reader)
        if reader == self._judge:
            return own
        judge = self.cost(self._judge)
        if judge is None:
            typical = self._nominal(reader)
            judge = own * self._nominal(self._judge) / typical if typical else self._nominal(self._judge)
        return own + self._share * judge

    def cost(self, model: str) -> float | None:
        """What a call of `model` in this pass cost on average, its verdicts so far (None: no call yet)."""
        if self._stale and self._store is not None:
            where, args = of_judge(
                "pass = ? AND model != ? AND calls > 0 AND cost_usd IS NOT NULL AND rowid > ?",
                [self.pass_name, MECHANICAL, self._counted],
                self._kind,
            )
            for name, usd, calls, last in self._store.db.execute(
                f"SELECT model, sum(cost_usd), sum(calls), max(rowid) FROM verdicts WHERE {where} GROUP BY model", args
            ):
                counted = self._costs.setdefault(name, [0.0, 0.0])
                counted[0], counted[1] = counted[0] + usd, counted[1] + calls
                self._counted = max(self._counted, last)
            self._stale = False
        usd, calls = self._costs.get(model, (0.0, 0.0))
        return usd / calls if calls else None

    def chance(self, score: float) -> float:
        """P(resolve | score): the WINDOW verdicts nearest `score`, shrunk toward the prior at that score."""
        n = len(self.scores)
        i = bisect_left(self.scores, (score, False))
        # grow [lo, hi) toward the nearer neighbour until it holds WINDOW verdicts
        lo, hi = i, i
        while hi - lo < min(WINDOW, n):
            if lo > 0 and (hi >= n or score - self.scores[lo - 1][0] <= self.scores[hi][0] - score):
                lo -= 1
            else:
                hi += 1
        yes = sum(r for _, r in self.scores[lo:hi])
        return (yes + PRIOR_READS * prior(self.prior, score)) / (hi - lo + PRIOR_READS)

    def hopeless(self, score: float) -> bool:
        """No true pair of the calibration data scored here (the prior is 0), and none read near it resolved."""
        return prior(self.prior, score) == 0 and self.chance(score) == 0

    def worth(self, score: float, price: float, value: float) -> bool:
        """A read at `score` is worth `price` when its chance of a resolution worth `value` pays for it; a pass's
        first EXPLORE reads are asked whatever their chance, unless they are hopeless."""
        if len(self.scores) < EXPLORE:
            return not self.hopeless(score)
        return self.chance(score) * value >= price

    def seen(self, score: float, resolved: bool) -> None:
        """A read at `score` came back: the curve learns it at once, and what its calls cost is read anew."""
        insort(self.scores, (score, resolved))
        self._stale = True
