"""Describe lines: one line per motif spelling saying what it names, written by the model from its carriers.

The alias pass embeds each spelling's name together with its line and nominates each spelling's nearest
by that (nominate.py, the `line` signal). A line chooses what the judge looks at; it never decides.

A line is bought state: keyed by the spelling, a fingerprint of what the model was shown of the carriers
it was written from (each one's title and cut body), the model and the prompt version; stored in the db
and journalled in .knomit/verdicts/describe.jsonl, so `rebuild` and a fresh clone restore it without a
call. It is written again only when that key changes. Many spellings go in one request
(`describe.batch`), each with up to `describe.carriers` carriers, a carrier shown once per request as its
title and the first `describe.body_chars` characters of its body.

A spelling a request gave no line (a bad item loses only its own; a reply that is not the contract's JSON, or
a request refused for its content, loses all of its spellings') is kept too, as an empty line with a count of
tries and why: asked again until describe.max_tries requests gave it none, then not until its key changes,
so a reply that keeps breaking the contract is paid a bounded number of times (issue 39).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..corpus import Corpus, Fact
from ..errors import Refused, Unavailable, Unparsed
from ..jsonl import dumps
from ..judge import Judge, JudgeSpec
from ..passes.base import DESCRIBE, one_sentence, reply_object
from ..prompts import Prompt, cut, kept, load_prompt
from ..scripted import ScriptedBackend
from ..store import Store
from ..verdicts import Journal, Line

log = logging.getLogger(__name__)

# output tokens a line may take (~35 words and its JSON), for the request's max_tokens
OUT_PER_LINE = 80
OUT_BASE = 200


def prompt() -> Prompt:
    return load_prompt(DESCRIBE)


@dataclass(frozen=True)
class Shown:
    """One spelling as a request shows it: the carriers its line is written from, and the line's key."""

    spelling: str
    # the carrier facts shown (active, in carrier order, at most describe.carriers)
    facts: tuple[Fact, ...]
    # fingerprint of what is shown of them: with the spelling, model and prompt, the line's key
    carriers: str


def carriers_fingerprint(facts: Iterable[Fact], body_chars: int) -> str:
    """Of what the model is shown of the carriers: each one's title and the part of its body shown. Not the
    content id, which also covers the front matter (a merge that rewrites a carrier's motifs must not buy its
    lines again), nor the cut's marker, whose count of characters not shown moves with any edit below it."""
    shown = sorted([f.title, kept(f.body, body_chars)] for f in facts)
    return hashlib.sha256(dumps(shown, ensure_ascii=False).encode()).hexdigest()[:24]


def shown(spelling: str, corpus: Corpus, carriers: int, body_chars: int = 600, before: tuple[str, ...] = ()) -> Shown:
    """The carriers a line of `spelling` is written from: the ones its last line was written from (`before`,
    paths) while every one of them still carries it, so a new carrier does not buy the line again; else the
    ones that still do, then the others in path order, up to `carriers`."""
    active = [f for f in corpus.carrier_facts(spelling) if f.active]
    by_path = {f.path: f for f in active}
    if before and all(p in by_path for p in before):
        facts = tuple(by_path[p] for p in before)[:carriers]
    else:
        kept_facts = [by_path[p] for p in before if p in by_path]
        facts = tuple(kept_facts + [f for f in active if f.path not in before])[:carriers]
    return Shown(spelling, facts, carriers_fingerprint(facts, body_chars))


def batches(items: list[Shown], size: int) -> list[list[Shown]]:
    """Requests of at most `size` spellings; spellings sharing their first carrier go together, so a
    carrier shown once serves several of them (ties by spelling: the same vocabulary gives the same requests)."""
    ordered = sorted(items, key=lambda s: (s.facts[0].path if s.facts else "", s.spelling))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def evidence(batch: list[Shown], body_chars: int) -> dict[str, list[dict[str, Any]]]:
    """A request's evidence: each spelling with the ids of its carriers, and each carrier once."""
    ids: dict[str, str] = {}
    facts = []
    for s in batch:
        for f in s.facts:
            if f.path not in ids:
                ids[f.path] = f"F{len(ids) + 1}"
                facts.append({"id": ids[f.path], "title": f.title, "body": cut(f.body, body_chars)})
    return {
        "spellings": [{"spelling": s.spelling, "facts": [ids[f.path] for f in s.facts]} for s in batch],
        "facts": facts,
    }


@dataclass(frozen=True)
class Request:
    system: str
    user: str
    tool: dict[str, Any]
    max_tokens: int
    spellings: tuple[str, ...]


def request(batch: list[Shown], body_chars: int) -> Request:
    """The exact request the model is sent for one batch of spellings."""
    p = prompt()
    return Request(
        p.system,
        p.render(evidence(batch, body_chars)),
        p.tool,
        OUT_BASE + OUT_PER_LINE * len(batch),
        tuple(s.spelling for s in batch),
    )


