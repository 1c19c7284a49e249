"""Whether a read is worth its price: the chance that a question at a given score resolves something.

A pass's own verdicts say how often a question at a score resolved something: the `WINDOW` verdicts
nearest in score (each verdict keeps its candidate's score, migration 0019), with a prior of `PRIOR_YES`
resolutions in `PRIOR_READS` reads, so a pass that has read little explores, and a long run of no's near a
score makes that score not worth a read. The estimate is refit as the session's verdicts come back (the
latest reads are nearest the next score, as candidates are offered best first). A question is offered
while chance x value of a resolution >= its price at the reader who reads it; the money balance stays the
ceiling (throttle.py). docs/throttle.md and docs/choices.md say why these numbers.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable

from .store import Store, of_judge
from .verdicts import MECHANICAL

WINDOW = 500  # verdicts nearest in score that estimate the chance at a score
# A pass that has read nothing near a score expects one resolution in 10 reads there: it explores, and about a
# resolution's worth of reads that all come back no (at the first reader's price) is what turns a score down.
PRIOR_YES, PRIOR_READS = 1.0, 10.0
EXPLORE = 20  # a pass's first reads are asked whatever the rule says: before them it knows nothing to go on


class Worth:
    """The chance of resolving something, by score, from one pass's verdicts (and this session's reads)."""

    def __init__(self, scored: list[tuple[float, bool]], costs: dict[str, float] | None = None) -> None:
        self.scores = sorted(scored)  # (score, resolved), by score
        self.costs = costs or {}  # model -> what one of its calls in this pass cost, on average (USD)

    @classmethod
    def of_pass(cls, store: Store, pass_name: str, judge: str | None) -> Worth:
        """From the pass's stored verdicts that kept a score (those before migration 0019 kept none)."""
        where, args = of_judge("pass = ? AND model != ? AND score IS NOT NULL", [pass_name, MECHANICAL], judge)
        rows = store.db.execute(f"SELECT score, is_yes AND NOT reverted FROM verdicts WHERE {where}", args)
        where, args = of_judge("pass = ? AND model != ? AND cost_usd IS NOT NULL AND calls > 0",
                               [pass_name, MECHANICAL], judge)
        costs = store.db.execute(f"SELECT model, sum(cost_usd) / sum(calls) FROM verdicts WHERE {where} "
                                 "GROUP BY model", args)
        return cls([(float(s), bool(r)) for s, r in rows], {m: c for m, c in costs})

    def price(self, reader: str, judge: str, nominal: Callable[[str], float], audit_share: float) -> float:
        """What a read costs the pass in fact: a call of `reader` as this pass's calls of it cost (its prompts'
        size, not a typical question's), and, when the first reader reads, the share of a judge-model read its
        no's are audited with. `nominal(model)` prices a model this pass has no call of yet."""
        def cost(model: str) -> float:
            return self.costs.get(model) or nominal(model)

        return cost(reader) + (audit_share * cost(judge) if reader != judge else 0.0)

    def chance(self, score: float) -> float:
        """P(resolve | score): the WINDOW verdicts nearest `score`, shrunk toward the prior."""
        n = len(self.scores)
        i = bisect_left(self.scores, (score, False))
        lo, hi = i, i  # grow [lo, hi) toward the nearer neighbour until it holds WINDOW verdicts
        while hi - lo < min(WINDOW, n):
            if lo > 0 and (hi >= n or score - self.scores[lo - 1][0] <= self.scores[hi][0] - score):
                lo -= 1
            else:
                hi += 1
        yes = sum(r for _, r in self.scores[lo:hi])
        return (yes + PRIOR_YES) / (hi - lo + PRIOR_READS)

    def worth(self, score: float, price: float, value: float) -> bool:
        """A read at `score` is worth `price` when its chance of a resolution worth `value` pays for it."""
        return len(self.scores) < EXPLORE or self.chance(score) * value >= price

    def seen(self, score: float, resolved: bool) -> None:
        """A read at `score` came back: the curve learns it at once."""
        insort(self.scores, (score, resolved))
