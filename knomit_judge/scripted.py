"""The scripted judge: recorded replies chosen by the question asked, for the demo, the benchmarks and tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from .errors import ConfigError
from .jsonl import dumps
from .transport import Completion
from .verdicts import About, Shape


class Answerable(Protocol):
    """What the scripted judge reads of a pass (or the describe step) to check a file's entries for it and answer
    its questions: passes.base's Pass and DescribeStep have it, passes.registry.answered() lists them."""

    @property
    def name(self) -> str: ...
    # its entries are spellings' lines: {"spelling": S, "reply": {"mechanism"..}}
    @property
    def writes_lines(self) -> bool: ...
    # what an entry's sides name: motif spellings, or fact paths
    @property
    def about(self) -> About: ...
    # an entry names a pair ('a', 'b'), or a group ('group' or 'contains')
    @property
    def shape(self) -> Shape: ...
    # a reply's `redundant` names a side: "A" (the entry's a) or "B"
    @property
    def names_side(self) -> bool: ...
    # what a question no entry answers gets
    @property
    def default_reply(self) -> dict[str, Any]: ...


class ScriptedBackend:
    """Recorded replies chosen by the question asked (pass + pair or group), for the demo and tests.

    FILE is JSONL: {"pass": "alias", "a": ..., "b": ..., "reply": {...} or "raw text"};
    discovery entries match by {"group": [...]} (the exact set) or {"contains": [...]} (a subset).
    A prune retract names the redundant fact by the entry's sides ("redundant": "A" is its `a`),
    and is given to each order as that order shows the facts (shown_as).
    {"pass": "describe", "spelling": S, "reply": {"mechanism": LINE}} is the line of spelling S
    (session/lines.py): a spelling no entry describes gets no line.
    A question with no recorded reply gets the pass's recoverable default. The file is checked
    whole at load, so a typo is a ConfigError naming FILE:LINE before any default is stored.
    """

    kind: Literal["scripted"] = "scripted"

    def __init__(self, path: Path, answers: Iterable[Answerable]) -> None:
        self.path = Path(path)
        # what it answers, by the name a file's entries give
        self.steps = {s.name: s for s in answers}
        self.model = f"scripted:{self.path.name}"
        self.entries: list[dict[str, Any]] = []
        # distinct questions asked, and those a recorded reply answered
        self.asked: set[str] = set()
        self.matched: set[str] = set()
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise ConfigError(f"--judge scripted:{path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"--judge scripted:{path}: not UTF-8 text") from None
        # spelling -> its recorded describe line
        self.lines: dict[str, str] = {}
        for n, line in enumerate(lines, 1):
            if line.strip():
                entry = _scripted_entry(line, f"{path}:{n}", self.steps)
                if self.steps[entry["pass"]].writes_lines:
                    self.lines.setdefault(entry["spelling"], entry["reply"]["mechanism"])
                else:
                    self.entries.append(entry)

    async def describe(self, spellings: Iterable[str]) -> Completion:
        """The recorded lines of these spellings, as the describe reply a model would give (no line: left out)."""
        lines = [{"spelling": s, "mechanism": self.lines[s]} for s in spellings if s in self.lines]
        return Completion(text=dumps({"lines": lines}, ensure_ascii=False), tokens_in=0, tokens_out=0)

    def _match(self, entry: dict[str, Any], pass_name: str, subject: dict[str, Any]) -> bool:
        if entry.get("pass") != pass_name:
            return False
        if "group" in subject:
            group = set(subject["group"])
            if "group" in entry:
                return set(entry["group"]) == group
            return bool(entry.get("contains")) and set(entry["contains"]) <= group
        return {entry.get("a"), entry.get("b")} == {subject.get("a"), subject.get("b")}

    async def complete(
        self, system: str, user: str, subject: dict[str, Any], position: int, pass_name: str = ""
    ) -> Completion:
        question = dumps([pass_name, subject], sort_keys=True)
        self.asked.add(question)
        entry = next((e for e in self.entries if self._match(e, pass_name, subject)), None)
        reply: dict[str, Any] | str
        if entry is None:
            step = self.steps.get(pass_name)
            reply = step.default_reply if step else {}
        else:
            self.matched.add(question)
            reply = shown_as(entry, subject, position, self.steps[pass_name].names_side)
        text = reply if isinstance(reply, str) else dumps(reply)
        return Completion(text=text, tokens_in=0, tokens_out=0)

    def unmatched_note(self) -> str | None:
        """What to say when questions were asked and not one had a recorded reply (a wrong file, or stale names)."""
        if not self.asked or self.matched:
            return None
        what = (
            "it has no entries"
            if not self.entries and not self.lines
            else f"none of its {len(self.entries)} entries matched"
            if self.entries
            else f"it holds only describe lines ({len(self.lines)})"
        )
        # Entries answered in an earlier session are not asked again, so this may be expected: say both.
        return (
            f"the scripted judge answered none of the {len(self.asked)} question(s) it was asked from "
            f"{self.path} ({what}): each got its pass's default, stored as a verdict of the scripted judge "
            "(these never bind the anthropic judge); questions its entries answered in earlier sessions are "
            "not asked again, so if the file was meant to answer these, check its spellings and fact paths"
        )


def shown_as(entry: dict[str, Any], subject: dict[str, Any], position: int, names_side: bool) -> dict[str, Any] | str:
    """The reply of an entry for a pass whose answer names a side (prune's), with `redundant` said as this order
    shows the facts.

    The file names the redundant fact by the entry's own sides ("A": its `a`); the judge is shown
    subject a first in order 0 and subject b first in order 1, and a real judge names the fact as shown.
    """
    reply: dict[str, Any] | str = entry["reply"]
    if not names_side or not isinstance(reply, dict) or reply.get("redundant") not in ("A", "B"):
        return reply
    named = entry["a"] if reply["redundant"] == "A" else entry["b"]
    first = subject["a"] if position == 0 else subject["b"]
    return {**reply, "redundant": "A" if named == first else "B"}


def _scripted_entry(line: str, where: str, steps: Mapping[str, Answerable]) -> dict[str, Any]:
    """One line of a scripted replies file, checked: a JSON object with a known pass, a reply and its question."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({e.msg})") from None
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    name = entry.get("pass")
    step = steps.get(name) if isinstance(name, str) else None
    if step is None:
        raise ConfigError(f"{where}: 'pass' must be one of {', '.join(steps)}, got {entry.get('pass')!r}")
    if not isinstance(entry.get("reply"), (dict, str)):
        raise ConfigError(f"{where}: 'reply' (an object, or the raw reply text) is required")
    an = f"{'an' if step.name[:1] in 'aeiou' else 'a'} {step.name}"
    sides = "motif spellings" if step.about == "spellings" else "fact paths"
    if step.writes_lines:
        reply = entry["reply"]
        if not (
            isinstance(entry.get("spelling"), str)
            and entry["spelling"]
            and isinstance(reply, dict)
            and isinstance(reply.get("mechanism"), str)
            and reply["mechanism"].strip()
        ):
            raise ConfigError(f'{where}: {an} entry needs \'spelling\' and a reply {{"mechanism": "one sentence"}}')
    elif step.shape == "group":
        keys = [k for k in ("group", "contains") if k in entry]
        members = entry[keys[0]] if len(keys) == 1 else None
        if not isinstance(members, list) or not members or not all(isinstance(x, str) for x in members):
            raise ConfigError(
                f"{where}: {an} entry needs exactly one of 'group' or 'contains': a non-empty list of {sides}"
            )
    elif not all(isinstance(entry.get(k), str) and entry[k] for k in ("a", "b")):
        raise ConfigError(f"{where}: {an} entry needs 'a' and 'b' ({sides})")
    reply = entry["reply"]
    if step.names_side and isinstance(reply, dict) and reply.get("redundant", "A") not in ("A", "B"):
        raise ConfigError(
            f"{where}: {an} reply's 'redundant' names the entry's 'a' (\"A\") or 'b' (\"B\"), "
            f"got {reply['redundant']!r}"
        )
    return entry
