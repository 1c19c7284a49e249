"""Links between the notes of a corpus, read and resolved as Obsidian resolves them.

Every Markdown note of the repository is read for its links, not only the facts the paths read:
`[[x]]`, `[[x|text]]`, `[[x#heading]]`, `[[x#^block]]`, `![[x]]`, `[[folder/x]]`, `[text](x.md)`,
`[text](../folder/x%20y.md)`, wikilinks in front-matter properties (`related: "[[x]]"`), the paths of
`links`/`refs` (ours and knomit's kb:// refs), and a canvas's file cards. A link inside code is no link.
The Vault keeps every note's links and the names a link may use, in step with the corpus's writes.
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import unquote
from weakref import WeakKeyDictionary

import yaml

from .corpus import _SCHEME, ALIAS_KEYS, FRONT, KEY_LINE, Corpus, Fact, link_target, load_front
from .errors import BadFact
from .layout import fact_paths

# links that name a note: an alias may name it too
WIKI_KINDS = ("wikilink", "embed", "property")
# [[inner]], an embed with a leading !; what is inside is split into name#subpath|display by _split_wiki
WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
# [text](dest "title"): dest in <..> (spaces allowed) or without spaces, balanced parentheses inside
MDLINK = re.compile(
    r"(!?)\[((?:[^\[\]\n\\]|\\.|\[[^\[\]\n]*\])*)\]\(\s*(<[^<>\n]*>|(?:[^\s()<>\\]|\\.|\((?:[^\s()\\]|\\.)*\))+)"
    r"((?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?)\s*\)"
)
# a code fence, in a quote or callout too
FENCE = re.compile(r"^((?:[ \t]*>)*[ \t]{0,3})(`{3,}|~{3,})(.*)$")
INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)((?:[^\n]|\n(?![ \t]*\n))+?)(?<!`)\1(?!`)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")
NOTE_SUFFIXES = (".md", ".canvas")


@dataclass(frozen=True)
class Link:
    """One link as written in a note: what it names, and where it is (to rewrite it in place)."""

    # the path of the note it is in
    note: str
    # wikilink | embed | markdown | property | path | canvas
    kind: str
    # the name or path it names (a Markdown link's decoded, without its #fragment)
    target: str
    # "#heading", "#^block", "#a#b"; "" for the whole note
    subpath: str = ""
    display: str | None = None
    # its span in the note's text; -1 for a value of `links`/`refs` or a canvas card
    start: int = -1
    end: int = -1
    line: int = 0
    raw: str = ""  # as written
    # the front-matter key it is in
    key: str | None = None
    # on a table row, where a `|` inside a link is written `\\|`
    table: bool = False

    def where(self) -> str:
        return f"{self.note}:{self.line}" if self.line else self.note


@dataclass(frozen=True)
class BrokenLink:
    """A link that leads to nothing, or to a retracted note (`to`), or, for a decision, elsewhere than before."""

    link: Link
    # "nothing" | "retracted" | "moved"
    why: str
    to: str | None = None

    def json(self) -> dict[str, Any]:
        return {
            "note": self.link.note,
            "line": self.link.line,
            "link": self.link.raw,
            "kind": self.link.kind,
            "target": self.link.target + self.link.subpath,
            "why": self.why,
            "to": self.to,
        }

    def line(self) -> str:
        said = {
            "nothing": "leads to no note or file",
            "retracted": f"leads to the retracted {self.to}",
            "moved": f"would no longer lead to {self.to}",
        }[self.why]
        return f"{self.link.where()}: {self.link.raw} {said}"


def is_note(path: str) -> bool:
    """A file read for links: a Markdown note or a canvas."""
    return path.lower().endswith(NOTE_SUFFIXES)


def name_key(name: str) -> str:
    """What a link and a file are matched by first: the last part of the name, case-folded, without `.md`."""
    last = PurePosixPath(name.strip().lstrip("/")).name.casefold() if name.strip() else ""
    return last.removesuffix(".md")


def stem(path: str) -> str:
    """A note's name as a wikilink writes it: its file name without `.md`."""
    name = PurePosixPath(path).name
    return name[:-3] if name.lower().endswith(".md") else name


