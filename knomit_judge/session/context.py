"""What one review session shares, typed: its options, its result, the context, and each judged pass's run.

The bottom of the session package: every session module takes a `Context` (what the session's passes share) or a
`PassRun` (one pass in this session: its result, throttle and balance, first reader, what is fresh for it) from
here, and a pass reads the context only through passes.base.Session (config, corpus, embedder, lines).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import audits
from ..batches import Batches
from ..candidate_lists import CandidateList
from ..config import Config
from ..corpus import Corpus, CorpusReport
from ..embeddings import Embedder
from ..errors import BadFact
from ..file_index import FileIndex
from ..gitops import Applier
from ..judge import BackendKind, Judge, JudgeSpec, Outcome, OutcomeKind, make_backend
from ..models import Lineup
from ..passes import JUDGED_PASSES, Candidate
from ..passes.base import DESCRIBE, Pass
from ..passes.registry import answered
from ..proposals import ProposalsReport
from ..spend import Caps
from ..status import PassResult, total_cost
from ..store import Store
from ..sync import SyncReport
from ..throttle import Allowance, ThrottleState, assess, terms
from ..verdicts import Journal
from ..worth import Worth

ANTHROPIC = JudgeSpec("anthropic")
# a session's rounds: a pass is asked again while its applied decisions make new questions
MAX_ROUNDS = 4
# unavailable answers in a row after which the judge model reads the rest of the session alone
DOWN_AFTER = 3
# an Outcome's kind: the balance or a dollar cap could not pay the reading (its error says which)
HELD: OutcomeKind = "held"


@dataclass
class ReviewOptions:
    dry_run: bool = False
    passes: tuple[str, ...] = JUDGED_PASSES
    # --judge; its str form ("scripted:FILE", the CLI's and daemon's) is parsed here
    judge: JudgeSpec = ANTHROPIC
    # once set, nothing new is offered; judgments in flight finish
    stop: threading.Event | None = None
    # once set, a long step (an embedding, a neighbour search, the exact duplicates) ends the session at once, as
    # Ctrl-C does; what it finished is kept (interrupts.py). The daemon's SIGTERM sets it with stop.
    interrupt: threading.Event | None = None
    # submit offered questions as a Message Batch; None: judge.mode decides
    batch: bool | None = None
    # review --metrics-file: wins over [metrics] textfile
    metrics_file: Path | None = None

    def __post_init__(self) -> None:
        # once, here: a bad --judge fails before a session starts
        if isinstance(self.judge, str):
            self.judge = JudgeSpec.parse(self.judge)


@dataclass
class SessionResult:
    session: str
    dry_run: bool
    commits: list[str] = field(default_factory=list)
    passes: dict[str, PassResult] = field(default_factory=dict)
    problems: list[BadFact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # dry run: what would be offered, with evidence (JSON for --json)
    plan: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # dry run: questions, calls, estimate_usd
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Message Batches submitted, waiting or collected
    batches: list[dict[str, Any]] = field(default_factory=list)
    # a batch session: its dry-run estimate is at batch prices (not in --json)
    batch_prices: bool = False
    # texts embedded this session (0 when nothing changed)
    embedded: int = 0
    # fact files parsed this session (unchanged ones come from the file index)
    parsed: int = 0
    # what was read: no fact read is broken, never a silent zero
    corpus: CorpusReport | None = None
    # spend.Spend.json() after the session: today, 7 and 30 days, per pass
    spend: dict[str, Any] | None = None
    # the metrics file could not be written after the session: exit 1
    metrics_error: str | None = None
    # [git] remote set: what was merged before the session and pushed after
    sync: SyncReport | None = None
    # [apply] mode = "propose": what it did with the proposals branch
    proposals: ProposalsReport | None = None
    # dry run: "key 'model'" of each model with no price
    unpriced: list[str] = field(default_factory=list)
    # dry run: a real session would exit 2 on a retired or unknown model (see the notes)
    stops: bool = False

    @property
    def broken(self) -> bool:
        return (
            any(r.state == "broken" for r in self.passes.values())
            or (self.corpus is not None and self.corpus.state == "broken")
            or (self.sync is not None and self.sync.state == "broken")
        )

    @property
    def cost_usd(self) -> float | None:
        return total_cost(self.passes.values())

    @property
    def estimate_usd(self) -> float | None:
        """A dry run's estimated cost over every pass; None when any pass's is unknown (a model with no price)."""
        usd = [e["estimate_usd"] for e in self.estimates.values()]
        return None if None in usd else round(sum(usd), 6)

    def text_lines(self) -> list[str]:
        return [
            *([self.sync.line()] if self.sync else []),
            *([self.proposals.line()] if self.proposals else []),
            *([self.corpus.line()] if self.corpus else []),
            *(r.line() for r in self.passes.values()),
        ]

    def summary(self) -> str:
        """A dry run's first line: what a real session would ask and cost, above the plan it lists."""
        # said first: a $0.0000 would read as fine
        if self.corpus is not None and self.corpus.state == "broken":
            return (
                "dry run: broken: no fact read (see the corpus line), so a real session asks nothing and exits 1; "
                "no judge call was made and nothing was written but derived caches"
            )
        asked = {n: e for n, e in self.estimates.items() if n != DESCRIBE}
        questions = sum(e["questions"] for e in asked.values())
        calls = sum(e["calls"] for e in asked.values())
        lines = self.estimates.get(DESCRIBE)
        if self.estimate_usd is not None:
            usd = f"about ${self.estimate_usd:.4f}"
        # named, with what a real session does about it
        elif self.unpriced:
            usd = (
                f"unknown (no price for the model): {', '.join(self.unpriced)} "
                f"{'has' if len(self.unpriced) == 1 else 'have'} none, so a real session exits 2"
            )
        else:
            usd = "unknown (a real session exits 2 before it asks: see the notes)" if self.stops else "unknown"
        exact = self.passes.get("exact")
        retract = sum(len(i["evidence"]["retract"]) for i in self.plan.get("exact", []))
        return (
            f"dry run: would ask {questions} question(s) = {calls} call(s)"
            + (f", and {lines['calls']} describe request(s) for lines" if lines else "")
            + (
                f", retract {retract} exact duplicate(s) in {exact.offered} group(s) without a call"
                if retract and exact
                else ""
            )
            + f", {usd}"
            + " at batch prices" * self.batch_prices
            + "; no judge call was made and nothing was written but derived caches"
        )

    def json(self) -> dict[str, Any]:
        passes = {name: r.json() for name, r in self.passes.items()}
        if self.dry_run:
            # exact duplicates never call a judge
            for name, r in passes.items():
                r["estimate_usd"] = self.estimates[name]["estimate_usd"] if name in self.estimates else 0.0
        return {
            "session": self.session,
            "dry_run": self.dry_run,
            "commits": self.commits,
            "passes": passes,
            "cost_usd": self.cost_usd,
            "problems": [{"path": p.path, "line": p.line, "reason": p.reason} for p in self.problems],
            "notes": self.notes,
            "batches": self.batches,
            "embedded": self.embedded,
            "parsed": self.parsed,
            **({"corpus": self.corpus.json()} if self.corpus else {}),
            **({"spend": self.spend} if self.spend is not None else {}),
            **({"metrics_error": self.metrics_error} if self.metrics_error else {}),
            **({"sync": self.sync.json()} if self.sync is not None else {}),
            **({"proposals": self.proposals.json()} if self.proposals is not None else {}),
            **({"plan": self.plan, "estimate_usd": self.estimate_usd} if self.dry_run else {}),
        }


