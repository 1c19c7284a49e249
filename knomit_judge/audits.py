"""Audits: the first reader measured. Which of its no's the judge model reads again, with what probability, and
what the readings say about the first reader's recall (docs/choices.md, "The first reader, measured").

Each session, every first-reader no of a pass gets an inclusion probability pi before a seeded draw:
- the session's top TOP no's by score: pi = 1 (the early catch of a miss at the top of the list);
- a uniform floor: each new no is drawn at the same rate, so the floor's audits are a uniform sample;
- a targeted share (stratum "target", or "pool" for an older no), spread over the new no's and the older ones still standing, by the square root of the
  chance of a miss at that score as past audits show it.
The draw is a hash of the session, the pass and the fingerprint: a rerun of the session draws the same audits.
Over a window of the pass's last sessions, the audits give an inverse-probability (Horvitz-Thompson) estimate of
the misses and of the recall, and the floor's audits alone a Clopper-Pearson 95% lower bound on the recall; the
judge model's readings of its yeses say how many it rejects. Either suspends it for the pass.

A suspended reader keeps reading a shadow sample of what the judge model reads (every question the judge model
says yes to, its session's first SHADOW_TOP no's and SHADOW_RATE of the rest, each with its pi), never acted on: its recall and precision measured again,
and the suspension lifts once they clear (Shadow.clears). Each session's record of the reader (store.audit_draws,
journalled) says whether it read or shadowed: the window is the reader's last run of reading sessions, the shadow
evidence the shadowing sessions since, so the state is a function of the journal and `rebuild` gives it back.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .store import Store

# a session's top no's by score: always audited
TOP = 2
# the pass's last sessions the estimate and the bound look back on
WINDOW = 10
# every new no has at least this chance of an audit
FLOOR_MIN = 0.0125
# floor misses the floor should expect when the recall sits at its target
EDGE_MISSES = 3
CONFIDENCE = 0.95  # of the lower bound
# floor-sampled no's the window needs before a bound is published
BOUND_MIN = 3
# first-reader yeses the judge model read before a rejection rate can suspend the reader
REJECT_MIN = 5
# of those, the share rejected that suspends it
REJECT_SHARE = 0.8
# while suspended: of the judge model's no's, the share the first reader reads in its shadow
SHADOW_RATE = 0.1
# ... and the session's first no's of the judge model, read in the shadow for sure
SHADOW_TOP = 2
# shadow reads of the judge model's yeses, and of its no's, before the evidence can lift a suspension
LIFT_MIN = 3
# strata of the seeded draw: the estimate reads these alone
DESIGN = ("top", "target", "floor")
# width, in score, of the miss-chance fit
KERNEL = 0.05


def uniform(*parts: str) -> float:
    """A number in [0, 1) fixed by its parts: the seeded draw, reproducible from what the session recorded."""
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:13], 16) / 16**13


def floor_draw(session: str, pass_name: str, fp: str) -> float:
    """The uniform number a no's floor draw compares with the floor rate, in the session that read it."""
    return uniform("floor", session, pass_name, fp)


def target_draw(session: str, pass_name: str, fp: str) -> float:
    """The uniform number a no's targeted draw compares with its targeted share, in a given session."""
    return uniform("target", session, pass_name, fp)


def shadow_pi(session: str, pass_name: str, fp: str, strong_yes: bool, nos: int = 0) -> float:
    """A suspended reader's shadow sample: the inclusion probability of a question the judge model just read, or 0
    when the seeded draw leaves it out. Every yes of the judge model (pi = 1: they are rare, and they are what its
    recall is measured on); of its no's (what its precision is measured on) the session's first SHADOW_TOP (`nos`:
    how many it has shadowed so far), so every shadowing session reads some, and SHADOW_RATE of the rest."""
    if strong_yes or nos < SHADOW_TOP:
        return 1.0
    return SHADOW_RATE if uniform("shadow", session, pass_name, fp) < SHADOW_RATE else 0.0


