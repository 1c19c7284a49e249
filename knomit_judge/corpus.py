"""The corpus as read: fact files with YAML front matter, their content ids, motifs and carriers."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import yaml

from .config import CorpusConfig
from .errors import BadFact, TemplateNote
from .jsonl import dumps
from .layout import DEFAULT_PATHS, covered, fact_paths, glob_prefix, where_facts_may_be
from .notes import OBSIDIAN_TAG_KEYS, inline_tags, obsidian_tags, template_marker

FACTS_DIR = "facts"
DEFAULT_MOTIF_KEYS = ("motifs",)
STATUSES = ("active", "retracted")
# knomit's link to a fact: kb://<12-hex repo id>/<path in that repo>
KB_SCHEME = "kb://"
# http:, src:, knomit-judge:, ... : a source, never a link
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# The front matter between its two `---` lines; group 1 is what they hold. A UTF-8 byte-order mark before
# it (Windows editors write one) is part of the file, not a reason to skip it.
BOM = "\ufeff"
FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)(?:^|\n)---[ \t]*(?:\r?\n|\Z)", re.S)
# a first line that opens front matter
OPENS_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
# What reading a layout's files depends on besides their bytes: a parse cached under another is made again.
# 2: aliases, file-name titles, notes without front matter; 3: templates, inline and string tags
PARSE_VERSION = 3
# a top-level key's first line; group 1 is the key
KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:")
_HAS_WORD = re.compile(r"\w", re.UNICODE)
# a line starting `#word`: a heading to knomit's reader, an inline tag to Obsidian
TAG_LINE = re.compile(r"#[^#\s]")
# line breaks and other control characters
CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


@dataclass(frozen=True)
class Fact:
    # corpus-relative, posix; the fact's identity
    path: str
    title: str
    motifs: tuple[str, ...]
    confidence: float
    sources: tuple[str, ...]
    links: tuple[str, ...]
    status: str
    body: str
    # the whole file, for byte-preserving rewrites
    text: str = field(repr=False)
    content_id: str = ""
    # an int `sources` as written (knomit's count), else how many sources are listed
    source_count: int = 0
    # other names the note goes by (Obsidian's `aliases:`), which links may use
    aliases: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.status == "active"

    def record(self) -> dict[str, Any]:
        return asdict(self)


def normalise(text: str) -> str:
    """Line endings and trailing white space do not make a different fact."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def content_id(text: str) -> str:
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()[:16]


def fact_text(fact: Fact) -> str:
    """What a fact is embedded as (prune, discovery and alias's content signal): title and body, one cached vector."""
    return f"{fact.title}\n{fact.body}"


def exact_key(fact: Fact) -> str:
    """Two facts with the same normalised title and body are exact duplicates."""
    fold = lambda s: " ".join(s.split()).casefold()  # noqa: E731
    return hashlib.sha256(f"{fold(fact.title)}\n{fold(fact.body)}".encode()).hexdigest()


def _str_list(path: str, key: str, value: Any, line: int | None) -> tuple[str, ...]:
    """A front-matter list of strings (numbers read as their text), blanks dropped; BadFact for any other shape."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        raise BadFact(path, f"'{key}' must be a list of strings, got {value!r}"[:200], line)
    return tuple(s for v in value if (s := str(v).strip()))


class _Loader(yaml.SafeLoader):
    """safe_load without dates: `expires: 2026-13-45` in a key we never use must not stop a fact being read,
    and a date is never needed as a date here (the text is what is kept)."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def load_yaml(text: str) -> Any:
    """The YAML document in `text`, read safely and with dates left as text."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_front(path: str, front: str) -> Any:
    """The front matter's value, refusing a top-level key written twice.

    PyYAML keeps the last of two `motifs:` lines and drops the other without a word; a rewrite
    would then commit that loss. knomit's own reader (Go yaml.v3) refuses such a file too.
    """
    loader = _Loader(front)
    try:
        node = loader.get_single_node()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    # +1 for 1-based, +1 for the opening '---'
                    line = key.start_mark.line + 2
                    if key.value in seen:
                        raise BadFact(
                            path,
                            f"key '{key.value}' is written twice (lines {seen[key.value]} and "
                            f"{line}): one value would be lost; keep one",
                            line,
                        )
                    seen[key.value] = line
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def link_target(ref: str) -> str | None:
    """The corpus path a link or ref names: kb://<repo>/<path> or a plain path; None for a URL or src:// ref."""
    ref = ref.strip()
    if ref.startswith(KB_SCHEME):
        _, _, rel = ref[len(KB_SCHEME) :].partition("/")
        return rel or None
    if not ref or _SCHEME.match(ref):
        return None
    return ref.removeprefix("./")