@dataclass
class FirstReader:
    """The first reader of one pass in this session (readers.py decides it once): whether it reads, what it did."""

    # None: the judge model reads alone
    model: str | None
    # why it does not read this session (the evidence of audits.Estimate.reason)
    suspended: str = ""
    # its no's the judge model has not read: fp -> session
    standing: dict[str, str] = field(default_factory=dict)
    # this session's no's, among which audits are drawn
    pending: list[Candidate] = field(default_factory=list)
    # its standing no's among the candidates met since the last draw: drawn among too
    standing_to_draw: list[Candidate] = field(default_factory=list)
    # questions it refused: the judge model reads them
    refused: set[str] = field(default_factory=set)
    estimate: audits.Estimate = field(default_factory=audits.Estimate)
    target: float = 0.0  # judge.first_reader_recall
    # its unavailable answers in a row this session
    unavailable_streak: int = 0
    # questions handed to the judge model this session, by why
    handovers: dict[str, int] = field(default_factory=lambda: {"unavailable": 0, "refused": 0})
    # the session's draws so far, over its rounds
    drawn: audits.Draw = field(default_factory=audits.Draw)
    # the miss-chance fit, read once a round
    fit: audits.MissFit = field(default_factory=audits.MissFit)
    # where it stood at the session's start
    at: audits.Standing = field(default_factory=audits.Standing)
    # suspended during this session, by what its yeses showed
    midway: bool = False
    # questions in a row none of whose readings came back (unavailable), this session
    failing: int = 0
    # no's of the judge model its shadow sample has read this session
    shadow_nos: int = 0

    @property
    def reads(self) -> bool:
        return bool(self.model) and not self.suspended

    @property
    def shadowing(self) -> bool:
        """Suspended from the session's start: it reads its shadow sample (audits.SHADOW_RATE), never acted on."""
        return bool(self.model) and bool(self.suspended) and not self.midway

    @property
    def state(self) -> str:
        return "off" if not self.model else "suspended" if self.suspended else "reading"

    @property
    def askable(self) -> set[str]:
        """Answered questions asked again this session: a suspended reader's standing no's."""
        return set(self.standing) if self.suspended else set()

    def reads_first(self, fp: str) -> bool:
        """Whether it reads this question first: it reads, is not down this session, and never refused it."""
        return self.reads and self.unavailable_streak < DOWN_AFTER and fp not in self.refused

    def judged_yes(self, confirmed: bool, usd: float | None) -> None:
        """The judge model read one of its yeses: a reader whose yeses it mostly rejects is suspended at once
        (audits.Estimate.rejecting: REJECT_MIN of them, REJECT_SHARE of its yeses over its window and this session)."""
        self.estimate.judged_yes(confirmed, usd)
        if self.reads and (why := self.estimate.rejecting()):
            self.suspended, self.midway = why, True

    def add_standing_to_draw(self, candidates: CandidateList[Candidate], fps: list[str]) -> None:
        """Take the round's candidates that are its standing no's among those the audits are drawn from (a changed
        fingerprint is a new question: not among them)."""
        if self.model and self.standing:
            seen = {c.fingerprint for c in self.standing_to_draw}
            self.standing_to_draw += [
                candidates[i] for i, fp in enumerate(fps) if fp in self.standing and fp not in seen
            ]


