"""The corpus: fact files with YAML front matter, their content ids, motifs and carriers."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field, asdict
from pathlib import Path

import yaml

from .errors import BadFact

FACTS_DIR = "facts"
STATUSES = ("active", "retracted")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:^|\n)---[ \t]*(?:\r?\n|\Z)", re.S)
_KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:")
_HAS_WORD = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")  # line breaks and other control characters


@dataclass(frozen=True)
class Fact:
    path: str  # corpus-relative, posix; the fact's identity
    title: str
    motifs: tuple[str, ...]
    confidence: float
    sources: tuple[str, ...]
    links: tuple[str, ...]
    status: str
    body: str
    text: str = field(repr=False)  # the whole file, for byte-preserving rewrites
    content_id: str = ""

    @property
    def active(self) -> bool:
        return self.status == "active"

    def record(self) -> dict:
        return asdict(self)


def normalise(text: str) -> str:
    """Line endings and trailing white space do not make a different fact."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def content_id(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:16]


def exact_key(fact: Fact) -> str:
    """Two facts with the same normalised title and body are exact duplicates."""
    fold = lambda s: " ".join(s.split()).casefold()  # noqa: E731
    return hashlib.sha256(f"{fold(fact.title)}\n{fold(fact.body)}".encode()).hexdigest()


