"""The judge client: bounded, timed, retried, sampled, position-swapped, cached, and costed.

A backend turns one prompt into one reply text (the Anthropic Messages API, asked
in the dialect each model accepts for a reply in the contract's schema (models.py), or
recorded replies for the demo and tests). The Judge turns a candidate into an Outcome: a verdict's answer,
or *unavailable* / *unparsed* / *refused*, which are never verdicts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from .config import Config
from .cost import UNKNOWN, Cost
from .errors import ConfigError, JudgeRefused, Refused, Unavailable, Unparsed
from .jsonl import dumps
from .limiter import QuestionClock, question_clock
from .models import Lineup
from .prompts import Prompt
from .scripted import Answerable, ScriptedBackend
from .store import Store
from .transport import AnthropicBackend, Completion

# A reply read by a pass's strict parser: (answer, rationale, payload).
Reply: TypeAlias = tuple[str, str, dict[str, Any] | None]


class JudgedPass(Protocol):
    """What the judge and batches use of a pass: its name, prompt, recoverable default and strict parser.

    passes.base sits a layer above, so the judge names only this much; its Pass Protocol is a superset.
    """

    @property
    def name(self) -> str: ...
    @property
    def default(self) -> str: ...
    @property
    def prompt(self) -> Prompt: ...
    def parse(self, text: str) -> Reply: ...


@runtime_checkable
class NamesASide(Protocol):
    """A pass whose answer names a side as one order shows it (prune's `redundant`)."""

    def in_subject_terms(
        self, answer: str, payload: dict[str, Any] | None, subject: dict[str, Any], position: int
    ) -> tuple[dict[str, Any] | None, str]: ...


class JudgedCandidate(Protocol):
    """What the judge reads of a candidate: its subject, its fingerprint and the evidence of each order."""

    @property
    def subject(self) -> dict[str, Any]: ...
    @property
    def fingerprint(self) -> str: ...
    # the evidence, as the prompt renders it
    @property
    def orders(self) -> Sequence[Any]: ...


@dataclass
class Ledger:
    """What one pass spent: calls made, tokens, and cost (unknown once any call's cost is unknown)."""

    calls: int = 0
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Cost = Cost()
    # What the dollar caps count: the cost where known, and a call of unknown cost at its upper bound
    # (Judge.unknown_call_usd), so an unknown cost never counts as $0.
    charged_usd: float = 0.0

    @property
    def cost_usd(self) -> float | None:
        return self.cost.usd

    def add(
        self,
        calls: int,
        attempts: int,
        tokens_in: int | None,
        tokens_out: int | None,
        cost: float | None,
        *,
        bound: float = 0.0,
    ) -> None:
        """Count calls and what they cost: `cost` None when unknown, then charged at `bound`."""
        self.calls += calls
        self.attempts += attempts
        self.tokens_in += tokens_in or 0
        self.tokens_out += tokens_out or 0
        self.charged_usd += bound if cost is None else cost
        self.cost += cost


# Who answers: the Messages API, or recorded replies (of verdicts.JudgeKind, all but `mechanical`).
BackendKind = Literal["anthropic", "scripted"]
# What came of one question: a verdict, or why none (a failed request; or, in a session, its next read went into
# the Message Batch, or the balance or a dollar cap held it: session/batch.py's BATCHED, session/context.py's HELD).
OutcomeKind = Literal["verdict", "unavailable", "unparsed", "refused", "batched", "held"]


@dataclass(frozen=True)
class JudgeSpec:
    """What --judge names, parsed once: the Messages API ("anthropic") or recorded replies ("scripted:FILE")."""

    kind: BackendKind
    # the replies file of a scripted judge
    path: Path | None = None

    @classmethod
    def parse(cls, spec: str) -> JudgeSpec:
        if spec == "anthropic":
            return cls("anthropic")
        if spec.startswith("scripted:"):
            return cls(ScriptedBackend.kind, Path(spec.removeprefix("scripted:")))
        raise ConfigError(f"--judge: expected 'anthropic' or 'scripted:FILE', got {spec!r}")

    @property
    def anthropic(self) -> bool:
        return self.kind == "anthropic"

    def __str__(self) -> str:
        return "anthropic" if self.path is None else f"{self.kind}:{self.path}"


Backend: TypeAlias = AnthropicBackend | ScriptedBackend


def make_backend(
    spec: JudgeSpec, config: Config, lineup: Lineup | None = None, *, answers: Iterable[Answerable]
) -> Backend:
    """The backend --judge names; `lineup` (models.py) says how the anthropic one asks each model, `answers` what
    the scripted one answers (passes.registry.answered())."""
    if spec.path is not None:
        return ScriptedBackend(spec.path, answers)
    return AnthropicBackend(config, lineup=lineup)


@dataclass
class Sample:
    """One reply read: the answer, its rationale and payload, the raw text, and what it votes for."""

    answer: str
    rationale: str
    payload: dict[str, Any] | None
    text: str
    # what the orders and samples vote on: the answer in the subject's terms (see read_sample)
    vote: str = ""


def read_sample(p: JudgedPass, text: str, subject: dict[str, Any], position: int) -> Sample:
    """One reply parsed (Unparsed if it breaks the contract) and put in the subject's terms.

    A pass whose answer names a side as shown in one order (prune's `redundant`: "A" is the first fact
    shown) says which fact that is, so both orders vote on the same thing: "A" in one is "B" in the other.
    """
    answer, rationale, payload = p.parse(text)
    vote = answer
    if isinstance(p, NamesASide):
        payload, vote = p.in_subject_terms(answer, payload, subject, position)
    return Sample(answer, rationale, payload, text, vote)


@dataclass
class Outcome:
    """One question's result: its kind says which (OutcomeKind)."""

    kind: OutcomeKind
    answer: str | None = None
    rationale: str = ""
    payload: dict[str, Any] | None = None
    agreement: float | None = None
    attempts: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Cost = Cost()
    replies: list[str] = field(default_factory=list)
    error: str = ""
    # each order's majority answer, in order asked
    by_position: list[str] = field(default_factory=list)
    # orders asked: 1, or 2 when the first was not the default or the question was swap-sampled
    orders: int = 0
    # a reply cut at max_tokens, or with no text at all: remembered like a refusal
    truncated: bool = False
    # of `calls`, those made in this reading (not batch results collected: paid when submitted)
    made: int = 0

    @property
    def cost_usd(self) -> float | None:
        return self.cost.usd


def swap_sampled(fingerprint: str, share: float) -> bool:
    """Whether a question is in the swap sample: chosen by a hash of its fingerprint, so reruns agree."""
    if share <= 0:
        return False
    return int(hashlib.sha256(f"swap|{fingerprint}".encode()).hexdigest()[:8], 16) < share * 2**32


def _failed(results: list[Sample | BaseException], out: Outcome) -> bool:
    """Name the outcome after the first failed request, if any; re-raise what must stop the session."""
    for r in results:
        if isinstance(r, JudgeRefused):
            raise r
        if isinstance(r, BaseException) and not isinstance(r, (Unavailable, Unparsed, Refused)):
            raise r
    failures = [r for r in results if isinstance(r, (Unavailable, Unparsed, Refused))]
    # a refusal is about the question itself, so it names the outcome whatever else happened
    named: tuple[tuple[OutcomeKind, type[Exception]], ...] = (
        ("refused", Refused),
        ("unavailable", Unavailable),
        ("unparsed", Unparsed),
    )
    for kind, cls in named:
        first = next((r for r in failures if isinstance(r, cls)), None)
        if first is not None:
            out.kind, out.error = kind, str(first.args[0])
            return True
    return False


def _read(results: list[Sample | BaseException]) -> list[Sample]:
    """The samples of requests none of which failed (_failed said so): every result is one."""
    return [r for r in results if isinstance(r, Sample)]


def cache_key(
    model: str, prompt_id: str, system: str, user: str, sample: int, *, tool: dict[str, Any] | None = None
) -> str:
    """The reply-cache key: model, prompt version, exact prompt, sample number, and the forced tool if any."""
    text = f"{system}\n\n{user}"
    key = f"{model}|{prompt_id}|{text}" + (f"|sample={sample}" if sample else "")
    # a tool-use request is a different request: its replies never mix with text-only ones
    if tool:
        key += "|tool=" + dumps(tool, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


# output tokens of a verdict's answer, about (estimates; max_tokens bounds it)
REPLY_TOKENS = 60


@dataclass
class Ask:
    """One request of a question: an order and a sample, with its cache key."""

    position: int
    sample: int
    user: str
    key: str


def _bytes(p: JudgedPass, ask: Ask) -> int:
    """The UTF-8 size of a request's prompt: what bounds its input tokens."""
    return len(p.prompt.system.encode("utf-8")) + len(ask.user.encode("utf-8"))


def _attempts(e: Exception) -> int:
    """The attempts a failed request made, as its exception says (Unavailable and Refused carry them)."""
    return int(e.args[1]) if len(e.args) > 1 else 1


class Judge:
    """Asks a pass's question with samples and position swap, through the reply cache, under one semaphore."""

    def __init__(self, backend: Backend, store: Store, config: Config, model: str | None = None) -> None:
        self.backend, self.store, self.config = backend, store, config
        # another model than the backend's (the first reader): see reader()
        self._model = model
        self.semaphore = asyncio.Semaphore(config.judge.concurrency)
        self.ledgers: dict[str, Ledger] = {}
        # the same calls by model: what a call of each cost this session
        self.by_model: dict[str, Ledger] = {}
        # Message Batch results collected this session, by cache key: a Completion, or the error to raise
        self.fresh: dict[str, Completion | Exception] = {}

    @property
    def model(self) -> str:
        return self._model or self.backend.model

    def reader(self, model: str) -> Judge:
        """This judge asking `model` instead: the same backend, store, semaphore, ledgers and batch results."""
        other = Judge.__new__(Judge)
        other.__dict__.update(self.__dict__)
        other._model = model
        return other

    @property
    def kind(self) -> BackendKind:
        """anthropic or scripted: verdicts and cached replies bind only the kind of judge that gave them."""
        return self.backend.kind

    def tool(self, p: JudgedPass) -> dict[str, Any] | None:
        """The reply contract as a tool ({name, input_schema}), on backends that speak the real API."""
        return None if isinstance(self.backend, ScriptedBackend) else p.prompt.tool

    def shape(self, p: JudgedPass) -> dict[str, Any] | None:
        """What of a request depends on the reply contract in the judge model's dialect (in the cache key)."""
        # answers from a file: no contract is sent
        if isinstance(self.backend, ScriptedBackend):
            return None
        return self.backend.shape(p.prompt.tool, self.model)

    def orders(self, candidate: JudgedCandidate) -> int:
        """How many orders this question has to ask: 2 for pairs with judge.position_swap, else 1."""
        return len(candidate.orders) if self.config.judge.position_swap else 1

    def first_asks(self, p: JudgedPass, candidate: JudgedCandidate) -> list[Ask]:
        """The requests a question starts with: its first order, and its second when in the swap sample."""
        both = self.orders(candidate) == 2 and swap_sampled(candidate.fingerprint, self.config.judge.swap_sample)
        return self.asks(p, candidate, positions=(0, 1) if both else (0,))

    def needed_asks(self, p: JudgedPass, candidate: JudgedCandidate) -> list[Ask]:
        """The requests known to be needed now: the first ones, and the second order once the cached first
        order says it is needed (a Message Batch gathers these; the rest waits for the first answer)."""
        jobs = self.first_asks(p, candidate)
        if self.orders(candidate) < 2 or any(a.position == 1 for a in jobs):
            return jobs
        hits = [self.store.cached_reply(a.key, self.kind) for a in jobs]
        if not all(hits):
            return jobs
        try:
            samples = [read_sample(p, h["text"], candidate.subject, a.position) for a, h in zip(jobs, hits) if h]
        except Unparsed:
            return jobs
        return jobs + self.asks(p, candidate, positions=(1,)) if self._decided(p, samples) != p.default else jobs

    def needs_call(self, p: JudgedPass, candidate: JudgedCandidate, one_order: bool = False) -> bool:
        """Whether reading the question starts with a call: its first requests are not all in the reply cache or
        among the batch results collected this session (a reading that makes no call costs nothing)."""
        jobs = [a for a in self.first_asks(p, candidate) if a.position == 0 or not one_order]
        return any(a.key not in self.fresh and not self.store.cached_reply(a.key, self.kind) for a in jobs)

    def asks(self, p: JudgedPass, candidate: JudgedCandidate, positions: tuple[int, ...] | None = None) -> list[Ask]:
        """The requests of these orders of a question (default: every order it has), each sample, in order."""
        cfg = self.config.judge
        orders = candidate.orders[: self.orders(candidate)]
        out: list[Ask] = []
        for pos, evidence in enumerate(orders):
            if positions is not None and pos not in positions:
                continue
            user = p.prompt.render(evidence)
            for n in range(cfg.samples):
                out.append(
                    Ask(pos, n, user, cache_key(self.model, p.prompt.id, p.prompt.system, user, n, tool=self.shape(p)))
                )
        return out

    def cost(
        self, tokens_in: int | None, tokens_out: int | None, batch: bool = False, model: str | None = None
    ) -> float | None:
        """What a call cost, at the price of `model` (default: the judge's)."""
        if isinstance(self.backend, ScriptedBackend):
            return 0.0  # recorded replies cost nothing
        price = self.config.price(model or self.model)
        if price is None or tokens_in is None or tokens_out is None:
            return None
        usd = price.usd(tokens_in, tokens_out)
        return usd * (1 - price.batch_discount) if batch else usd

    def unknown_call_usd(self, prompt_bytes: int | None = None, batch: bool = False) -> float:
        """The most a call whose usage is unknown (no usage reported, cut off by a time limit) can have cost.

        Input at one token per UTF-8 byte of the prompt (a byte-level tokenizer never makes more tokens than
        bytes; without the prompt, two fact bodies at max_evidence_chars of up to 4 bytes each), output at
        max_tokens. Recorded replies cost nothing; a model with no price has no bound (review refuses it).
        """
        if isinstance(self.backend, ScriptedBackend):
            return 0.0
        cfg = self.config.judge
        tokens_in = prompt_bytes if prompt_bytes is not None else 8 * cfg.max_evidence_chars + 4000
        return self.cost(tokens_in, self.backend.dialect(self.model).max_tokens(cfg.max_tokens), batch=batch) or 0.0

    def expected_out(self) -> int:
        """Output tokens a verdict call is expected to bill (thinking included): for estimates before measuring."""
        if isinstance(self.backend, ScriptedBackend):
            return 0
        return self.backend.dialect(self.model).expected_out(REPLY_TOKENS)

    def ledger(self, pass_name: str) -> Ledger:
        """This pass's ledger, opened at its first call."""
        return self.ledgers.setdefault(pass_name, Ledger())

    def spent(self) -> float:
        """USD this session counts against the dollar caps, over every pass (unknown costs at their bound)."""
        return sum(l.charged_usd for l in self.ledgers.values())

    def mean_usd(self, model: str) -> float | None:
        """What a call of `model` cost this session on average, as the caps count it (None: no call of it yet)."""
        ledger = self.by_model.get(model)
        return ledger.charged_usd / ledger.calls if ledger and ledger.calls else None

    def _count(
        self,
        out: Outcome,
        pass_name: str,
        attempts: int,
        tokens_in: int | None,
        tokens_out: int | None,
        *,
        cost: float | None,
        bound: float,
    ) -> None:
        """One call made now: into the outcome's count, the pass's ledger and its model's."""
        out.made += 1
        for ledger in (self.ledger(pass_name), self.by_model.setdefault(self.model, Ledger())):
            ledger.add(1, attempts, tokens_in, tokens_out, cost, bound=bound)

    async def _sample(self, p: JudgedPass, subject: dict[str, Any], ask: Ask, out: Outcome) -> Sample:
        fresh = self.fresh.pop(ask.key, None)
        if isinstance(fresh, Exception):
            out.calls += 1
            out.attempts += 1
            raise fresh
        hit = self.store.cached_reply(ask.key, self.kind) if fresh is None else None
        if hit:
            return read_sample(p, hit["text"], subject, ask.position)
        if fresh is not None:
            done = fresh
        else:
            async with self.semaphore:
                try:
                    if isinstance(self.backend, ScriptedBackend):
                        done = await self.backend.complete(
                            p.prompt.system, ask.user, subject, ask.position, pass_name=p.name
                        )
                    else:
                        done = await self.backend.complete(
                            p.prompt.system, ask.user, subject, ask.position, tool=self.tool(p), model=self.model
                        )
                except (Unavailable, Refused) as e:
                    # a refusal the model gave is a 200, billed (its Completion rides along); an error reply is not
                    billed: Completion | None = e.args[2] if len(e.args) > 2 else None
                    cost = self.cost(billed.tokens_in, billed.tokens_out) if billed else 0.0
                    self._count(
                        out,
                        p.name,
                        _attempts(e),
                        billed.tokens_in if billed else None,
                        billed.tokens_out if billed else None,
                        cost=cost,
                        bound=self.unknown_call_usd(_bytes(p, ask)),
                    )
                    out.attempts += _attempts(e)
                    out.calls += 1
                    out.cost += cost
                    raise
                except asyncio.CancelledError:
                    # a call cut off by the time limit may still have been billed: its cost is unknown
                    self._count(out, p.name, 1, None, None, cost=None, bound=self.unknown_call_usd(_bytes(p, ask)))
                    out.calls += 1
                    out.cost = UNKNOWN
                    raise
        cost = self.cost(done.tokens_in, done.tokens_out, batch=done.batch)
        # a batch result went into the ledger when it was collected
        if not done.batch:
            self._count(
                out,
                p.name,
                done.attempts,
                done.tokens_in,
                done.tokens_out,
                cost=cost,
                bound=self.unknown_call_usd(_bytes(p, ask)),
            )
        out.calls += 1
        out.attempts += done.attempts
        out.tokens_in += done.tokens_in or 0
        out.tokens_out += done.tokens_out or 0
        out.cost += cost
        out.replies.append(done.text)
        try:
            sample = read_sample(p, done.text, subject, ask.position)
        except Unparsed:
            # Bought and unreadable for a reason asking again would not change: remembered like a refusal, so it is
            # never paid in a loop. Thinking or the answer used the room up; or the reply held no text at all
            # (only a thinking block, an empty content list), whatever its stop_reason.
            if done.stop_reason == "max_tokens":
                out.truncated = True
                raise Unparsed(
                    f"the reply stopped at max_tokens before a whole answer (output {done.tokens_out} "
                    "tokens, thinking included); not asked again until the question changes"
                ) from None
            if not done.text.strip():
                out.truncated = True
                raise Unparsed(
                    f"the reply held no text to read (stop_reason {done.stop_reason}, output "
                    f"{done.tokens_out} tokens: only thinking, or nothing); not asked again until the "
                    "question changes"
                ) from None
            raise
        # written right after each parse: a killed session resumes without paying for this reply again
        self.store.cache_reply(
            ask.key,
            self.model,
            p.prompt.id,
            done.text,
            tokens_in=done.tokens_in,
            tokens_out=done.tokens_out,
            judge=self.kind,
            position=ask.position,
        )
        return sample

    async def ask(self, p: JudgedPass, candidate: JudgedCandidate, one_order: bool = False) -> Outcome:
        """Judge one candidate; never raises for an API fault or a bad reply (JudgeRefused aside).

        The first order is asked; the second only when the first did not give the default (a split can
        only end in the default, so a second call after a default buys nothing), or when the question
        falls in the swap sample that keeps measuring position bias.
        """
        cfg = self.config.judge
        out = Outcome(kind="verdict")
        first = self.first_asks(p, candidate)
        # the first order alone first, even for the swap sample: a question the model refuses costs one call
        jobs = [a for a in first if a.position == 0]
        # the first reader: one order, its answer a vote for the judge model to confirm or not
        if one_order:
            first = jobs
        try:
            async with asyncio.timeout(cfg.timeout_s) as limit:
                # the time limit stands still while a call waits on the shared rate limiter
                token = question_clock.set(QuestionClock(limit))
                try:
                    results = await self._gather(p, candidate, jobs, out)
                    if (
                        not _failed(results, out)
                        and not one_order
                        and (len(first) > len(jobs) or self._second_needed(p, candidate, jobs, _read(results)))
                    ):
                        more = self.asks(p, candidate, positions=(1,))
                        jobs, results = jobs + more, results + await self._gather(p, candidate, more, out)
                finally:
                    question_clock.reset(token)
        except TimeoutError:
            out.kind, out.error = "unavailable", f"timed out after {cfg.timeout_s:g}s"
            return out
        if _failed(results, out):
            return out
        samples = _read(results)
        by_position: dict[int, list[Sample]] = {}
        for a, sample in zip(jobs, samples):
            by_position.setdefault(a.position, []).append(sample)
        self._aggregate(p, by_position, out)
        out.orders = len(by_position)
        # every sample, cached or fresh, in the order asked
        out.replies = [s.text for s in samples]
        return out

    async def _gather(
        self, p: JudgedPass, candidate: JudgedCandidate, jobs: list[Ask], out: Outcome
    ) -> list[Sample | BaseException]:
        return list(
            await asyncio.gather(*(self._sample(p, candidate.subject, a, out) for a in jobs), return_exceptions=True)
        )

    def _second_needed(self, p: JudgedPass, candidate: JudgedCandidate, jobs: list[Ask], samples: list[Sample]) -> bool:
        """Whether the second order must be asked: it exists, was not asked, and the first was not the default."""
        if self.orders(candidate) < 2 or any(a.position == 1 for a in jobs):
            return False
        return self._decided(p, samples) != p.default

    def _decided(self, p: JudgedPass, samples: list[Sample]) -> str:
        """One order's answer as the verdict would take it: the majority, or the default when undecided."""
        counts = Counter(s.vote for s in samples).most_common()
        if len(counts) > 1 and counts[0][1] == counts[1][1]:
            return p.default
        if round(counts[0][1] / len(samples), 2) < self.config.judge.min_agreement:
            return p.default
        return counts[0][0]

    def _aggregate(self, p: JudgedPass, by_position: dict[int, list[Sample]], out: Outcome) -> None:
        """Majority per position; low agreement or a split between positions records the default.

        Votes are in the subject's terms, so two orders that retract different facts are a split.
        """
        majorities: list[str] = []
        shares: list[float] = []
        tied = False
        for samples in by_position.values():
            counts = Counter(s.vote for s in samples).most_common()
            leaders = [a for a, c in counts if c == counts[0][1]]
            # a tie is no majority, whatever min_agreement allows
            tied = tied or len(leaders) > 1
            majorities.append(leaders[0] if len(leaders) == 1 else p.default)
            shares.append(counts[0][1] / len(samples))
        out.by_position = majorities
        # two decimals, as min_agreement is written: 2 of 3 samples is 0.67 and meets the default 0.67
        out.agreement = round(min(shares), 2)
        if tied or out.agreement < self.config.judge.min_agreement:
            out.answer, out.rationale = p.default, f"undecided: samples agreed {out.agreement:.2f}"
        elif len(set(majorities)) > 1:
            out.answer, out.rationale = p.default, f"split by position: {' / '.join(majorities)}"
        else:
            chosen = next(s for samples in by_position.values() for s in samples if s.vote == majorities[0])
            out.answer, out.rationale, out.payload = chosen.answer, chosen.rationale, chosen.payload