@dataclass
class Freshness:
    """What changed since a pass's last session (freshness.py finds it once a session)."""

    # when that session ended (None: no session before this one)
    ended: str | None = None
    # the facts (alias: spellings) changed since it started
    fresh: set[str] = field(default_factory=set)
    # those changed since it ended, by a writer: owed their questions
    new: set[str] = field(default_factory=set)


@dataclass
class Describing:
    """What the describe step keeps over a session's rounds (describe.py); passes.base.DescribeStep is the step
    itself, as the scripted judge and the stored results read it."""

    # spelling -> its describe line (lines.py)
    lines: dict[str, str] = field(default_factory=dict)
    # spellings asked this session whose reply gave no line
    no_line: list[str] = field(default_factory=list)
    # (spelling, carriers) asked for a line this session
    keys_asked: set[tuple[str, str]] = field(default_factory=set)


class InFlight:
    """The readings with a model now in flight, over every pass: what they may cost at most (the dollar caps count
    it), how many (a count: a float sum of their reservations may not come back to 0 exactly), and a wait for one
    of them to end."""

    def __init__(self) -> None:
        self.usd = 0.0
        self.count = 0
        # set (and replaced) as each reading ends
        self._done = asyncio.Event()

    async def one_ended(self) -> None:
        """Wait until a reading now in flight ends (call only while `count`: one is)."""
        await self._done.wait()

    @asynccontextmanager
    async def reading(self, usd: float) -> AsyncIterator[None]:
        """One reading that may cost `usd` at most, in flight while the block runs."""
        self.usd += usd
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            self.usd = self.usd - usd if self.count else 0.0
            self._done.set()
            self._done = asyncio.Event()