@dataclass
class MissFit:
    """The chance of a miss at a score, fit on past design audits by a kernel-weighted, inverse-probability
    weighted miss rate; with no miss seen yet, the score itself stands in (SUPG's square-root weights)."""

    rows: list[tuple[float, bool, float]] = field(default_factory=list)  # (score, miss, pi)

    def chance(self, score: float) -> float:
        if not any(m for _, m, _ in self.rows):
            return min(max(score, 1e-3), 1.0)
        weights = [(math.exp(-(((score - s) / KERNEL) ** 2) / 2) / max(pi, 1e-6), m) for s, m, pi in self.rows]
        total = sum(w for w, _ in weights)
        # a pseudo-audit at a small miss rate: a score no audit has come near keeps a small chance
        prior = 0.01
        return (sum(w for w, m in weights if m) + prior * 0.05) / (total + prior)

    def weight(self, score: float) -> float:
        return math.sqrt(self.chance(score))


def budget(reads: int, share: float) -> float:
    """Audits a session expects for a pass: judge.audit_share of its first reads, and at least TOP."""
    return max(float(TOP), share * reads) if reads else 0.0


def floor_rate(target: float, confirmed: int, room: float, new: int) -> float:
    """The floor's rate: enough that, were the recall at its target, the floor would expect EDGE_MISSES misses
    over the window (from the window's confirmed yeses, i.e. its positive rate), within half the room the
    budget leaves, and never below FLOOR_MIN."""
    needed = EDGE_MISSES * target / (max(confirmed, 1) * (1 - target)) / WINDOW if target < 1 else 1.0
    affordable = room / 2 / new if new else 0.0
    return min(1.0, max(FLOOR_MIN, min(needed, affordable)))


@dataclass
class Draw:
    """One pass's audits in one session: each no's pi and stratum, and which were drawn."""

    floor: float = 0.0
    pi: dict[str, float] = field(default_factory=dict)  # fingerprint -> inclusion probability
    # fingerprint -> top | target | floor
    stratum: dict[str, str] = field(default_factory=dict)
    # fingerprint -> the session whose first read gave the no
    born: dict[str, str] = field(default_factory=dict)
    # fingerprints drawn, highest pi first
    picked: list[str] = field(default_factory=list)
    expected: float = 0.0  # the sum of pi
    new: int = 0
    standing: int = 0
    # no's given pi = 1 as the top of the list
    tops: int = 0


def draw(
    session: str,
    pass_name: str,
    new: list[tuple[str, float]],
    standing: list[tuple[str, float, str]],
    *,
    reads: int,
    share: float,
    target: float,
    confirmed: int,
    fit: MissFit,
    spent: float = 0.0,
    tops: int = TOP,
) -> Draw:
    """Fix every no's pi, then draw. `new`: this round's first-reader no's (fingerprint, score); `standing`:
    older no's the judge model has not read (fingerprint, score, session that read it), under the same rule
    save the top and the floor, which each no meets once, in its own session. A session's later rounds draw
    with what its earlier ones left: `spent` (their pi summed) and `tops` (top places left)."""
    d = Draw(new=len(new), standing=len(standing))
    total = max(0.0, budget(reads, share) - spent)
    if not new and (not standing or total <= 0):
        return d
    ranked = sorted(new, key=lambda fs: -fs[1])
    top, rest = ranked[: max(0, tops)], ranked[max(0, tops) :]
    # what the share buys past the top: a session that read a few no's spends its top places and nothing more
    room = max(0.0, min(total, share * reads - spent) - len(top))
    # with every new no at the top, each was read for sure: a floor of 1, as far as the bound's frame goes
    d.floor = floor_rate(target, confirmed, room, len(rest)) if rest else 1.0
    targeted = max(0.0, room - d.floor * len(rest))
    pool = [(fp, s, session) for fp, s in rest] + list(standing)
    weights = {fp: fit.weight(s) for fp, s, _ in pool}
    share_of = spread(targeted, weights)
    for fp, _ in top:
        d.pi[fp], d.stratum[fp], d.born[fp] = 1.0, "top", session
    for fp, _, born in pool:
        f = d.floor if born == session else 0.0
        t = share_of.get(fp, 0.0)
        d.pi[fp] = 1 - (1 - f) * (1 - t)
        d.born[fp] = born
        if f and floor_draw(session, pass_name, fp) < f:
            # in the uniform sample, whatever the targeted draw says
            d.stratum[fp] = "floor"
        elif target_draw(session, pass_name, fp) < t:
            # an older no drawn again: it finds the miss, but the estimate reads each no's draw in its own session
            d.stratum[fp] = "target" if born == session else "pool"
    d.picked = sorted(d.stratum, key=lambda fp: -d.pi[fp])
    d.expected = round(sum(d.pi.values()), 6)
    d.tops = len(top)
    return d


