"""What every pass shares: the Candidate it offers, the Change a yes makes, and the strict reply parser."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Protocol

from ..config import Config
from ..corpus import Corpus
from ..embeddings import Embedder
from ..errors import Unparsed
from ..prompts import Prompt
from ..verdicts import Verdict, subject_names  # noqa: F401  (re-exported: the passes' shared names)


@dataclass
class Candidate:
    pass_name: str
    subject: dict  # {"a": .., "b": ..} for pairs, {"group": [..]} for groups
    fingerprint: str
    score: float  # the rank among candidates, best first (alias: nominate.score), never a decision
    orders: list  # the evidence in each order to ask (A/B and B/A for pairs)
    fresh: bool = False  # touches a fact or spelling changed since the pass's last session (freshness.fresh_first)


@dataclass
class Change:
    """The file writes of one decision and its commit message (subject line and body)."""

    writes: dict[str, str]
    subject: str
    body: str
    extra_trailers: dict = field(default_factory=dict)


class Session(Protocol):
    """What a pass may read of a review session, and nothing more: a pass never holds the session itself."""

    @property
    def config(self) -> Config: ...
    @property
    def corpus(self) -> Corpus: ...
    @property
    def embedder(self) -> Embedder: ...
    @property
    def lines(self) -> dict[str, str]: ...  # spelling -> its describe line


class Pass(Protocol):
    """What the session and the judge use of a pass (alias, prune, discovery)."""

    name: str
    about: str  # what a question's sides are: "spellings" or fact paths
    default: str  # the recoverable answer
    yes: set[str]  # the answers that change the corpus
    stands: bool

    def prompt(self) -> Prompt: ...
    def candidates(self, ctx: Session) -> list[Candidate]: ...
    def parse(self, text: str) -> dict: ...
    def change(self, verdict: Verdict, ctx: Session) -> Change: ...


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*?)\n```\Z", re.S)


def reply_object(text: str, keys: dict[str, tuple]) -> dict:
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


def one_sentence(text) -> str:
    return " ".join(str(text or "").split())


JUDGED_PASSES = ("alias", "prune", "discovery")