@dataclass
class Context:
    """What one session's passes share (a pass reads only passes.base.Session of it); each pass's own state is
    its PassRun."""

    root: Path
    config: Config
    store: Store
    corpus: Corpus
    embedder: Embedder
    journal: Journal
    # None in a dry run: it commits nothing
    applier: Applier | None
    options: ReviewOptions
    # what the session did: its commits, problems, notes, each pass's line
    result: SessionResult
    clean: bool
    batches: Batches
    index: FileIndex
    # the session's dollar caps, with what the day and month spent before it
    caps: Caps
    # the models' lifecycles and dialects, read before the session
    lineup: Lineup
    # uncommitted files that are no fact: a decision that would write one waits
    dirty: frozenset[str] = frozenset()
    # [apply] mode = "propose": the proposals branch its decisions are committed on, and the verdicts waiting there
    # (never applied again by the session); "" commits them on the branch it reviews
    proposals: str = ""
    proposed: set[str] = field(default_factory=set)
    describing: Describing = field(default_factory=Describing)
    # the reads with a model now: the caps count them
    in_flight: InFlight = field(default_factory=InFlight)
    _judge: Judge | None = None

    @property
    def session(self) -> str:
        return self.result.session

    @property
    def lines(self) -> dict[str, str]:
        """Spelling -> its describe line: what the alias pass reads (passes.base.Session)."""
        return self.describing.lines

    @property
    def judge(self) -> Judge:
        # made when a question needs it: a caught-up session never loads the SDK
        if self._judge is None:
            self._judge = Judge(
                make_backend(self.options.judge, self.config, self.lineup, answers=answered()), self.store, self.config
            )
        return self._judge

    @property
    def judge_if_asked(self) -> Judge | None:
        """The judge, if a question needed it this session (None: it was never made)."""
        return self._judge

    @property
    def kind(self) -> BackendKind:
        """The kind of judge this session asks: only its own verdicts bind it (see verdicts.judge_of)."""
        return self.options.judge.kind

    def spent(self) -> float:
        """What the dollar caps count of this session: every call (unknown costs at their bound) and a batch to
        submit at its estimate; an unknown cost must not lift a cap."""
        gathered = self.batches.estimated_usd
        return gathered if self._judge is None else self._judge.spent() + gathered

    def measured_usd(self, model: str) -> float | None:
        """What a call of `model` cost: this session's mean of its calls, else the corpus's over the last 30 days
        (Caps.per_call); None when it was never called here."""
        mean = self._judge.mean_usd(model) if self._judge else None
        return mean if mean is not None else self.caps.per_call.get(model)

    def call_usd(self, model: str) -> float:
        """What a call of `model` should cost: its measured mean, its nominal price (a typical question's,
        config.QUESTION_TOKENS) until it has one; recorded replies cost nothing."""
        if not self.options.judge.anthropic:
            return 0.0
        measured = self.measured_usd(model)
        return measured if measured is not None else self.config.question_usd(model) or 0.0

    def capped(self, usd: float = 0.0, model: str | None = None) -> str | None:
        """Which dollar cap a read that may cost `usd` would cross, counted with what is spent and what the reads
        now with a model may still cost (in_flight), if any.

        One exception, so that a cap below a model's nominal price still lets its price be measured: the first
        call of a `model` never called on this corpus, with nothing else in flight and no cap reached yet, goes;
        it alone can cross the cap, by at most itself."""
        why = self.caps.reached(self.spent(), self.in_flight.usd + usd)
        if (
            why
            and model is not None
            and not self.in_flight.count
            and self.measured_usd(model) is None
            and not self.caps.reached(self.spent())
        ):
            return None
        return why

    async def cap_after_in_flight(self, usd: float, model: str) -> str | None:
        """The dollar cap a read of `model` that may cost `usd` would cross, once the reads in flight (counted at
        their most, so they may leave room) have ended; None: it may go now."""
        why = self.capped(usd, model)
        while why and self.in_flight.count:
            await self.in_flight.one_ended()
            why = self.capped(usd, model)
        return why

    def read_usd(self, judge: Judge, c: Candidate, one_order: bool = False) -> float:
        """The most a reading of `c` by `judge`'s model should cost: each call it may make (every order and sample)
        at call_usd."""
        return self.call_usd(judge.model) * self.config.judge.samples * (1 if one_order else judge.orders(c))

    def charge(self, r: PassResult) -> None:
        """The calls and cost of a pass (or the describe step) from the judge's ledger: the one record of them."""
        ledger = self._judge.ledgers.get(r.name) if self._judge else None
        if ledger:
            r.judge_calls, r.attempts, r.cost_usd = ledger.calls, ledger.attempts, ledger.cost_usd
            r.charged_usd = round(ledger.charged_usd, 6)