def _str_list(path: str, key: str, value, line: int | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise BadFact(path, f"'{key}' must be a list of strings, got {value!r}"[:200], line)
    return tuple(str(v).strip() for v in value)


def parse_fact(path: str, text: str) -> Fact:
    """Parse one fact file's text; raise BadFact naming the path, line and reason."""
    m = _FRONT.match(text)
    if not m:
        raise BadFact(path, "no YAML front matter (the file must start with a '---' line and close it with another)", 1)
    front = m.group(1)
    try:
        meta = yaml.safe_load(front)
    except RecursionError:
        raise BadFact(path, "front matter is nested too deeply", 2) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 2 if mark else None  # +1 for 1-based, +1 for the opening '---'
        raise BadFact(path, f"bad YAML front matter: {getattr(e, 'problem', None) or e}", line) from None
    if not isinstance(meta, dict):
        raise BadFact(path, "front matter is not a mapping of keys", 2)
    lines = _key_lines(front)
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise BadFact(path, "front matter has no 'title' (a non-empty string)", lines.get("title", 2))
    motifs = _str_list(path, "motifs", meta.get("motifs"), lines.get("motifs"))
    for motif in motifs:
        if not _HAS_WORD.search(motif):
            raise BadFact(path, f"motif {motif!r} has no letters or digits", lines.get("motifs"))
        if _CONTROL.search(motif):  # a motif spelling goes into commit subjects
            raise BadFact(path, f"motif {motif!r} contains a line break or control character", lines.get("motifs"))
    confidence = meta.get("confidence", 0.5)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise BadFact(path, f"'confidence' must be a number from 0 to 1, got {confidence!r}", lines.get("confidence"))
    status = meta.get("status", "active")
    if status not in STATUSES:
        raise BadFact(path, f"'status' must be one of {', '.join(STATUSES)}, got {status!r}", lines.get("status"))
    return Fact(
        path=path,
        title=title.strip(),
        motifs=tuple(dict.fromkeys(motifs)),
        confidence=float(confidence),
        sources=_str_list(path, "sources", meta.get("sources"), lines.get("sources")),
        links=_str_list(path, "links", meta.get("links"), lines.get("links")),
        status=status,
        body=text[m.end():].strip(),
        text=text,
        content_id=content_id(text),
    )


def _key_lines(front: str) -> dict[str, int]:
    """The file line of each top-level key, for error messages."""
    return {m.group(1): i + 2 for i, line in enumerate(front.split("\n")) if (m := _KEY_LINE.match(line))}


def read_fact(root: Path, path: str, max_bytes: int) -> Fact:
    """Read and parse one fact file, refusing files that are not small UTF-8 text inside the corpus."""
    check_path(path)
    full = root / path
    # A link may name another fact; anything else (outside the corpus, into .git) is not a fact.
    target = full.resolve()
    link = "symlink" if full.is_symlink() else "path (through a linked directory)"
    if not target.is_relative_to(root.resolve()):
        raise BadFact(path, f"{link} points outside the corpus ({target}); not followed")
    if not target.is_relative_to((root / FACTS_DIR).resolve()):
        raise BadFact(path, f"{link} points outside {FACTS_DIR}/ ({target.relative_to(root.resolve())}); not followed")
    # O_NONBLOCK and fstat: a pipe put where a fact was must not hang the session
    with open(os.open(full, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadFact(path, "not a regular file (a pipe or a device?); not read")
        if st.st_size > max_bytes:
            raise BadFact(path, f"file is {st.st_size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit "
                                "(corpus.max_fact_bytes)")
        data = f.read(max_bytes + 1)  # bounded even if the file grows after the fstat
    if len(data) > max_bytes:
        raise BadFact(path, f"file grew over the {max_bytes / 1e6:.1f} MB limit (corpus.max_fact_bytes) while read")
    if b"\0" in data:
        raise BadFact(path, "binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise BadFact(path, f"not UTF-8 (byte {e.start})", line) from None
    return parse_fact(path, text)


def check_path(path: str) -> None:
    """A fact's path goes into commit messages and the journal: it must be printable UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise BadFact(path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
                      "file name is not UTF-8; rename it") from None
    if _CONTROL.search(path):
        raise BadFact(path.encode("unicode_escape").decode("ascii"), "file name contains a control character; rename it")


def _yaml_scalar(value) -> str:
    out = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return out.removesuffix("\n").removesuffix("\n...").strip()


def _yaml_value(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    return _yaml_scalar(value)


def rewrite(text: str, changes: dict) -> str:
    """Set front-matter keys, keeping every other key's lines byte-for-byte.

    Each top-level key owns its line and the indented or list lines under it;
    a changed key's block is replaced in place, a new key is appended.
    """
    m = _FRONT.match(text)
    if not m:
        raise ValueError("no front matter")
    newline = "\r\n" if "\r\n" in m.group(0) else "\n"
    front = m.group(1)
    lines = front.split("\n")
    blocks: list[tuple[str | None, list[str]]] = []
    for line in lines:
        km = _KEY_LINE.match(line)
        if km or not blocks:
            blocks.append((km.group(1) if km else None, [line]))
        else:
            blocks[-1][1].append(line)
    done = set()
    out = []
    for key, block in blocks:
        if key in changes:
            trailing = [ln for ln in block[1:] if not ln.strip()]  # keep blank separators
            out.append(f"{key}: {_yaml_value(changes[key])}" + ("\r" if block[0].endswith("\r") else ""))
            out.extend(trailing)
            done.add(key)
        else:
            out.extend(block)
    tail = []
    while out and not out[-1].strip():
        tail.insert(0, out.pop())
    cr = "\r" if newline == "\r\n" else ""
    out += [f"{key}: {_yaml_value(value)}{cr}" for key, value in changes.items() if key not in done]
    out += tail
    new_front = "\n".join(out)
    return f"---{newline}{new_front}\n---{newline}" + text[m.end():]


def atomic_write(path: Path, text: str) -> None:
    """Write via a temp file, fsync and rename, so a half-written fact never exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".knomit-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dirfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


class Corpus:
    """The facts of one corpus as read now, with the motif index of the active ones."""

    def __init__(self, root: Path, facts: dict[str, Fact], problems: list[BadFact]):
        self.root = Path(root)
        self.facts = facts
        self.problems = problems
        self._reindex()

    def _reindex(self):
        carriers: dict[str, list[str]] = {}
        for fact in self.facts.values():
            if fact.active:
                for motif in fact.motifs:
                    carriers.setdefault(motif, []).append(fact.path)
        self.carriers = {m: sorted(paths) for m, paths in sorted(carriers.items())}

    def active(self) -> list[Fact]:
        return [f for p, f in sorted(self.facts.items()) if f.active]

    def carrier_facts(self, motif: str) -> list[Fact]:
        return [self.facts[p] for p in self.carriers.get(motif, [])]

    def put(self, path: str, text: str) -> Fact:
        """Take a rewritten or new fact into the in-memory corpus (the file is written by the caller)."""
        fact = parse_fact(path, text)
        self.facts[path] = fact
        self._reindex()
        return fact

    def linkers(self, path: str) -> list[Fact]:
        return [f for f in self.active() if path in f.links]


def fact_paths(root: Path) -> list[str]:
    """Every facts/**/*.md below the corpus, as sorted posix relative paths."""
    base = root / FACTS_DIR
    if not base.is_dir():
        return []
    paths = []
    cut = len(os.path.join(str(root), ""))  # string slicing, not pathlib: 100k paths at scale
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.endswith(".md") and not name.startswith("."):
                paths.append(os.path.join(dirpath, name)[cut:].replace(os.sep, "/"))
    return sorted(paths)


def load_corpus(root: Path, max_bytes: int = 1_048_576, index=None) -> Corpus:
    """Read every fact; bad files are collected as problems, never fatal.

    `index` (a store.FileIndex) skips parsing files whose (mtime, size) is unchanged.
    """
    root = Path(root)
    facts, problems = {}, []
    for path in fact_paths(root):
        try:
            cached = index.lookup(root, path) if index else None
            fact = cached or read_fact(root, path, max_bytes)
            if index and not cached:
                index.remember(root, fact)
            facts[path] = fact
        except BadFact as e:
            problems.append(e)
        except OSError as e:
            problems.append(BadFact(path, f"cannot read: {e.strerror or e}"))
    if index:
        index.forget_missing(set(facts))
    return Corpus(root, facts, problems)


def fact_from_record(record: dict) -> Fact:
    record = dict(record)
    for key in ("motifs", "sources", "links"):
        record[key] = tuple(record[key])
    return Fact(**record)


def dumps_record(fact: Fact) -> str:
    return json.dumps(fact.record(), ensure_ascii=False)
