"""Verdicts: every answer the judge gave, keyed by a fingerprint of what each side contained."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from .corpus import Fact
from .jsonl import dumps

JOURNAL_DIR = ".knomit/verdicts"

# One side of a judged question: a content id, or a [label, content ids] pair (an alias spelling and its carriers).
Side = str | list[str | list[str]]
# A journal line or a verdict's row: JSON as read or written.
Record = dict[str, Any]
# A journal file's mark: size, digest of those bytes, mtime_ns, ctime_ns, and when it was checked (ns).
Mark = tuple[int, str, int, int, int]


def fingerprint(*sides: Side) -> str:
    """A stable hash of what was judged: each side is a (label, content ids) pair or a content id."""
    if all(isinstance(s, str) and s.isascii() and s.isalnum() for s in sides):
        # Content ids only (prune, discovery; ~450k calls at 100k facts): the same text json.dumps would
        # give, as such strings need no escaping and sort the same quoted or not.
        canon = "[" + ",".join(f'"{s}"' for s in sorted(sides)) + "]"
        return hashlib.sha256(canon.encode()).hexdigest()[:24]
    return fingerprint_encoded(*map(encoded_side, sides))


def encoded_side(side: Side) -> tuple[str, str]:
    """A side as fingerprint() sorts and writes it; a caller meeting one side in many pairs encodes it once."""
    return dumps(side), dumps(side, separators=(",", ":"))


def fingerprint_encoded(*encoded: tuple[str, str]) -> str:
    """fingerprint() of sides already encoded: the compact JSON list of them, sorted by their default JSON."""
    canon = "[" + ",".join(compact for _, compact in sorted(encoded)) + "]"
    return hashlib.sha256(canon.encode()).hexdigest()[:24]


def pair_fingerprint(a: str, b: str) -> str:
    """fingerprint(a, b) of two content ids (hex, so no escaping), without its checks: prune's ~300k pairs."""
    canon = f'["{a}","{b}"]' if a <= b else f'["{b}","{a}"]'
    return hashlib.sha256(canon.encode()).hexdigest()[:24]


def group_fingerprint(facts: Iterable[Fact]) -> str:
    """fingerprint() of a group of facts (exact duplicates, a discovery group): their content ids, in any order."""
    return fingerprint(*(f.content_id for f in facts))


# the model of a verdict no judge was asked for: exact duplicates, restated aliases
MECHANICAL = "mechanical"
# Which kind of judge gave a verdict, cached a reply or ran a pass's session (migration 0007): a verdict binds only
# its own kind. A restated alias is model `mechanical` but keeps the kind of judge whose yes it restates.
JudgeKind = Literal["anthropic", "scripted", "mechanical"]
# what a question's sides are: motif spellings, or facts (their paths)
About = Literal["spellings", "facts"]
# a question about two sides ({"a", "b"}), or about a group ({"group": [..]})
Shape = Literal["pair", "group"]


def subject_names(subject: dict) -> list[str]:
    """The spellings or fact paths a question is about: a group's members, or a pair's two."""
    return subject["group"] if "group" in subject else [subject["a"], subject["b"]]


def judge_of(model: str) -> JudgeKind:
    """The kind of judge behind a verdict recorded without one (journal lines and rows before migration 0007).

    The model always said it: the scripted judge records `scripted:FILE`, exact duplicates `mechanical` (a
    restated alias, model `mechanical` too, came after migration 0007 and always records its kind).
    """
    if model == MECHANICAL:
        return "mechanical"
    if str(model).startswith("scripted:"):
        return "scripted"
    return "anthropic"