@dataclass
class PassRun:
    """One judged pass in one session: the pass, its status line, its throttle state and live balance, its first
    reader, what is fresh for it and what it met. A round, its asking, its readers and its rereads take it alone."""

    p: Pass
    ctx: Context = field(repr=False)
    result: PassResult
    throttle: ThrottleState
    allowance: Allowance
    freshness: Freshness = field(default_factory=Freshness)
    # the fingerprints met this session, over its rounds
    seen: set[str] = field(default_factory=set)
    # its first reader, once its first round decided it (readers.py)
    decided_reader: FirstReader | None = None

    @classmethod
    def open(cls, ctx: Context, p: Pass, freshness: Freshness | None = None) -> PassRun:
        """The pass's run in this session: its throttle state and balance from its stored verdicts, priced as this
        session's judge pays (the scripted judge has no price: its balance counts questions, each worth one)."""
        money = terms(ctx.config, ctx.kind)
        throttle = assess(ctx.store, p.name, money, ctx.kind)
        worth = Worth.of_pass(ctx.store, p.name, ctx.kind, prior=p.prior) if money.unit == "usd" else None
        allowance = Allowance(throttle, money, worth)
        # priced as this pass's calls of each model cost, measured as they come in
        if worth is not None:
            worth.pricing(ctx.config.judge.model, allowance.price, ctx.config.judge.audit_share)
        return cls(p, ctx, PassResult(p.name), throttle, allowance, freshness or Freshness())

    @property
    def name(self) -> str:
        return self.p.name

    @property
    def reader(self) -> FirstReader:
        """Who reads the pass's questions first this session (decided in its first round)."""
        assert self.decided_reader is not None, "the first reader is decided in the pass's first round (reader_of)"
        return self.decided_reader

    async def ask(self, c: Candidate, judge: Judge, *, one_order: bool = False, offered: bool = True) -> Outcome:
        """One reading of `c` by `judge`'s model, charged to that model when it is made: asked only if the pass's
        balance (for a question offered: its offer's reservation, topped up) and the dollar caps (with every reading
        now with a model) can pay it at that model's price, else an Outcome of kind HELD saying which could not.
        Not `offered` (an audit, a shadow read): the caps alone hold it, and the balance is charged as it is made. A
        reading whose replies are in the cache or came in a batch makes no call to start with: nothing holds it."""
        price = self.allowance.price(judge.model)
        free = not judge.needs_call(self.p, c, one_order)
        if offered and not free and not self.allowance.cover(c.fingerprint, price):
            return Outcome(kind=HELD, error="balance spent")
        usd = 0.0 if free else self.ctx.read_usd(judge, c, one_order)
        if not free and (why := await self.ctx.cap_after_in_flight(usd, judge.model)):
            return Outcome(kind=HELD, error=why)
        async with self.ctx.in_flight.reading(usd):
            out = await judge.ask(self.p, c, one_order=one_order)
        # the calls made now: a batch result was paid when it was submitted
        if offered:
            self.allowance.spend(c.fingerprint, out.made * price)
        else:
            self.allowance.charge(out.made * price)
        return out
