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

A question is offered while chance x value of a resolution >= its price: one call of the reader that reads it,
with the question's own prompt (characters / 4 in, the dialect's expected reply out, at list price: what the
dry run estimates), plus `judge.audit_share` of a judge-model call of it when the first reader reads. The price
is the question's own, never a mean of calls so far: on an unchanged corpus no read resolves anything, so the
chance only falls and the price stays, and a question the rule held back stays held. The money balance stays
the ceiling (throttle.py). docs/throttle.md and docs/choices.md say why these numbers.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from .config import Config
from .judge import REPLY_TOKENS
from .models import Lineup
from .prompts import Prompt
from .store import Store, of_judge
from .verdicts import MECHANICAL

WINDOW = 500  # verdicts nearest in score that estimate the chance at a score
PRIOR_READS = 10.0  # the prior's weight: about a resolution's worth of reads that all say no turns a score down
# A pass's first reads are asked whatever the curve says, but never where the prior is 0: before them the pass's
# own verdicts are too few to go on, and a judge model's read may cost more than PRIOR_TOP of a resolution.
EXPLORE = 20
PRIOR_TOP = 0.1  # the prior's chance at and above a pass's `full` score: one resolution in ten reads
# (floor, full) of each pass's score: the prior is 0 at and below `floor` and rises in a line to PRIOR_TOP at
# `full`. From benchmarks/worth_prior.py (docs/choices.md): the lowest score of a true pair was alias 0.20 on
# the calibration corpus and 0.30 on knomit's KB, prune 0.74 (0.65 in the aekb replay), discovery 0.35; each
# floor sits below it with room (prune's far below: two instances of one mechanism, worded apart, can score
# 0.34 and still be a containment), and the line
# stays above the share of true pairs measured in every band below `full`.
PRIORS = {"alias": (0.15, 0.5), "prune": (0.3, 0.8), "discovery": (0.2, 0.5)}
CHARS_PER_TOKEN = 4  # as the dry run estimates a prompt's tokens (session/dry_run.py)


def prior(pass_name: str, score: float) -> float:
    """P(resolve | score) before any read of the pass: 0 up to its floor, PRIOR_TOP from its full score."""
    floor, full = PRIORS.get(pass_name, (-1.0, -1.0))  # a pass with no prior here: PRIOR_TOP everywhere
    if score >= full:
        return PRIOR_TOP
    return PRIOR_TOP * max(0.0, (score - floor) / (full - floor))


class Question(Protocol):
    """What pricing a read needs of a candidate (passes.base.Candidate is one)."""

    @property
    def fingerprint(self) -> str: ...
    @property
    def orders(self) -> Sequence[Any]: ...


CallUsd = Callable[[str, float, float | None], float]  # (model, tokens in, tokens out or None) -> USD of a call


def call_usd(config: Config, lineup: Lineup, nominal: Callable[[str], float], batch: bool = False) -> CallUsd:
    """One call's list price by its size: its prompt's tokens in and, out, what this pass's calls of the model
    gave so far (None: none yet, so the dialect's expected reply, thinking included at judge.effort), less the
    batch discount in a batch session; a model with no price at `nominal`'s typical question (a real session
    has a price for each)."""

    def usd(model: str, tokens_in: float, tokens_out: float | None) -> float:
        price = config.price(model)
        if price is None:
            return nominal(model)
        if tokens_out is None:
            tokens_out = lineup.dialect(model, config.judge.effort).expected_out(REPLY_TOKENS)
        out = price.usd(tokens_in, tokens_out)
        return out * (1 - price.batch_discount) if batch else out

    return usd