def front_matter(text: str) -> dict[str, Any]:
    """The front matter of a fact already read (so it parses); {} when there is none."""
    m = FRONT.match(text)
    meta = load_yaml(m.group(1)) if m else None
    return meta if isinstance(meta, dict) else {}


def body_start(text: str) -> int:
    """Where a note's Markdown starts: after its front matter, or after a byte-order mark, or at 0."""
    m = FRONT.match(text)
    return m.end() if m else len(BOM) if text.startswith(BOM) else 0


def heading_title(body: str, tags: bool = False) -> tuple[str, str] | None:
    """(title, rest) from the first `#` heading: the first non-blank line if it is one (knomit's rule),
    else the first `# ` line further down; None when the body has no heading. With `tags` (a layout that
    reads inline tags) a first line `#word` is a tag, not a heading, as Obsidian reads it."""
    lines = body.strip().split("\n")
    at = _heading_at(lines, tags)
    if at is None:
        return None
    title = lines[at].lstrip("#").strip()
    if not title:
        return None
    rest = "\n".join(lines[:at] + lines[at + 1 :]).strip()
    return title, rest


def _heading_at(lines: list[str], tags: bool = False) -> int | None:
    """The line the title is taken from: the first if it is a heading (knomit's rule), else the first `# ` line."""
    first = lines[0] if lines else ""
    return (
        0
        if first.startswith("#") and not (tags and TAG_LINE.match(first))
        else next((i for i, ln in enumerate(lines) if ln.startswith("# ")), None)
    )


def empty_heading(body: str, tags: bool = False) -> int | None:
    """The line of `body.strip()` heading_title would take the title from, when it holds only '#' marks."""
    lines = body.strip().split("\n")
    at = _heading_at(lines, tags)
    return at if at is not None and not lines[at].lstrip("#").strip() else None