def _split_wiki(inner: str) -> tuple[str, str, str | None]:
    """(name, subpath, display) of what a wikilink holds; `\\|` (a table's pipe) separates as `|` does."""
    head, bar, display = inner.partition("|")
    head = head.removesuffix("\\") if bar else head
    name, hash_, sub = head.partition("#")
    return name, hash_ + sub, display if bar else None


def code_spans(text: str) -> list[tuple[int, int]]:
    """The spans of fenced code blocks and inline code, where nothing is a link."""
    spans: list[tuple[int, int]] = []
    pos, fence, opened, plain_from = 0, "", 0, 0
    for line in text.splitlines(keepends=True):
        m = FENCE.match(line.rstrip("\r\n"))
        if fence:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3).strip():
                spans.append((opened, pos + len(line)))
                fence, plain_from = "", pos + len(line)
        elif m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            spans += [(c.start(), c.end()) for c in INLINE_CODE.finditer(text, plain_from, pos)]
            fence, opened = m.group(2), pos
        pos += len(line)
    # an unclosed fence runs to the end, as CommonMark reads it
    if fence:
        spans.append((opened, len(text)))
    else:
        spans += [(c.start(), c.end()) for c in INLINE_CODE.finditer(text, plain_from)]
    return sorted(spans)


def _inside(spans: list[tuple[int, int]], at: int) -> bool:
    i = bisect.bisect_right(spans, (at, float("inf"))) - 1
    return i >= 0 and spans[i][0] <= at < spans[i][1]


def note_links(path: str, text: str, fact: Fact | None = None) -> list[Link]:
    """Every link the note at `path` holds, in the order written. `fact`: the note as parsed already (its
    `links`/`refs` then need no second YAML read)."""
    if path.lower().endswith(".canvas"):
        return canvas_links(path, text)
    front = FRONT.match(text)
    start = front.end() if front else 0
    meta = front_mapping(path, front.group(1)) if front and (fact is None or "[[" in front.group(1)) else None
    lines = _Lines(text)
    out: list[Link] = []
    if front and meta is not None:
        out += _property_links(path, text, front, meta, lines)
    if fact is not None:
        out += [Link(path, "path", t, raw=t, line=_line_of(text, t, front)) for t in fact.links if "[[" not in t]
    elif meta:
        out += [
            Link(path, "path", t, raw=ref, key=key, line=_line_of(text, ref, front))
            for key, ref, t in _path_links(meta)
        ]
    if "[[" in text[start:] or "](" in text[start:]:
        out += _body_links(path, text, start, lines)
    # a template's placeholder names nothing yet
    return [link for link in out if "{{" not in link.target]