def now_text() -> str:
    """Now in UTC as the ISO text (milliseconds) every stored timestamp uses, so they compare as strings."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class Verdict:
    pass_name: str
    fingerprint: str
    subject: dict[str, Any]
    answer: str
    is_yes: bool
    rationale: str
    model: str
    prompt: str
    attempts: int = 1
    calls: int = 0
    agreement: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    # every sample's reply text, in the order asked
    replies: list[str] = field(default_factory=list)
    payload: dict[str, Any] | None = None
    session: str | None = None
    created_at: str = field(default_factory=now_text)
    id: str = ""
    commit_sha: str | None = None
    reverted: bool = False
    revert_reason: str | None = None
    # a verdict binds only the kind of judge that gave it ("": its model says it)
    judge: JudgeKind | Literal[""] = ""
    # orders of the question asked (1 or 2); None: recorded before they were counted
    orders: int | None = None
    # each asked order's majority answer, first order first
    by_position: list[str] = field(default_factory=list)
    # the candidate's score when asked: what the worth rule's curve is fitted on
    score: float | None = None
    # the judge model reading a first-reader answer again (audits.py): kind, first_model, first_answer, pi, stratum,
    # born, score; journalled, so a rebuild makes the same audit row
    audit: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.judge = self.judge or judge_of(self.model)
        if not self.id:
            seed = f"{self.pass_name}|{self.fingerprint}|{self.created_at}|{self.session}"
            self.id = "v" + hashlib.sha256(seed.encode()).hexdigest()[:12]

    def row(self) -> Record:
        row = asdict(self)
        row["pass"] = row.pop("pass_name")
        for key in ("subject", "replies", "payload", "by_position", "audit"):
            row[key] = dumps(row[key], ensure_ascii=False) if row[key] is not None else None
        row["is_yes"] = int(self.is_yes)
        row["reverted"] = int(self.reverted)
        return row

    @classmethod
    def from_row(cls, row: Record) -> Verdict:
        row = dict(row)
        row["pass_name"] = row.pop("pass")
        for key in ("subject", "replies", "payload", "by_position", "audit"):
            row[key] = json.loads(row[key]) if row.get(key) is not None else None
        row["replies"] = row["replies"] or []
        row["by_position"] = row["by_position"] or []
        row["is_yes"] = bool(row["is_yes"])
        row["reverted"] = bool(row.get("reverted"))
        return cls(**{k: v for k, v in row.items() if k in cls.__dataclass_fields__})

    def journal_line(self) -> Record:
        """What the journal keeps: the verdict as judged (applied/reverted state lives in git)."""
        line = {"type": "verdict", **json.loads(dumps(asdict(self)))}
        line["pass"] = line.pop("pass_name")
        for key in ("commit_sha", "reverted", "revert_reason"):
            line.pop(key)
        return line

    @property
    def resolved(self) -> bool:
        return self.is_yes and not self.reverted


def encode_line(record: Record) -> bytes:
    """One journal line, without its newline."""
    return dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def line_id(raw: bytes) -> str | None:
    """The verdict id of a journal line that holds a verdict, else None."""
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record.get("id") if isinstance(record, dict) and record.get("type") == "verdict" else None


def append_line(path: Path, record: Record) -> None:
    """Append one JSON line and fsync; a torn last line from a killed session is terminated first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab+") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write(encode_line(record) + b"\n")
        f.flush()
        os.fsync(f.fileno())