def parse_fact(
    path: str,
    text: str,
    motif_keys: tuple[str, ...] = DEFAULT_MOTIF_KEYS,
    *,
    front_matter: str = "required",
    inline: bool = False,
) -> Fact:
    """Parse one fact file's text; raise BadFact naming the path, line and reason.

    Tolerant of the layouts users already have: the title is the `title` key, else the first
    `#` heading, else the file name; `sources` is a list or an int count; `refs` are sources, and
    those naming a corpus path (kb://<repo>/<path> or a plain path) are links too; motifs are the
    values of every `motif_keys` list (`tags` also as Obsidian writes it: one string, a `#` before a
    value), and with `inline` the body's `#tags` too; `aliases` are names links may use; keys it does
    not use are never looked at. `front_matter = "optional"` (a vault, a folder of notes) reads a note
    without any; "required" (knomit's rule, and ours) reports it. A template (`{{date}}`) raises
    TemplateNote: no fact, and no problem either.
    """
    m = FRONT.match(text)
    if marker := template_marker(text, m.end() if m else 0):
        raise TemplateNote(path, f"a template ({marker[0]}): not read", marker[1])
    if m:
        front = m.group(1)
        meta = _front_meta(path, front)
        lines = _key_lines(front)
        start = m.end()
    elif front_matter == "optional" and not OPENS_FRONT.match(text):
        meta, lines, start = {}, {}, len(BOM) if text.startswith(BOM) else 0
    else:
        raise BadFact(
            path,
            "front matter is not closed (no '---' line after it)"
            if front_matter == "optional"
            else "no YAML front matter (the file must start with a '---' line and close it with another)",
            1,
        )
    body = text[start:].strip()
    title = meta.get("title")
    if isinstance(title, str) and title.strip():
        title = title.strip()
    elif "title" in meta:
        raise BadFact(path, "front matter has no 'title' (a non-empty string)", lines.get("title", 2))
    elif heading := heading_title(body, inline):
        title, body = heading
    # the heading is there, with nothing after its '#'
    elif (at := empty_heading(body, inline)) is not None:
        raw = text[start:]
        # the lines body.strip() took off its start
        blank = raw[: len(raw) - len(raw.lstrip())].count("\n")
        raise BadFact(
            path,
            "no title: the '# ' heading is empty (write the title after the '#'), and there is no 'title' key",
            text[:start].count("\n") + 1 + blank + at,
        )
    else:
        # notes titled by their file name (Obsidian's rule)
        title = PurePosixPath(path).stem.strip()
        if not title:
            raise BadFact(path, "no title: no 'title' key, no '# ' heading, and the file name is empty", 1)
    motifs: list[str] = []
    for key in motif_keys:
        value = obsidian_tags(meta.get(key)) if key in OBSIDIAN_TAG_KEYS else meta.get(key)
        for motif in _str_list(path, key, value, lines.get(key)):
            where = "" if key == "motifs" else f" (in '{key}')"
            if not _HAS_WORD.search(motif):
                raise BadFact(path, f"motif {motif!r} has no letters or digits{where}", lines.get(key))
            # a motif spelling goes into commit subjects
            if CONTROL.search(motif):
                raise BadFact(
                    path, f"motif {motif!r} contains a line break or control character{where}", lines.get(key)
                )
            motifs.append(motif)
    if inline:
        # a tag's characters hold no control character, and one of them is a word's
        motifs += inline_tags(text[start:])
    confidence = meta.get("confidence", 0.5)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        raise BadFact(path, f"'confidence' must be a number from 0 to 1, got {confidence!r}", lines.get("confidence"))
    status = meta.get("status", "active")
    if status not in STATUSES:
        raise BadFact(path, f"'status' must be one of {', '.join(STATUSES)}, got {status!r}", lines.get("status"))
    raw_sources = meta.get("sources")
    sources: tuple[str, ...]
    count: int | None
    if isinstance(raw_sources, int) and not isinstance(raw_sources, bool):
        if raw_sources < 0:
            raise BadFact(path, f"'sources' as a count must not be negative, got {raw_sources}", lines.get("sources"))
        sources, count = (), raw_sources
    else:
        sources = _str_list(path, "sources", raw_sources, lines.get("sources"))
        count = None
    refs = _str_list(path, "refs", meta.get("refs"), lines.get("refs"))
    links = _str_list(path, "links", meta.get("links"), lines.get("links"))
    links = tuple(t for ref in (*links, *refs) if (t := link_target(ref)))
    sources = (*sources, *refs)
    aliases = _aliases(path, meta, lines)
    return Fact(
        path=path,
        title=title,
        motifs=tuple(dict.fromkeys(motifs)),
        confidence=float(confidence),
        sources=tuple(sources),
        links=tuple(dict.fromkeys(links)),
        status=status,
        body=body,
        text=text,
        content_id=content_id(text),
        source_count=len(sources) if count is None else count,
        aliases=aliases,
    )