class Worth:
    """The chance of resolving something, by score, from one pass's verdicts (and this session's reads)."""

    def __init__(self, scored: list[tuple[float, bool]], pass_name: str = "", store: Store | None = None,
                 judge: str | None = None) -> None:
        self.scores = sorted(scored)  # (score, resolved), by score
        self.pass_name = pass_name  # whose prior
        self._prompt: Prompt | None = None
        self._questions: dict[str, Question] = {}
        self._usd: CallUsd | None = None
        self._judge, self._share = "", 0.0
        self._tokens_in: dict[str, float] = {}  # fingerprint -> its first order's prompt, in tokens
        # what this pass's calls of each model gave out, as the store holds them (this session's as they come
        # back): model -> [tokens out, calls], read on from the last verdict row counted
        self._store, self._kind = store, judge
        self._out: dict[str, list[int]] = {}
        self._counted, self._stale = 0, True

    @classmethod
    def of_pass(cls, store: Store, pass_name: str, judge: str | None) -> Worth:
        """From the pass's stored verdicts that kept a score (those before migration 0019 kept none)."""
        where, args = of_judge("pass = ? AND model != ? AND score IS NOT NULL", [pass_name, MECHANICAL], judge)
        rows = store.db.execute(f"SELECT score, is_yes AND NOT reverted FROM verdicts WHERE {where}", args)
        return cls([(float(s), bool(r)) for s, r in rows], pass_name, store, judge)

    def pricing(self, prompt: Prompt, questions: Iterable[Question], usd: CallUsd, judge: str,
                audit_share: float) -> None:
        """How this round's questions are priced: their prompt, one call's price by size, the judge model and
        the share of a first reader's reads it audits."""
        self._prompt, self._usd, self._judge, self._share = prompt, usd, judge, audit_share
        self._questions.update({q.fingerprint: q for q in questions})

    def price(self, fingerprint: str, reader: str) -> float:
        """What a read of this question costs the pass: a call of `reader` with its own first-order prompt and,
        when the first reader reads, audit_share of a judge-model call of it (0 for a question not priced)."""
        q = self._questions.get(fingerprint)
        if q is None or self._prompt is None or self._usd is None:
            return 0.0
        if (tokens := self._tokens_in.get(fingerprint)) is None:
            tokens = (len(self._prompt.system) + len(self._prompt.render(q.orders[0]))) / CHARS_PER_TOKEN
            self._tokens_in[fingerprint] = tokens
        return self._usd(reader, tokens, self.tokens_out(reader)) + \
            (self._share * self._usd(self._judge, tokens, self.tokens_out(self._judge)) if reader != self._judge
             else 0.0)

    def tokens_out(self, model: str) -> float | None:
        """What a call of `model` in this pass gave out on average, its verdicts so far (None: no call yet).

        Measured as soon as the pass's first calls come back, the first session's included: by the time the
        rule holds a question back (after EXPLORE reads) the price is the one the next session starts from.
        """
        if self._stale and self._store is not None:
            where, args = of_judge("pass = ? AND model != ? AND calls > 0 AND rowid > ?",
                                   [self.pass_name, MECHANICAL, self._counted], self._kind)
            for model_, out, calls, last in self._store.db.execute(
                    f"SELECT model, sum(tokens_out), sum(calls), max(rowid) FROM verdicts WHERE {where} "
                    "GROUP BY model", args):
                counted = self._out.setdefault(model_, [0, 0])
                counted[0], counted[1] = counted[0] + out, counted[1] + calls
                self._counted = max(self._counted, last)
            self._stale = False
        out, calls = self._out.get(model, (0, 0))
        return out / calls if calls else None

    def chance(self, score: float) -> float:
        """P(resolve | score): the WINDOW verdicts nearest `score`, shrunk toward the prior at that score."""
        n = len(self.scores)
        i = bisect_left(self.scores, (score, False))
        lo, hi = i, i  # grow [lo, hi) toward the nearer neighbour until it holds WINDOW verdicts
        while hi - lo < min(WINDOW, n):
            if lo > 0 and (hi >= n or score - self.scores[lo - 1][0] <= self.scores[hi][0] - score):
                lo -= 1
            else:
                hi += 1
        yes = sum(r for _, r in self.scores[lo:hi])
        return (yes + PRIOR_READS * prior(self.pass_name, score)) / (hi - lo + PRIOR_READS)

    def hopeless(self, score: float) -> bool:
        """No true pair of the calibration data scored here (the prior is 0), and none read near it resolved."""
        return prior(self.pass_name, score) == 0 and self.chance(score) == 0

    def worth(self, score: float, price: float, value: float) -> bool:
        """A read at `score` is worth `price` when its chance of a resolution worth `value` pays for it; a pass's
        first EXPLORE reads are asked whatever their chance, unless they are hopeless."""
        if len(self.scores) < EXPLORE:
            return not self.hopeless(score)
        return self.chance(score) * value >= price

    def seen(self, score: float, resolved: bool) -> None:
        """A read at `score` came back: the curve learns it at once, and what its calls gave out is read anew."""
        insort(self.scores, (score, resolved))
        self._stale = True