class Journal:
    """Append-only JSONL files in the corpus, committed to git: verdicts survive a lost database."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / JOURNAL_DIR

    def path(self, pass_name: str) -> Path:
        return self.dir / f"{pass_name}.jsonl"

    def relpath(self, pass_name: str) -> str:
        return f"{JOURNAL_DIR}/{pass_name}.jsonl"

    def append(self, pass_name: str, record: Record) -> None:
        """Append one line and fsync it."""
        append_line(self.path(pass_name), record)

    def files(self) -> list[Path]:
        return sorted(self.dir.glob("*.jsonl")) if self.dir.is_dir() else []

    def records(
        self, marks: JournalMarks | None = None, types: tuple[str, ...] = ("verdict", "revert")
    ) -> list[Record]:
        """Every well-formed line of every pass; a torn line is skipped.

        Given `marks` (JournalMarks), only lines after each file's mark are read, and the marks move on.
        """
        out: list[Record] = []
        for path in self.files():
            data = path.read_bytes() if marks is None else marks.unread(path)
            for raw in data.splitlines():
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(record, dict) and record.get("type") in types:
                    out.append(record)
        return out

    def verdicts(self, marks: JournalMarks | None = None) -> tuple[list[Verdict], dict[str, str]]:
        """The journalled verdicts and the reverts (verdict id -> reason); given marks, those after them."""
        verdicts, reverts, _, _ = self.entries(marks)
        return verdicts, reverts

    def entries(
        self, marks: JournalMarks | None = None
    ) -> tuple[list[Verdict], dict[str, str], list[Record], list[Record]]:
        """verdicts(), the describe lines' records (session/lines.py reads them) and the first reader's session
        records (draw_record), in the order written."""
        verdicts: list[Verdict] = []
        reverts: dict[str, str] = {}
        lines: list[Record] = []
        draws: list[Record] = []
        for record in self.records(marks, ("verdict", "revert", "line", "draw")):
            if record["type"] == "line":
                lines.append(record)
                continue
            if record["type"] == "draw":
                if draw := _draw(record):
                    draws.append(draw)
                continue
            if record["type"] == "revert":
                if isinstance(record.get("verdict"), str):
                    reverts[record["verdict"]] = str(record.get("reason", ""))
                continue
            if v := _journalled(record):
                verdicts.append(v)
        return verdicts, reverts, lines, draws


DRAW_KEYS: dict[str, type | tuple[type, ...]] = {
    "session": str,
    "pass": str,
    "first_model": str,
    "floor": (int, float),
    "new": int,
    "standing": int,
    "expected": (int, float),
    "reads": int,
    "state": str,
    "created_at": str,
}


def draw_record(row: Record) -> Record:
    """A session's record of a pass's first reader (store.add_draw's row) as the journal keeps it: the window audits.py
    reads, so `rebuild` gives the same first-reader state."""
    return {"type": "draw", **{k: row[k] for k in DRAW_KEYS}}


def _draw(record: Record) -> Record | None:
    """A journalled draw record, or None for one a hand edit or a merge conflict mangled."""
    if not all(isinstance(record.get(k), t) and not isinstance(record.get(k), bool) for k, t in DRAW_KEYS.items()):
        return None
    return {k: record[k] for k in DRAW_KEYS}


class JournalMarks:
    """How far each journal file was imported into a db, so the next import reads only what was appended.

    A file is read from its mark when its first `size` bytes still hash as they did (an append-only
    file), else whole; when its stat is as it was at the last import, older than that import by more
    than a clock tick, it is not read at all (as file_index.FileIndex trusts a fact file's stat).
    """

    RACY_NS = 2_000_000_000

    def __init__(self, rows: dict[str, Mark]) -> None:
        # journal file name -> its mark at the last import
        self.rows = rows
        self.moved: dict[str, Mark] = {}

    def unread(self, path: Path) -> bytes:
        began = time.time_ns()
        st = path.stat()
        size, digest, mtime, ctime, checked = self.rows.get(path.name, (0, "", -1, -1, 0))
        if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) == (size, mtime, ctime) and ctime + self.RACY_NS < checked:
            return b""
        data = path.read_bytes()
        start = size if size <= len(data) and hashlib.sha256(data[:size]).hexdigest() == digest else 0
        # a torn last line is read again next time, with what completes it
        end = data.rfind(b"\n") + 1
        end = max(end, start)
        self.moved[path.name] = (end, hashlib.sha256(data[:end]).hexdigest(), st.st_mtime_ns, st.st_ctime_ns, began)
        return data[start:]


_REQUIRED = {"pass": str, "fingerprint": str, "subject": dict, "answer": str, "is_yes": bool, "id": str}


def _journalled(record: Record) -> Verdict | None:
    """A verdict from a journal line, or None for a line a hand edit or a merge conflict mangled."""
    if not all(isinstance(record.get(k), t) for k, t in _REQUIRED.items()) or not record["id"]:
        return None
    record = dict(record)
    record.pop("type")
    record["pass_name"] = record.pop("pass")
    try:
        return Verdict(**{k: v for k, v in record.items() if k in Verdict.__dataclass_fields__})
    except TypeError:
        return None


@dataclass
class Line:
    """A describe line as the journal and the `lines` table keep it (session/lines.py writes them)."""

    spelling: str
    carriers: str
    model: str
    prompt: str
    line: str
    judge: str = "anthropic"
    session: str | None = None
    cost_usd: float | None = 0.0
    created_at: str = ""
    # the paths of the carriers it was written from, in the order shown
    facts: tuple[str, ...] = ()
    # with no line: how many requests gave its key none (it waits at describe.max_tries)
    tries: int = 1
    # with no line: why the last request gave none
    why: str = ""

    def __post_init__(self) -> None:
        if not self.created_at:
            self.created_at = now_text()

    def journal_line(self) -> dict[str, Any]:
        return {
            "type": "line",
            "spelling": self.spelling,
            "carriers": self.carriers,
            "model": self.model,
            "prompt": self.prompt,
            "line": self.line,
            "judge": self.judge,
            "session": self.session,
            "cost_usd": self.cost_usd,
            "created_at": self.created_at,
            "facts": list(self.facts),
            **({"tries": self.tries, "why": self.why} if not self.line else {}),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Line | None:
        """A line from a journal record, or None for one a hand edit or a merge conflict mangled."""
        keys = ("spelling", "carriers", "model", "prompt", "line")
        if not all(isinstance(record.get(k), str) and (record[k] or k == "line") for k in keys):
            return None
        paths = record.get("facts")
        facts = tuple(paths) if isinstance(paths, list) and all(isinstance(p, str) for p in paths) else ()
        # absent: a line, or an empty one journalled before tries were counted
        n = record.get("tries")
        tries = n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1
        return cls(
            record["spelling"],
            record["carriers"],
            record["model"],
            record["prompt"],
            record["line"],
            judge=str(record.get("judge") or "anthropic"),
            session=record.get("session"),
            cost_usd=record.get("cost_usd"),
            created_at=str(record.get("created_at") or ""),
            facts=facts,
            tries=tries,
            why=str(record.get("why") or ""),
        )