def _front_meta(path: str, front: str) -> dict[str, Any]:
    """The front matter's mapping; BadFact naming the line for YAML that does not parse or is no mapping."""
    try:
        meta = load_front(path, front)
    except RecursionError:
        raise BadFact(path, "front matter is nested too deeply", 2) from None
    except yaml.YAMLError as e:
        mark = _broken_at(e)
        # +1 for 1-based, +1 for the opening '---'
        line = mark.line + 2 if mark else None
        raise BadFact(path, f"bad YAML front matter: {getattr(e, 'problem', None) or e}", line) from None
    if meta is None and not front.strip():
        meta = {}
    if not isinstance(meta, dict):
        raise BadFact(path, "front matter is not a mapping of keys", 2)
    return meta


def _broken_at(e: yaml.YAMLError) -> Any:
    """Where the YAML is broken: the line a scalar, key or bracket started on when the scanner or an unclosed
    flow collection is what failed (PyYAML's problem mark is then where it gave up, often the next line), else
    the problem's own mark."""
    context, problem = getattr(e, "context_mark", None), getattr(e, "problem_mark", None)
    if context is not None and (
        isinstance(e, yaml.scanner.ScannerError) or "flow" in (getattr(e, "context", "") or "")
    ):
        return context
    return problem


# the keys of a note's other names: Obsidian's, then its older one
ALIAS_KEYS = ("aliases", "alias")


def _aliases(path: str, meta: dict[str, Any], lines: dict[str, int]) -> tuple[str, ...]:
    """The note's other names: Obsidian's `aliases` (a list, or one name), and its older `alias`."""
    names: list[str] = []
    for key in ALIAS_KEYS:
        value = meta.get(key)
        names.extend(
            _str_list(
                path,
                key,
                [value] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else value,
                lines.get(key),
            )
        )
    return tuple(dict.fromkeys(names))


def _key_lines(front: str) -> dict[str, int]:
    """The file line of each top-level key, for error messages."""
    return {m.group(1): i + 2 for i, line in enumerate(front.split("\n")) if (m := KEY_LINE.match(line))}


