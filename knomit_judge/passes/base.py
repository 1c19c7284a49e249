"""What every pass shares: the Candidate it offers, the Change a yes makes, and the strict reply parser."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import Config
from ..corpus import Corpus
from ..embeddings import Embedder
from ..errors import Unparsed

# (answer, rationale, payload): what a pass's parser gives the judge
from ..judge import Reply
from ..prompts import Prompt
from ..verdicts import About, JudgeKind, Shape, Verdict, subject_names  # noqa: F401  (re-exported: the passes' shared names)

# {"a": .., "b": ..} for pairs, {"group": [..]} for groups: stored as JSON
Subject = dict[str, Any]
# what the judge reads in one order, rendered into the prompt as JSON
Evidence = dict[str, Any]


@dataclass
class Candidate:
    """One question a pass may ask: about what, keyed how, ranked where, with the evidence in each order."""

    pass_name: str
    subject: Subject
    fingerprint: str
    # the rank among candidates, best first (alias: nominate.score), never a decision
    score: float
    # the evidence in each order to ask (A/B and B/A for pairs)
    orders: Sequence[Evidence]
    # touches a fact or spelling changed since the pass's last session (session.freshness.fresh_first)
    fresh: bool = False


Restorer = Callable[[Subject, str, float], Candidate]
"""Makes a candidate read back from candidate_lists (subject, fingerprint, score), its evidence anew."""


@dataclass
class Change:
    """The file writes of one decision and its commit message (subject line and body)."""

    # path -> its new text; None: the decision deletes the file
    writes: dict[str, str | None]
    subject: str
    body: str
    # note retired -> its survivor (where its links now lead)
    retired: dict[str, str] = field(default_factory=dict)


# the describe step: its name in the journal, the ledger, the lines and the metrics
DESCRIBE = "describe"

# the labels of a pass whose answer is a yes or a no (a labels file says them true/false)
YES_NO: tuple[str, ...] = ("yes", "no")


class Session(Protocol):
    """What a pass may read of a review session, and nothing more: a pass never holds the session itself."""

    @property
    def config(self) -> Config: ...
    @property
    def corpus(self) -> Corpus: ...
    @property
    def embedder(self) -> Embedder: ...
    # spelling -> its describe line; empty without the describe step
    @property
    def lines(self) -> dict[str, str]: ...


@dataclass
class Inputs:
    """A Session made of its parts alone: what rebuild, benchmarks and tests hand a pass outside a review."""

    corpus: Corpus
    embedder: Embedder
    config: Config
    lines: dict[str, str] = field(default_factory=dict)


class Step(Protocol):
    """What every step of a session says of itself: exact duplicates, each judged pass, the describe step.

    Code outside passes/ asks these, never a step's name (llm asks `model.can_stream`); registry.steps() has them all.
    """

    @property
    def name(self) -> str: ...
    # it writes the describe lines: its `offered` are spellings, not questions
    @property
    def writes_lines(self) -> bool: ...


class CandidateSource(Step, Protocol):
    """What candidate_lists keeps for a pass, and for exact's duplicate groups too: its candidates, restorable."""

    # its candidates are nominated by the describe lines too (alias)
    @property
    def reads_lines(self) -> bool: ...

    def candidates(self, ctx: Session) -> list[Candidate]: ...
    def restorer(self, ctx: Session) -> Restorer: ...


class DescribeStep:
    """The describe step (session/lines.py) as a Step: it writes the lines, a spelling's each; what the scripted
    judge reads of it to take a replies file's describe entries as those lines."""

    name = DESCRIBE
    writes_lines = True
    about: About = "spellings"
    # a request asks for the lines of a group of spellings
    shape: Shape = "group"
    names_side = False

    @property
    def default_reply(self) -> dict[str, Any]:
        # no line for any spelling
        return {"lines": []}


class AnswersAsShown:
    """What a pass whose answer names no side (alias, discovery) gives for the `Pass` members prune needs:
    the answer votes as it is in either order, and no stored verdict is of a shape the pass no longer applies."""

    names_side = False

    def in_subject_terms(
        self, answer: str, payload: dict[str, Any] | None, subject: Subject, position: int
    ) -> tuple[dict[str, Any] | None, str]:
        return payload, answer

    def outdated(self, verdict: Verdict) -> bool:
        return False


class Pass(CandidateSource, Protocol):
    """What the session and the judge use of a judged pass (alias, prune, discovery)."""

    # what a question's sides are
    about: About
    # what a question is about: two sides, or a group
    shape: Shape
    default: str  # the recoverable answer
    # the answers that change the corpus
    yes: set[str]
    # an answer names one side as the order shows it (prune's retract: `redundant` "A" or "B")
    names_side: bool
    # a yes writes a new fact (discovery's proposal), where the others retire or rewrite
    proposes: bool
    # what a person's label says in a labels file (calibrate): YES_NO, or the answers
    labels: tuple[str, ...]
    # (floor, full) of the worth rule's prior over score (worth.prior)
    prior: tuple[float, float]

    # a yes stands when its sides' content changes (restated, not asked again)
    restates_yeses: bool
    # a new fact or spelling is owed its questions in the session that first sees it
    owes_questions_to_new: bool
    # ... those that score at least this much (session.freshness.owed_to_fresh)
    owed_min_score: float

    # what a judge with nothing to go on replies: parsed, `default`
    @property
    def default_reply(self) -> dict[str, Any]: ...
    @property
    def prompt(self) -> Prompt: ...
    def parse(self, text: str) -> Reply: ...
    def in_subject_terms(
        self, answer: str, payload: dict[str, Any] | None, subject: Subject, position: int
    ) -> tuple[dict[str, Any] | None, str]: ...
    def outdated(self, verdict: Verdict) -> bool: ...
    # an answer in its labels' terms (calibrate)
    def label_of(self, answer: str) -> str: ...
    def still_holds(self, verdict: Verdict, corpus: Corpus) -> bool: ...
    def restated(self, origin: Verdict, corpus: Corpus, session: str, judge: JudgeKind) -> Verdict | None: ...
    def change(self, verdict: Verdict, ctx: Session) -> Change: ...


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*?)\n```\Z", re.S)


def reply_object(text: str, keys: dict[str, tuple[tuple[type, ...], bool]]) -> dict[str, Any]:
    """The reply as one JSON object with exactly the contract's keys and types, or Unparsed.

    A single ```json fence around the object is tolerated; anything else around it is not.
    """
    text = text.strip()
    if m := _FENCE.match(text):
        text = m.group(1).strip()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise Unparsed(f"not a JSON object ({e.msg} at char {e.pos})") from None
    if not isinstance(obj, dict):
        raise Unparsed(f"not a JSON object but {type(obj).__name__}")
    extra = set(obj) - set(keys)
    if extra:
        raise Unparsed(f"unexpected keys: {', '.join(sorted(extra))}")
    for key, (types, required) in keys.items():
        if key not in obj:
            if required:
                raise Unparsed(f"missing key '{key}'")
            continue
        if not isinstance(obj[key], types) or (bool not in types and isinstance(obj[key], bool)):
            raise Unparsed(f"'{key}' has the wrong type ({type(obj[key]).__name__})")
    return obj


def one_sentence(text: object) -> str:
    """A reply's free text on one line (None: empty)."""
    return " ".join(str(text or "").split())


JUDGED_PASSES = ("alias", "prune", "discovery")