def front_mapping(path: str, front: str) -> dict[str, Any] | None:
    """The front matter's mapping, or None where it does not parse (the note's front matter is then not read)."""
    try:
        meta = load_front(path, front)
    except (BadFact, yaml.YAMLError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else {} if meta is None else None


class _Lines:
    """Line numbers of offsets in a text, counted once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.breaks: list[int] | None = None

    def at(self, offset: int) -> int:
        if self.breaks is None:
            self.breaks = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_left(self.breaks, offset) + 1

    def on_table_row(self, offset: int) -> bool:
        return self.text[self.text.rfind("\n", 0, offset) + 1 : offset].lstrip().startswith("|")


def _body_links(path: str, text: str, start: int, lines: _Lines) -> list[Link]:
    code = code_spans(text[start:])
    markdown = [m for m in MDLINK.finditer(text, start) if not _inside(code, m.start() - start)]
    dests = sorted((m.start(3) - start, m.end(3) - start) for m in markdown)  # `[u](https://x/[[y]])`: a URL's text
    out: list[Link] = []
    taken: list[tuple[int, int]] = []
    for m in WIKILINK.finditer(text, start):
        if _inside(code, m.start() - start) or _inside(dests, m.start() - start):
            continue
        name, sub, display = _split_wiki(m.group(2))
        kind = "embed" if m.group(1) else "wikilink"
        out.append(
            Link(
                path,
                kind,
                name.strip(),
                sub,
                display,
                m.start(),
                m.end(),
                lines.at(m.start()),
                m.group(0),
                table=lines.on_table_row(m.start()),
            )
        )
        taken.append((m.start(), m.end()))
    for m in markdown:
        if any(a < m.end() and m.start() < b for a, b in taken):
            continue
        dest = m.group(3)
        dest = dest[1:-1] if dest.startswith("<") else dest
        target, hash_, frag = dest.partition("#")
        # a same-note #anchor, or a URL: no note of this corpus
        if not target or _SCHEME.match(target):
            continue
        out.append(
            Link(
                path,
                "markdown",
                unquote(target),
                hash_ + unquote(frag),
                m.group(2),
                m.start(),
                m.end(),
                lines.at(m.start()),
                m.group(0),
            )
        )
    return sorted(out, key=lambda link: link.start)


def _property_links(path: str, text: str, front: re.Match[str], meta: dict[str, Any], lines: _Lines) -> list[Link]:
    """Wikilinks in the values of front-matter keys (`related: "[[x]]"`, lists of them), by their text."""
    out: list[Link] = []
    key = None
    at = front.start(1)
    for line in front.group(1).split("\n"):
        if km := KEY_LINE.match(line):
            key = km.group(1)
        if key is not None and key in meta and "[[" in line:
            for m in WIKILINK.finditer(line):
                name, sub, display = _split_wiki(m.group(2))
                out.append(
                    Link(
                        path,
                        "property",
                        name.strip(),
                        sub,
                        display,
                        at + m.start(),
                        at + m.end(),
                        lines.at(at + m.start()),
                        m.group(0),
                        key,
                    )
                )
        at += len(line) + 1
    return out


def _path_links(meta: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, ref, path) for each corpus path `links` and `refs` name (kb://<repo>/<path> or a plain path)."""
    out = []
    for key in ("links", "refs"):
        value = meta.get(key)
        for ref in value if isinstance(value, list) else []:
            if isinstance(ref, str) and "[[" not in ref and (target := link_target(ref)):
                out.append((key, ref, target))
    return out


def _line_of(text: str, ref: str, front: re.Match[str] | None) -> int:
    """The line of the front matter a ref is written on (0 when it cannot be found as written)."""
    at = text.find(ref, front.start(1), front.end(1)) if front else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else 0


def canvas_links(path: str, text: str) -> list[Link]:
    """A canvas's file cards (JSON Canvas `{"type": "file", "file": PATH}`): each names a file by its path."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    nodes = data.get("nodes") if isinstance(data, dict) else None
    out = []
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, dict) and node.get("type") == "file" and isinstance(node.get("file"), str):
            sub = node.get("subpath")
            out.append(Link(path, "canvas", node["file"], sub if isinstance(sub, str) else "", raw=node["file"]))
    return out


def note_aliases(path: str, text: str) -> tuple[str, ...]:
    """The `aliases` (or `alias`) of a note that is no fact, read as the corpus reader reads a fact's."""
    front = FRONT.match(text)
    meta = front_mapping(path, front.group(1)) if front else None
    names: list[str] = []
    for key in ALIAS_KEYS:
        value = (meta or {}).get(key)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
                names.append(str(v).strip())
    return tuple(dict.fromkeys(names))


def _read(full: Path, max_bytes: int) -> str | None:
    """A note's text, or None for one that is not small UTF-8 text (a link cannot be read from it)."""
    try:
        if full.is_symlink() or full.stat().st_size > max_bytes:
            return None
        data = full.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def repository_files(root: Path) -> list[str]:
    """The files of the repository a link may name, as git sees them: tracked, or new and not ignored.

    A git-ignored note (`private/`, a build's output) is no note of the corpus: it is never read for links, so a
    decision never writes it into a commit. Hidden folders are left out as Obsidian leaves them out; outside a
    git repository (a library caller's folder), every file that is not hidden.
    """
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return fact_paths(root, ("**",))
    names = (raw.decode("utf-8", "surrogateescape") for raw in done.stdout.split(b"\0") if raw)
    return sorted(
        p
        for p in dict.fromkeys(names)
        if not any(part.startswith(".") for part in p.split("/")) and (root / p).is_file()
    )


def headings(text: str) -> set[str]:
    """The note's headings, as a heading link is matched: case-folded, white space collapsed."""
    code = code_spans(text)
    out, at = set(), 0
    for line in text.splitlines(keepends=True):
        if line.startswith("#") and not _inside(code, at) and (m := HEADING.match(line.rstrip("\r\n"))):
            out.add(fold(m.group(1)))
        at += len(line)
    return out


def fold(s: str) -> str:
    return " ".join(s.split()).casefold()


# How a link found its note (Vault.resolve): its own note, a path, a name, an alias; "": it leads nowhere.
Resolved = Literal["self", "path", "name", "alias", ""]


class Vault:
    """Every note of a corpus with its links, the names a link may use, and the resolution of each link.

    Built from the corpus once (facts as read, other notes from disk) and kept in step by the corpus's
    watchers: each decision's writes update it, so a session reads each file once.
    """

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        # case-folded path -> path: every file a link may name
        self.files: dict[str, str] = {}
        # name_key -> the files of that name
        self.by_name: dict[str, list[str]] = {}
        self.texts: dict[str, str] = {}  # note -> its text
        self.links: dict[str, list[Link]] = {}
        # active note -> its aliases
        self.aliases: dict[str, tuple[str, ...]] = {}
        # case-folded alias -> the active notes that have it
        self.alias_of: dict[str, set[str]] = {}
        # name_key -> the notes holding a link by that name
        self.linked_by: dict[str, set[str]] = {}
        self.retracted: set[str] = set()
        self.max_bytes = corpus.layout.max_fact_bytes if corpus.layout else 1_048_576
        for path in repository_files(corpus.root):
            self._add_file(path)
            if is_note(path):
                fact = corpus.facts.get(path)
                text = fact.text if fact else _read(corpus.root / path, self.max_bytes)
                if text is not None:
                    self._index(path, text, fact)
        corpus.watchers.append(self.put)

    # -- keeping it in step

    def _add_file(self, path: str) -> None:
        if path.casefold() not in self.files:
            self.files[path.casefold()] = path
            self.by_name.setdefault(name_key(path), []).append(path)

    def _drop_file(self, path: str) -> None:
        if self.files.pop(path.casefold(), None) is not None:
            same = self.by_name.get(name_key(path), [])
            if path in same:
                same.remove(path)

    def _index(self, path: str, text: str, fact: Fact | None) -> None:
        links = note_links(path, text, fact)
        self.texts[path], self.links[path] = text, links
        for link in links:
            if key := name_key(link.target):
                self.linked_by.setdefault(key, set()).add(path)
        if fact is not None and not fact.active:
            self.retracted.add(path)
            return
        names = fact.aliases if fact is not None else note_aliases(path, text) if path.endswith(".md") else ()
        self.aliases[path] = names
        for name in names:
            self.alias_of.setdefault(name.casefold(), set()).add(path)

    def _unindex(self, path: str) -> None:
        for link in self.links.pop(path, []):
            if (key := name_key(link.target)) in self.linked_by:
                self.linked_by[key].discard(path)
        for name in self.aliases.pop(path, ()):
            self.alias_of.get(name.casefold(), set()).discard(path)
        self.texts.pop(path, None)
        self.retracted.discard(path)

    def put(self, path: str, text: str | None) -> None:
        """Take a written (or deleted: None) file in; the corpus calls it after each of its own put()s."""
        self._unindex(path)
        if text is None:
            self._drop_file(path)
            return
        self._add_file(path)
        if is_note(path):
            self._index(path, text, self._fact(path, text))

    def _fact(self, path: str, text: str) -> Fact | None:
        """The note as the corpus reads it, or None for a note that is no fact."""
        have = self.corpus.facts.get(path)
        if have is not None and have.text is text:
            return have
        if not self.corpus.covers(path):
            return None
        try:
            return self.corpus.parse(path, text)
        except BadFact:
            return None

    @contextmanager
    def trying(self, writes: dict[str, str | None]) -> Iterator[None]:
        """The vault as a decision's writes would leave it, for the time of the block; then as it was."""
        before = {path: (path.casefold() in self.files, self.texts.get(path)) for path in writes}
        try:
            for path, text in writes.items():
                self.put(path, text)
            yield
        finally:
            for path, (existed, text) in before.items():
                self._unindex(path)
                self._drop_file(path)
                if existed:
                    self._add_file(path)
                if text is not None:
                    self._index(path, text, self._fact(path, text))

    # -- resolution

    def active(self, path: str) -> bool:
        return path.casefold() in self.files and path not in self.retracted

    def resolve(self, link: Link) -> tuple[str | None, Resolved]:
        """(the file the link leads to, or None; how: "self", "path", "name" or "alias", "" when it leads nowhere).

        As Obsidian resolves: a path from the vault's root or from the note's folder (a Markdown link
        tries the note's folder first), with or without `.md`; else the note of that name (or path
        suffix), case-insensitively, and of several the one in the linking note's folder, else the
        shortest path; else, for a wikilink, the one active note that has it as an alias.
        """
        name = link.target.strip()
        if link.kind in ("path", "canvas"):
            hit = self.files.get(name.removeprefix("./").casefold())
            return (hit, "path") if hit else (None, "")
        if not name:
            return link.note, "self"
        folder = posixpath.dirname(link.note)
        bare = name.lstrip("/")
        tries = (
            [bare]
            if name.startswith("/")
            else [posixpath.join(folder, bare), bare]
            if link.kind == "markdown"
            else [bare, posixpath.join(folder, bare)]
        )
        for tried in tries:
            tried = posixpath.normpath(tried)
            if tried.startswith("../") or tried == "..":
                continue
            for form in (tried, tried + ".md"):
                if hit := self.files.get(form.casefold()):
                    return hit, "path"
        want = posixpath.normpath(bare).casefold()
        named = [p for p in self.by_name.get(name_key(bare), ()) if _ends_with(p.casefold(), want)]
        if named:
            return _pick(named, folder), "name"
        if link.kind in WIKI_KINDS:
            having = [p for p in self.alias_of.get(bare.casefold(), ()) if self.active(p)]
            if len(having) == 1:
                return having[0], "alias"
        return None, ""

    def unique_name(self, path: str, gone: set[str]) -> bool:
        """Whether a wikilink by the note's bare name leads to it alone once `gone` are deleted."""
        return [p for p in self.by_name.get(name_key(path), ()) if p not in gone] == [path]

    def linkers(self, path: str) -> set[str]:
        """The notes holding a link by one of the note's names (each still to be resolved)."""
        keys = {name_key(path), *(name_key(a) for a in self.aliases.get(path, ()))}
        return set().union(*(self.linked_by.get(k, set()) for k in keys))

    def has_subpath(self, path: str, subpath: str) -> bool:
        """Whether the note has the heading (`#a`, `#a#b`: the last) or block (`#^id`) a link names."""
        text = self.texts.get(path, "")
        part = subpath.rstrip("#").rpartition("#")[2]
        if not subpath or not part:
            return True
        if part.startswith("^"):
            return re.search(rf"(?:^|\s)\^{re.escape(part[1:])}[ \t]*$", text, re.M) is not None
        return fold(part) in headings(text)

    # -- the link check

    def broken(self) -> list[BrokenLink]:
        """Every link of an active note that leads to nothing, or to a retracted note."""
        out = []
        for note in sorted(self.links):
            if note in self.retracted:
                continue
            for link in self.links[note]:
                target, _ = self.resolve(link)
                if target is None:
                    out.append(BrokenLink(link, "nothing"))
                elif target in self.retracted:
                    out.append(BrokenLink(link, "retracted", target))
        return out

    def report(self) -> dict[str, Any]:
        """What `knomit-judge links` prints: the notes and links read, and each broken link."""
        broken = self.broken()
        notes = [n for n in self.links if n not in self.retracted]
        return {
            "notes": len(notes),
            "links": sum(len(self.links[n]) for n in notes),
            "broken": [b.json() for b in broken],
            "nothing": sum(b.why == "nothing" for b in broken),
            "retracted": sum(b.why == "retracted" for b in broken),
        }


def _ends_with(path: str, want: str) -> bool:
    """Whether a file's case-folded path is `want` (with or without `.md`), or ends with it after a `/`."""
    for form in (want, want + ".md"):
        if path == form or path.endswith("/" + form):
            return True
    return False


def _pick(paths: list[str], folder: str) -> str:
    """Of several files of one name, the one Obsidian takes: in the linking note's folder, else the shortest path."""
    here = [p for p in paths if posixpath.dirname(p) == folder]
    return min(here or paths, key=lambda p: (len(p), p))


_VAULTS: WeakKeyDictionary[Corpus, Vault] = WeakKeyDictionary()


def vault_of(corpus: Corpus) -> Vault:
    """The corpus's Vault, built when first asked and kept in step with the corpus after that."""
    if (vault := _VAULTS.get(corpus)) is None:
        vault = _VAULTS[corpus] = Vault(corpus)
    return vault