def spread(total: float, weights: dict[str, float]) -> dict[str, float]:
    """Shares proportional to the weights summing to `total`, none above 1 (the excess spread over the rest)."""
    out: dict[str, float] = {}
    left, open_ = total, dict(weights)
    while left > 1e-12 and open_:
        mass = sum(open_.values())
        if mass <= 0:
            break
        full = {fp for fp, w in open_.items() if left * w / mass >= 1}
        if not full:
            out.update({fp: left * w / mass for fp, w in open_.items()})
            break
        for fp in full:
            out[fp] = 1.0
            del open_[fp]
        left -= len(full)
    return out


def upper_binomial(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound on a rate with k events in n draws."""
    if n <= 0 or k >= n:
        return 1.0

    # P(X <= k) for X ~ Binomial(n, p)
    def cdf(p: float) -> float:
        if p <= 0:
            return 1.0
        if p >= 1:
            return 0.0
        lp, lq = math.log(p), math.log1p(-p)
        return sum(
            math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
            for i in range(k + 1)
        )

    lo, hi = 0.0, 1.0
    # bisection: cdf falls as p rises
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > 1 - confidence else (lo, mid)
    return hi


@dataclass
class Estimate:
    """What the window's audits say about a pass's first reader."""

    # questions the first reader answered in the window
    reads: int = 0
    # its no's the judge model read again
    audits: int = 0
    misses: int = 0  # of those, yeses
    # inverse-probability weighted, over the window's no's
    misses_estimated: float | None = None
    recall: float | None = None
    # None: not enough audits to bound
    recall_low: float | None = None
    # its yeses the judge model confirmed
    confirmed: int = 0
    # its yeses the judge model did not
    rejected: int = 0
    # what the judge model's readings of the rejected yeses cost
    rejected_usd: float = 0.0
    # no's in the window's uniform sample
    floor_sample: int = 0

    @property
    def read_recall(self) -> float | None:
        """The recall over the no's the judge model has read: exact once it has read them all."""
        return self.confirmed / (self.confirmed + self.misses) if self.confirmed + self.misses else None

    def reason(self, target: float, all_read: bool = False) -> str:
        """Why the evidence suspends the first reader, or "" when it does not. `all_read`: the judge model has read
        every no of the window still standing, so the misses are counted, not estimated: the evidence clears when
        the counted recall meets the target."""
        if self.recall is not None and self.misses and self.recall < target:
            if all_read and self.read_recall is not None and self.read_recall >= target:
                return ""
            return (
                f"estimated recall {self.recall:.2f} below the target {target:g} "
                f"({self.misses} miss(es) in {self.audits} audits over its last {WINDOW} reading sessions)"
            )
        return self.rejecting()

    def rejecting(self) -> str:
        """Why the judge model's readings of its yeses suspend the first reader, or "": REJECT_MIN rejected at least,
        REJECT_SHARE of its yeses."""
        if self.rejected >= REJECT_MIN and self.rejected >= REJECT_SHARE * (self.rejected + self.confirmed):
            return (
                f"the judge model rejected {self.rejected} of its {self.rejected + self.confirmed} yeses, "
                f"${self.rejected_usd:.4f} spent on them"
            )
        return ""

    def judged_yes(self, confirmed: bool, usd: float | None) -> None:
        """The judge model read one of its yeses this session: counted at once, so the session that shows a reader
        whose yeses it rejects suspends it."""
        self.reads += 1
        if confirmed:
            self.confirmed += 1
        else:
            self.rejected += 1
            self.rejected_usd = round(self.rejected_usd + (usd or 0.0), 6)

    def line(self, target: float) -> str:
        """The estimate and the bound as the pass line and `status` say them."""
        if not self.reads and not self.audits:
            return ""
        return (
            f"first reader over its last {WINDOW} reading sessions: "
            f"{recall_text(self.recall, self.misses_estimated)}, {bound_text(self.recall_low)}, target {target:g}"
        )


def recall_text(recall: float | None, misses_estimated: float | None, found: int | None = None) -> str:
    """The estimated recall as the pass line and `status` say it (`found`: the misses the audits found)."""
    if recall is None:
        return "no estimate yet"
    misses = (
        f"~{misses_estimated or 0.0:.1f}"
        if found is None
        else f"found {found}, estimated {misses_estimated or 0.0:.1f}"
    )
    return f"recall ~{recall:.2f} (misses {misses})"


def bound_text(recall_low: float | None, labelled: bool = True) -> str:
    """The recall's lower bound as every report says it (`labelled` False: the number alone, for a table's column
    headed "lower bound"), or why there is none."""
    if recall_low is None:
        return "not enough audits to bound"
    return f"{CONFIDENCE:.0%} lower bound {recall_low:.2f}" if labelled else f"{recall_low:.2f}"


def estimate_from(
    nos: list[tuple[str, str]],
    floors: dict[str, float],
    audits: list[dict[str, Any]],
    confirmed: int,
    pass_name: str,
    *,
    reads: int = 0,
    rejected: int = 0,
    rejected_usd: float = 0.0,
) -> Estimate:
    """The estimate and bound from the window's record. `nos`: (session, fingerprint) of each first-reader no
    read in a session that drew (`floors`: session -> floor rate); `audits`: rows with fingerprint, born,
    stratum, pi, miss; `confirmed`: first-reader yeses the judge model confirmed."""
    e = Estimate(
        reads=reads or len(nos) + confirmed + rejected,
        confirmed=confirmed,
        rejected=rejected,
        rejected_usd=round(rejected_usd, 6),
    )
    e.audits = len(audits)
    e.misses = sum(bool(a["miss"]) for a in audits)
    design = [a for a in audits if a.get("stratum") in DESIGN and a.get("born") in floors and a.get("pi")]
    frame = [(s, fp) for s, fp in nos if s in floors]
    if not frame and not confirmed:
        return e
    e.misses_estimated = round(sum(bool(a["miss"]) / a["pi"] for a in design), 3)
    positives = confirmed + e.misses_estimated
    e.recall = round(confirmed / positives, 4) if positives else None
    if not frame:
        return e
    f_min = min(floors[s] for s, _ in frame)
    # every no whose floor number falls below the window's lowest floor rate was drawn, in its own session, at
    # a rate at least that: together a uniform sample of the window's no's at rate f_min
    sample = [(s, fp) for s, fp in frame if floor_draw(s, pass_name, fp) < f_min]
    read = {(a["born"], a["fingerprint"]): bool(a["miss"]) for a in design}
    # a drawn no the judge model did not read counts as a miss
    k = sum(read.get(x, True) for x in sample)
    e.floor_sample = len(sample)
    if len(sample) < BOUND_MIN and confirmed:
        # not enough audits to bound
        return e
    high = max(upper_binomial(k, len(sample)) * len(frame), float(sum(read.values())))
    e.recall_low = round(confirmed / (confirmed + high), 4) if confirmed + high else None
    return e


def fit(store: Store, pass_name: str, model: str) -> MissFit:
    """The miss-chance fit from the pass's past design audits of this first reader."""
    return MissFit(store.audit_scores(pass_name, model, DESIGN))


@dataclass
class Shadow:
    """What a suspended reader's shadow sample says: its reads of the judge model's yeses (hits: it said yes too),
    and of its no's (rejected: it said yes, weighted by 1/pi)."""

    reads: int = 0
    # the judge model's yeses the shadow read (each at pi = 1)
    positives: int = 0
    hits: int = 0
    # the judge model's no's the shadow read (each at SHADOW_RATE)
    negatives: int = 0
    # of them, the first reader's yeses, each weighted by 1/pi: its rejected yeses estimated
    rejected: float = 0.0
    sessions: int = 0

    def recall(self) -> float | None:
        return self.hits / self.positives if self.positives else None

    def clears(self, target: float) -> bool:
        """The evidence that lifts a suspension: LIFT_MIN of the judge model's yeses read with a recall at the
        target at least, and LIFT_MIN of its no's read with its rejected yeses under REJECT_SHARE of its yeses (the
        two rules that suspend, met again on a fresh sample)."""
        recall = self.recall()
        return (
            self.positives >= LIFT_MIN
            and recall is not None
            and recall >= target
            and self.negatives >= LIFT_MIN
            and self.rejected < REJECT_SHARE * (self.rejected + self.hits)
        )

    def needs(self, target: float) -> str:
        """Which evidence would lift the suspension, with what the shadow has read so far (status says it)."""
        if self.clears(target):
            return (
                "cleared: the shadow sample meets the target, so the next session reads first again "
                f"({self.hits} of {self.positives} yeses, {self.negatives} no's read)"
            )
        recall = self.recall()
        return (
            f"lifts once its shadow reads hold {LIFT_MIN} or more of the judge model's yeses with a recall of "
            f"{target:g} or more (now {self.hits} of {self.positives}"
            + (f", {recall:.2f}" if recall is not None else "")
            + f"), and {LIFT_MIN} or more of its no's "
            f"with its own yeses there under {REJECT_SHARE:.0%} of its yeses (now {self.negatives} read, "
            f"~{self.rejected:.1f} rejected)"
        )


@dataclass
class Standing:
    """Where a pass's first reader stands at a session's start: its window's estimate, why the window suspends it
    ("" when it reads), the shadow evidence since, and whether that evidence lifts the suspension now (the session
    then reads, and a new window begins with it)."""

    estimate: Estimate = field(default_factory=Estimate)
    suspended: str = ""
    shadow: Shadow = field(default_factory=Shadow)
    lifted: bool = False

    def lifts_when(self, target: float) -> str:
        """While suspended, which evidence lifts it (or that it has); "" while it reads."""
        return self.shadow.needs(target) if self.suspended else ""


def windows(store: Store, pass_name: str, model: str) -> tuple[list[str], list[str], bool]:
    """The reader's window, its last run of reading sessions (newest first, at most WINDOW), and the shadowing
    sessions after that run (newest first, at most WINDOW); and whether its last recorded session shadowed."""
    runs = store.reader_runs(pass_name, model)  # (session, state), oldest first
    shadow: list[str] = []
    while runs and runs[-1][1] == "shadow":
        shadow.append(runs.pop()[0])
    reading: list[str] = []
    while runs and runs[-1][1] != "shadow" and len(reading) < WINDOW:
        reading.append(runs.pop()[0])
    return reading, shadow[:WINDOW], bool(shadow)


def estimate(store: Store, pass_name: str, model: str, window: list[str] | None = None) -> Estimate:
    """The estimate and bound for a pass's first reader over its window (its last run of reading sessions)."""
    window = windows(store, pass_name, model)[0] if window is None else window
    if not window:
        return Estimate()
    floors = store.audit_floors(pass_name, model, window)
    nos = store.first_nos(pass_name, model, window)
    audits = store.audit_rows(pass_name, model, window)
    confirms = [a for a in audits if a["kind"] == "confirm" and a["session"] in window]
    confirmed = sum(a["first_answer"] == a["strong_answer"] for a in confirms)
    rejected = [a for a in confirms if a["first_answer"] != a["strong_answer"]]
    return estimate_from(
        nos,
        floors,
        [a for a in audits if a["kind"] == "audit"],
        confirmed,
        pass_name,
        reads=len(nos) + len(confirms),
        rejected=len(rejected),
        rejected_usd=sum(a["cost_usd"] or 0.0 for a in rejected),
    )


def shadow(store: Store, pass_name: str, model: str, sessions: list[str]) -> Shadow:
    """What the shadow reads of these sessions say (store.audit_rows of kind "shadow")."""
    out = Shadow(sessions=len(sessions))
    for a in store.audit_rows(pass_name, model, sessions) if sessions else []:
        if a["kind"] != "shadow" or a["session"] not in sessions:
            continue
        out.reads += 1
        if a["strong_yes"]:
            out.positives += 1
            out.hits += bool(a["first_yes"])
        else:
            out.negatives += 1
            out.rejected += bool(a["first_yes"]) / (a["pi"] or 1.0)
    return out


def standing(store: Store, pass_name: str, model: str, target: float, all_read: bool = False) -> Standing:
    """Where the reader stands at a session's start: suspended while its window's evidence says so (Estimate.reason),
    unless the shadow sample read since has cleared the target (Shadow.clears), which lifts it: the session then
    reads, and a new window begins with it."""
    reading, shadowed, _ = windows(store, pass_name, model)
    e = estimate(store, pass_name, model, reading)
    why = e.reason(target, all_read)
    evidence = shadow(store, pass_name, model, shadowed)
    return Standing(e, why, evidence, lifted=bool(why) and evidence.clears(target))


def published(e: Estimate, model: str | None, state: str, target: float, at: Standing | None = None) -> dict[str, Any]:
    """One pass's entry of `status --json`'s first_reader object (and calibrate's, the report's): the window's
    figures, and while suspended why, and which evidence would lift it (`shadow`: what its shadow sample read)."""
    at = at or Standing()
    ev = at.shadow
    return {
        "model": model or None,
        "state": state,
        "reads": e.reads,
        "audits": e.audits,
        "misses": e.misses,
        "misses_estimated": e.misses_estimated,
        "recall": e.recall,
        "recall_low": e.recall_low,
        "target": target,
        "suspended_because": at.suspended or None,
        "lifts_when": at.lifts_when(target) or None,
        "shadow": {
            "sessions": ev.sessions,
            "reads": ev.reads,
            "positives": ev.positives,
            "hits": ev.hits,
            "negatives": ev.negatives,
            "rejected_estimated": round(ev.rejected, 3),
        },
    }


def first_readers(
    store: Store, config: Config, passes: Iterable[str], states: Mapping[str, str | None] | None = None
) -> dict[str, dict[str, Any]]:
    """`status --json`'s first_reader object: each judged pass's first reader, its state (as its last session
    had it, in `states`, else from the evidence), its window, and what would lift a suspension."""
    model = config.models().get("judge.first_reader")
    target = config.judge.first_reader_recall
    out = {}
    for name in passes:
        if model is None:
            out[name] = published(Estimate(), None, "off", target)
            continue
        at = standing(store, name, model, target)
        state = (states or {}).get(name) or ("suspended" if at.suspended and not at.lifted else "reading")
        if state == "suspended" and not at.suspended:
            # suspended in its last session by what it showed there: the same rule, read on its window now
            at.suspended = at.estimate.reason(target) or "suspended in its last session"
        out[name] = published(at.estimate, model, state, target, at)
    return out


def status_lines(readers: dict[str, dict[str, Any]]) -> list[str]:
    """The first reader's lines of `status`: per pass, its state, the estimate and the bound, and while suspended
    which evidence would lift it."""
    out = []
    for name, f in readers.items():
        if f["state"] == "off":
            continue
        est = recall_text(f["recall"], f["misses_estimated"], found=f["misses"])
        low = bound_text(f["recall_low"])
        out.append(
            f"first reader on {name}: {f['model']} {f['state']}; {f['reads']} reads, {f['audits']} audits "
            f"over its last {WINDOW} reading sessions; {est}, {low}; target {f['target']:g}"
            + (f"; suspended: {f['suspended_because']}" if f.get("suspended_because") else "")
            + (f"; {f['lifts_when']}" if f.get("lifts_when") else "")
        )
    return out