def parse(text: str, spellings: Iterable[str]) -> dict[str, str]:
    """The reply's lines for the spellings asked (others are ignored); Unparsed when it breaks the contract as a
    whole (read_reply says why each spelling asked got no line)."""
    return read_reply(text, spellings)[0]


def read_reply(text: str, spellings: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """The reply's lines for the spellings asked, and why each other spelling asked got none.

    Unparsed only when the reply as a whole breaks the contract (not one JSON object holding a `lines` list):
    then no spelling got a line. A bad item (not an object, no `mechanism` string, empty text) loses only its
    own spelling's line. An item naming a spelling that was not asked is ignored, unless it differs from one
    asked only in case and no other asked spelling folds to the same: then it is that spelling's line.
    """
    obj = reply_object(text, {"lines": ((list,), True)})
    asked = list(dict.fromkeys(spellings))
    wanted = set(asked)
    folded: dict[str, list[str]] = {}
    for name in asked:
        folded.setdefault(name.casefold(), []).append(name)
    out: dict[str, str] = {}
    why: dict[str, str] = {}
    for item in obj["lines"]:
        said = item.get("spelling") if isinstance(item, dict) else None
        if not isinstance(said, str):
            # whose line it was cannot be told: its spelling is left without one below
            continue
        name = said
        if name not in wanted:
            same = folded.get(name.strip().casefold(), [])
            if len(same) != 1:
                # not asked, or which of two asked spellings it means cannot be told
                continue
            # said in another case than asked
            name = same[0]
        if name in out:
            continue
        mechanism = item.get("mechanism")
        line = one_sentence(mechanism) if isinstance(mechanism, str) else ""
        if line:
            out[name] = line
        else:
            why.setdefault(
                name, "its line was empty" if isinstance(mechanism, str) else "its item had no 'mechanism' string"
            )
    return out, {name: why.get(name, "the reply left it out") for name in asked if name not in out}


@dataclass
class Written:
    """What one run of the describe step wrote (its calls and cost are in the judge's ledger, under DESCRIBE)."""

    # spelling -> the line written for it now
    lines: dict[str, str] = field(default_factory=dict)
    # spellings asked whose reply gave no line (or were refused)
    missing: list[str] = field(default_factory=list)
    # why a request gave nothing (unavailable, unparsed, refused)
    failed: list[str] = field(default_factory=list)
    # spellings left without a line because a dollar cap was reached
    waiting: int = 0
    held: str = ""  # which cap

    @property
    def written(self) -> int:
        return len(self.lines)


def upper_bound(req: Request, judge: Judge, model: str) -> float:
    """The most one request can cost: a token per prompt byte (never fewer bytes than tokens), max_tokens out
    (with the room for thinking the model's dialect gives it)."""
    backend = judge.backend
    out = req.max_tokens if isinstance(backend, ScriptedBackend) else backend.dialect(model).max_tokens(req.max_tokens)
    return judge.cost(len(req.system.encode()) + len(req.user.encode()), out, model=model) or 0.0


def model_of(judge_spec: JudgeSpec, config: Config) -> str:
    """The model whose lines a session with this --judge reads and writes (as Judge.model names it)."""
    # a scripted judge: its file's name, as ScriptedBackend.model says it
    if judge_spec.path is not None:
        return f"{judge_spec.kind}:{judge_spec.path.name}"
    return describe_model(config)


def describe_model(config: Config) -> str:
    """The model that writes lines: describe.model, or the judge's when that is empty."""
    return config.describe.model or config.judge.model


@dataclass
class Current:
    """The spellings with an active carrier as the corpus is now, as the describe step finds them."""

    # spelling -> its stored line for its key
    lines: dict[str, str]
    # never asked for its key, or asked fewer than describe.max_tries times and given no line
    todo: list[Shown]
    # (spelling, carriers) -> requests that gave it no line so far (if any)
    tries: dict[tuple[str, str], int]
    # spelling -> why: given no line by describe.max_tries requests; waits for its key to change
    held: dict[str, str]
    # spellings asked this session and given no line: asked again by the next session
    later: list[str]

    @property
    def spellings(self) -> int:
        return len(self.lines) + len(self.todo) + len(self.held) + len(self.later)

    @property
    def missing(self) -> int:
        """Spellings with no line: to ask, asked again later, or waiting for their key to change."""
        return len(self.todo) + len(self.held) + len(self.later)


def current(
    store: Store, corpus: Corpus, config: Config, model: str, asked: frozenset[tuple[str, str]] = frozenset()
) -> Current:
    """The stored lines of the spellings as they are now, and the spellings to ask.

    A spelling with no active carrier needs none (nothing is nominated for it). One asked whose replies gave it
    no line is asked again, up to describe.max_tries requests for its key, then waits until the key changes;
    a key in `asked` (asked this session) is asked again by the next session, not this one.
    """
    stored, before = store.lines(model, prompt().id)
    misses = store.no_lines(model, prompt().id)
    out = Current({}, [], {}, {}, [])
    for m in sorted(corpus.carriers):
        s = shown(m, corpus, config.describe.carriers, config.describe.body_chars, before.get(m, ()))
        if not s.facts:
            continue
        line = stored.get((m, s.carriers))
        tries, why = misses.get((m, s.carriers), (0, ""))
        if line:
            out.lines[m] = line
        elif (m, s.carriers) in asked:
            out.later.append(m)
        elif tries >= config.describe.max_tries:
            out.held[m] = why
        else:
            out.todo.append(s)
            if tries:
                out.tries[(m, s.carriers)] = tries
    return out


@dataclass(frozen=True)
class LineKeeper:
    """Where a session keeps the lines it writes, under its id: the journal first (the durable copy), then the db."""

    store: Store
    journal: Journal
    session: str

    def keep(self, record: Line) -> None:
        self.journal.append(DESCRIBE, record.journal_line())
        self.store.put_line(record)


async def write_lines(
    now: Current, judge: Judge, config: Config, keeper: LineKeeper, hold: Callable[[float], str | None]
) -> Written:
    """Ask for the lines `now.todo` lacks, `judge.concurrency` requests at a time, while `hold(next_usd)` says
    no dollar cap is reached (it names the cap that is); `now.tries` says how many requests gave each key no
    line before.

    Each line is journalled before it is stored (the journal is the durable copy). A spelling a request gave
    no line is kept so too, with one more try and why: a reply that left it out or gave a bad item for it, a
    reply that broke the contract as a whole, or a request the API refused for its content. An unavailable
    request (the API or the network failed) counts no try: its spellings are asked again next session.
    """
    cfg = config.describe
    out = Written()
    todo, tries = now.todo, now.tries
    backend = judge.backend
    scripted = isinstance(backend, ScriptedBackend)
    model = judge.model if scripted else describe_model(config)
    pending = [request(b, cfg.body_chars) for b in batches(todo, cfg.batch)]
    queue = list(reversed(pending))
    in_flight: list[float] = []
    by_name = {s.spelling: s for s in todo}

    def keep(req: Request, lines: dict[str, str], why: dict[str, str], share: float | None) -> None:
        for name in req.spellings:
            key = (name, by_name[name].carriers)
            line = lines.get(name, "")
            # a recorded file answers the same every time: a spelling it does not describe is not asked again
            n = 1 if line else cfg.max_tries if scripted else tries.get(key, 0) + 1
            record = Line(
                name,
                key[1],
                model,
                prompt().id,
                line,
                judge.kind,
                keeper.session,
                share if line else 0.0,
                facts=tuple(f.path for f in by_name[name].facts),
                tries=n,
                why="" if line else "the scripted replies file does not describe it" if scripted else why.get(name, ""),
            )
            keeper.keep(record)
            if not line:
                out.missing.append(name)
        out.lines.update(lines)

    async def one(req: Request, bound: float) -> None:
        try:
            if isinstance(backend, ScriptedBackend):
                done = await backend.describe(req.spellings)
            else:
                async with judge.semaphore:
                    done = await backend.complete(
                        req.system,
                        req.user,
                        {"spellings": list(req.spellings)},
                        0,
                        tool=req.tool,
                        max_tokens=req.max_tokens,
                        model=model,
                    )
        except (Unavailable, Refused) as e:
            judge.ledger(DESCRIBE).add(1, e.args[1] if len(e.args) > 1 else 1, None, None, 0.0)
            out.failed.append(f"{type(e).__name__.lower()}: {e.args[0]}")
            # about the request's content: asked again it would be refused again
            if isinstance(e, Refused):
                keep(req, {}, dict.fromkeys(req.spellings, f"refused: {e.args[0]}"), 0.0)
            return
        except asyncio.CancelledError:
            # cut off: may still have been billed
            judge.ledger(DESCRIBE).add(1, 1, None, None, None, bound=bound)
            raise
        cost = judge.cost(done.tokens_in, done.tokens_out, model=model)
        judge.ledger(DESCRIBE).add(1, done.attempts, done.tokens_in, done.tokens_out, cost, bound=bound)
        try:
            lines, why = read_reply(done.text, req.spellings)
        except Unparsed as e:
            out.failed.append(f"unparsed: {e.args[0]}")
            keep(req, {}, dict.fromkeys(req.spellings, f"unparsed: {e.args[0]}"), 0.0)
            return
        share = None if cost is None else round(cost / max(1, len(lines)), 9)
        keep(req, lines, why, share)

    async def worker() -> None:
        while queue:
            req = queue[-1]
            bound = 0.0 if scripted else upper_bound(req, judge, model)
            if why := hold(bound + sum(in_flight)):
                out.held = out.held or why
                return
            queue.pop()
            in_flight.append(bound)
            try:
                await one(req, bound)
            finally:
                in_flight.remove(bound)

    await asyncio.gather(*(worker() for _ in range(max(1, config.judge.concurrency))))
    out.waiting = sum(len(r.spellings) for r in queue)
    if out.missing:
        log.info("describe: no line for %d spelling(s), e.g. %s", len(out.missing), ", ".join(out.missing[:3]))
    return out