def read_fact(root: Path, path: str, max_bytes: int, layout: CorpusConfig | None = None) -> Fact:
    """Read and parse one fact file, refusing files that are not small UTF-8 text inside the corpus."""
    globs = tuple(layout.paths) if layout else DEFAULT_PATHS
    exclude = tuple(layout.exclude) if layout else ()
    check_path(path)
    full = root / path
    # A link may name another fact; anything else (outside the corpus, into .git) is not a fact.
    try:
        target = full.resolve()
    # `ln -s self.md self.md`: Python 3.11 raises RuntimeError, 3.13 OSError
    except (RuntimeError, OSError):
        raise BadFact(path, "symlink loop (the link leads back to itself); not followed") from None
    link = "symlink" if full.is_symlink() else "path (through a linked directory)"
    if not target.is_relative_to(root.resolve()):
        raise BadFact(path, f"{link} points outside the corpus ({target}); not followed")
    if not covered(target.relative_to(root.resolve()).as_posix(), globs, exclude):
        raise BadFact(
            path, f"{link} points outside {', '.join(globs)} ({target.relative_to(root.resolve())}); not followed"
        )
    # O_NONBLOCK and fstat: a pipe put where a fact was must not hang the session
    with open(os.open(full, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadFact(path, "not a regular file (a pipe or a device?); not read")
        if st.st_size > max_bytes:
            raise BadFact(
                path,
                f"file is {st.st_size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit (corpus.max_fact_bytes)",
            )
        # bounded even if the file grows after the fstat
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadFact(path, f"file grew over the {max_bytes / 1e6:.1f} MB limit (corpus.max_fact_bytes) while read")
    if b"\0" in data:
        raise BadFact(path, "binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise BadFact(path, f"not UTF-8 (byte {e.start})", line) from None
    return parse_as(layout, path, text)


def parse_as(layout: CorpusConfig | None, path: str, text: str) -> Fact:
    """parse_fact with a layout's reading rules ([corpus] motif_keys, front_matter, inline_tags; the defaults
    for None)."""
    if layout is None:
        return parse_fact(path, text)
    return parse_fact(path, text, tuple(layout.motif_keys), front_matter=layout.front_matter, inline=layout.inline_tags)


def check_path(path: str) -> None:
    """A fact's path goes into commit messages and the journal: it must be printable UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise BadFact(
            path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"),
            "file name is not UTF-8; rename it",
        ) from None
    if CONTROL.search(path):
        raise BadFact(
            path.encode("unicode_escape").decode("ascii"), "file name contains a control character; rename it"
        )


class Corpus:
    """The facts of one corpus as read now, with the motif index of the active ones.

    `layout` (a config.CorpusConfig, or None for the defaults) says where facts are, which
    front-matter keys hold motifs and how a retraction is written.
    """

    def __init__(
        self,
        root: Path,
        facts: dict[str, Fact],
        problems: list[BadFact],
        layout: CorpusConfig | None = None,
        *,
        files: int | None = None,
        templates: list[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.facts = facts
        self.problems = problems
        # notes with template placeholders: matched, and left out
        self.templates = templates or []
        self.paths = tuple(layout.paths) if layout else DEFAULT_PATHS
        self.exclude = tuple(layout.exclude) if layout else ()
        self.motif_keys = tuple(layout.motif_keys) if layout else DEFAULT_MOTIF_KEYS
        self.inline_tags = layout.inline_tags if layout else False
        self.retract = layout.retract if layout else "status"
        self.layout = layout
        # fact files the paths matched
        self.files = len(facts) + len(problems) + len(self.templates) if files is None else files
        # Told of every put(), after it: what is derived from the notes as a whole (links.Vault) stays in step.
        self.watchers: list[Callable[[str, str | None], None]] = []
        self._reindex()

    def _reindex(self) -> None:
        # candidate_lists.facts_digest, made again when next asked
        self._digest: str | None = None
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

    def parse(self, path: str, text: str) -> Fact:
        return parse_as(self.layout, path, text)

    def check(self, path: str, text: str) -> None:
        """A decision's write checked before it is made (gitops.Applier.commit): a fact must parse.

        A note that is no fact (outside the paths, or one the reader already skipped) is written only to keep
        its links, which never touches what made it unreadable: it is checked by the rewrite (relink.py).
        """
        if self.covers(path) and not self.skipped(path):
            self.parse(path, text)

    def put(self, path: str, text: str | None) -> Fact | None:
        """Take a rewritten, new or deleted (None) file into the in-memory corpus (the caller writes the file).

        A fact is parsed and indexed; a note that is no fact (relinked by a decision) is only told to the watchers.
        """
        fact: Fact | None = None
        if text is None:
            self.facts.pop(path, None)
            self._reindex()
        elif self.covers(path):
            try:
                fact = self.parse(path, text)
            # a note the reader skipped (or a template), relinked: still skipped
            except BadFact:
                if not self.skipped(path):
                    raise
            if fact is not None:
                self.facts[path] = fact
                self._reindex()
        for watch in self.watchers:
            watch(path, text)
        return fact

    def covers(self, path: str) -> bool:
        """Whether a path is one of this corpus's fact paths (matched by `paths`, by no `exclude` glob); a note
        elsewhere is read for its links only."""
        return covered(path, self.paths, self.exclude)

    def skipped(self, path: str) -> bool:
        """Whether the reader left the file at `path` out: a problem named, or a template."""
        return path in self.templates or any(p.path == path for p in self.problems)

    def linkers(self, path: str) -> list[Fact]:
        return [f for f in self.active() if path in f.links]

    def prefixes(self) -> list[str]:
        """The directories the fact paths start from ("" for the corpus root)."""
        return list(dict.fromkeys(glob_prefix(g) for g in self.paths))


class FactIndex(Protocol):
    """A cache of parsed facts (file_index.FileIndex): load_corpus takes an unchanged file's fact from it, unparsed."""

    parse_key: str

    def lookup(self, root: Path, path: str) -> Fact | None: ...

    def remember(self, root: Path, fact: Fact) -> None: ...

    def forget_missing(self, present: set[str]) -> None: ...


def load_corpus(
    root: Path, max_bytes: int = 1_048_576, index: FactIndex | None = None, layout: CorpusConfig | None = None
) -> Corpus:
    """Read every fact the layout's paths match; bad files are collected as problems, never fatal.

    `index` (a file_index.FileIndex) skips parsing files whose (mtime, size) is unchanged.
    """
    root = Path(root)
    facts, problems, templates = {}, [], []
    paths = fact_paths(root, tuple(layout.paths) if layout else DEFAULT_PATHS, tuple(layout.exclude) if layout else ())
    if index:
        index.parse_key = parse_key(layout)
    for path in paths:
        try:
            cached = index.lookup(root, path) if index else None
            fact = cached or read_fact(root, path, max_bytes, layout)
            if index and not cached:
                index.remember(root, fact)
            facts[path] = fact
        except TemplateNote:
            templates.append(path)
        except BadFact as e:
            problems.append(e)
        except OSError as e:
            problems.append(BadFact(path, f"cannot read: {e.strerror or e}"))
    if index:
        index.forget_missing(set(facts))
    return Corpus(root, facts, problems, layout, files=len(paths), templates=templates)


def parse_key(layout: CorpusConfig | None) -> str:
    """What parsing depends on besides the file: a cached parse made with other settings, or by an older
    reader (PARSE_VERSION), is stale."""
    motif_keys, front = (list(layout.motif_keys), layout.front_matter) if layout else (list(DEFAULT_MOTIF_KEYS), "")
    return dumps([PARSE_VERSION, motif_keys, front or "required", bool(layout and layout.inline_tags)])


def fact_from_record(record: dict[str, Any]) -> Fact:
    """A Fact from its record(), as the file index keeps it."""
    record = dict(record)
    for key in ("motifs", "sources", "links", "aliases"):
        record[key] = tuple(record.get(key, ()))
    return Fact(**record)


@dataclass
class CorpusReport:
    """What a session read: a corpus that matched or yielded no fact is `broken`, never an empty success."""

    state: str  # "read" | "broken"
    paths: list[str]
    files: int  # files the paths matched
    read: int
    skipped: int
    why: str = ""
    # matched files left out as templates (`{{date}}`): neither read nor skipped
    templates: int = 0

    def line(self) -> str:
        if self.state == "broken":
            return f"corpus: broken - {self.why}"
        left = f", {self.templates} template{'s' * (self.templates != 1)} left out" if self.templates else ""
        return (
            f"corpus: read {self.read} of {self.files} fact file{'s' * (self.files != 1)}, {self.skipped} skipped{left}"
        )

    def json(self) -> dict[str, Any]:
        return asdict(self)


def corpus_report(corpus: Corpus) -> CorpusReport:
    """The corpus line of a session, saying why when nothing could be read."""
    globs = ", ".join(corpus.paths)
    read, skipped = len(corpus.facts), len(corpus.problems)
    why = ""
    if corpus.files == 0:
        why = f"paths {globs} matched no file; {where_facts_may_be(corpus.root)}"
    elif read == 0:
        shown = "; ".join(str(p) for p in corpus.problems[:3])
        left = f", {len(corpus.templates)} left out as templates" if corpus.templates else ""
        why = (
            f"read 0 of {corpus.files} fact file(s) matched by {globs}, {skipped} skipped{left}"
            + (f": {shown}" if shown else "")
            + ("; ..." if skipped > 3 else "")
        )
    return CorpusReport(
        "broken" if why else "read", list(corpus.paths), corpus.files, read, skipped, why, len(corpus.templates)
    )
