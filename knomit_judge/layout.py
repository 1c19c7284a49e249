"""Where a corpus keeps its facts: globs of fact paths, and recognising the layouts users already have."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .config import FrontMatter, RetractMode

DEFAULT_PATHS = ("facts/**/*.md",)
_GLOB_CHARS = re.compile(r"[*?\[]")


def glob_prefix(glob: str) -> str:
    """The literal directories a glob starts with: 'kb' for kb/**/*.md, '' for **/*.md."""
    parts = glob.split("/")[:-1]
    literal: list[str] = []
    for part in parts:
        if _GLOB_CHARS.search(part):
            break
        literal.append(part)
    return "/".join(literal)


@lru_cache(maxsize=64)
def _glob_regex(glob: str) -> str:
    """A glob as a regular expression: `*` and `?` stay within one directory, `**/` spans any number."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in glob[i + 2 :]:
            j = glob.index("]", i + 2)
            body = glob[i + 1 : j]
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def matches(path: str, globs: Iterable[str]) -> bool:
    """Whether a corpus-relative posix path matches one of the globs (`**` = any number of directories)."""
    return any(re.fullmatch(_glob_regex(g), path) for g in globs)


def covered(path: str, globs: Iterable[str], exclude: Iterable[str] = ()) -> bool:
    """Whether a corpus-relative path is a fact path: matched by the globs and by none of `exclude`."""
    return matches(path, globs) and not matches(path, exclude)


def fact_paths(root: Path, globs: Sequence[str] = DEFAULT_PATHS, exclude: Sequence[str] = ()) -> list[str]:
    """Every file below the corpus matching the globs and none of `exclude`, as sorted posix relative paths
    (hidden ones skipped)."""
    root = Path(root)
    patterns = [re.compile(_glob_regex(g)) for g in globs]
    left_out = [re.compile(_glob_regex(g)) for g in exclude]
    paths: set[str] = set()
    # string slicing, not pathlib: 100k paths at scale
    cut = len(os.path.join(str(root), ""))
    for prefix in dict.fromkeys(glob_prefix(g) for g in globs):
        base = root / prefix if prefix else root
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                if name.startswith("."):
                    continue
                rel = os.path.join(dirpath, name)[cut:].replace(os.sep, "/")
                if any(p.fullmatch(rel) for p in patterns) and not any(p.fullmatch(rel) for p in left_out):
                    paths.add(rel)
    return sorted(paths)


# knomit (github.com/knomit/knomit): facts under kb/, its ontology in one of these files.
KNOMIT_PATHS = ("kb/**/*.md",)
KNOMIT_ONTOLOGY = (".knomit/ontology.yaml", "domains/ontology.yaml", ".domains/ontology.yaml")
# files looked at to recognise the format
_SAMPLE = 50


@dataclass
class Detected:
    """A layout recognised in a directory, with the [corpus] settings it needs and what it was seen by."""

    kind: str
    paths: tuple[str, ...]
    motif_keys: tuple[str, ...]
    retract: RetractMode
    evidence: str
    front_matter: FrontMatter = "required"
    exclude: tuple[str, ...] = ()
    inline_tags: bool = False
    # the Markdown files these settings read (None: not counted)
    notes: int | None = None
    # what they leave out, each with why, as init says it
    left_out: tuple[str, ...] = ()


def _knomit_shaped(path: Path) -> bool:
    """Front matter, then a `#` title line: how knomit writes a fact."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", "replace").replace("\r\n", "\n")
    except OSError:
        return False
    if not head.startswith("---\n") or "\n---\n" not in head[3:]:
        return False
    return head[3:].split("\n---\n", 1)[1].lstrip().startswith("#")


def detect_knomit(root: Path) -> Detected | None:
    """A knomit KB: Markdown facts under kb/ written in knomit's shape, or next to knomit's ontology."""
    root = Path(root)
    facts = fact_paths(root, KNOMIT_PATHS) if (root / "kb").is_dir() else []
    if not facts:
        return None
    ontology = [f for f in KNOMIT_ONTOLOGY if (root / f).is_file()]
    sample = facts[:_SAMPLE]
    shaped = sum(_knomit_shaped(root / p) for p in sample)
    if not ontology and shaped * 2 <= len(sample):
        return None
    seen = [
        f"{len(facts)} Markdown file(s) under kb/",
        *ontology,
        f"{shaped} of {len(sample)} sampled with front matter and a '#' title line",
    ]
    return Detected("knomit", KNOMIT_PATHS, ("motifs",), "delete", ", ".join(seen))


# An Obsidian-style vault: every note in it, less what is no note.
OBSIDIAN = ".obsidian"
# where Obsidian moves deleted notes, when set to
TRASH = ".trash"
VAULT_PATHS = ("**/*.md",)
# the Excalidraw plugin's drawings: Markdown files holding a drawing, no note
DRAWINGS = "**/*.excalidraw.md"
# what Obsidian rewrites while it is open: never worth a commit
WORKSPACE = ".obsidian/workspace*.json"
_WIKILINK = re.compile(r"\[\[[^\[\]\n]+\]\]")
# a folder named like templates: `Templates`, `_templates`, `99 Templates`
_TEMPLATES = re.compile(r"templates?", re.I)


def glob_escape(path: str) -> str:
    """A literal path as a glob that matches only it."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _spread(paths: list[str], n: int) -> list[str]:
    """About n of the paths, taken evenly through the sorted list (the first n would be one folder's)."""
    return paths[:: max(1, len(paths) // n)][:n]


def _head(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def _settings(root: Path, name: str) -> dict[str, object]:
    """One of Obsidian's settings files (.obsidian/<name>); {} when it is missing or unreadable."""
    try:
        value = json.loads((root / OBSIDIAN / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _folder(value: object) -> str:
    """A folder an Obsidian setting names, relative to the vault ("" for its root, or none)."""
    return value.strip().strip("/").removeprefix("./") if isinstance(value, str) else ""


def detect_vault(root: Path) -> Detected | None:
    """An Obsidian-style vault: `.obsidian/`, or (without it) Markdown notes most of which link with [[wikilinks]].

    Every note is read (`**/*.md`, front matter optional, inline tags too); what is no note is left out and
    named: `.obsidian/` and `.trash/` (hidden, never read), the templates folder, an attachments folder that
    holds Markdown, Excalidraw drawings, and every non-Markdown file.
    """
    root = Path(root)
    markdown = fact_paths(root, VAULT_PATHS)
    if (root / OBSIDIAN).is_dir():
        seen = f"{OBSIDIAN}/ (Obsidian's settings)"
    else:
        sample = _spread(markdown, _SAMPLE)
        linked = sum(bool(_WIKILINK.search(_head(root / p))) for p in sample)
        if linked < 2 or linked * 3 < len(sample):
            return None
        seen = f"{linked} of {len(sample)} sampled Markdown files link with [[wikilinks]]"
    exclude, left_out = vault_left_out(root, markdown)
    notes = sum(not matches(p, exclude) for p in markdown)
    return Detected(
        "vault",
        VAULT_PATHS,
        ("tags",),
        "delete",
        f"{seen}, {len(markdown)} Markdown file(s)",
        front_matter="optional",
        exclude=tuple(exclude),
        inline_tags=True,
        notes=notes,
        left_out=tuple(left_out),
    )


def vault_left_out(root: Path, markdown: list[str]) -> tuple[list[str], list[str]]:
    """The exclude globs of a vault, and what is left out with why (as init says it)."""
    exclude: list[str] = []
    said: list[str] = []
    if (root / OBSIDIAN).is_dir():
        said.append(f"{OBSIDIAN}/ (Obsidian's settings)")
    if (root / TRASH).is_dir():
        said.append(f"{TRASH}/ (notes Obsidian deleted)")

    def leave_out(folder: str, glob: str, why: str) -> None:
        under = [p for p in markdown if matches(p, [glob])]
        if under:
            exclude.append(glob)
        said.append(f"{folder}/ ({why}" + (f"; {len(under)} Markdown file(s)" if under else "") + ")")

    folders = {p.rsplit("/", 1)[0] for p in markdown if "/" in p}
    folders |= {f.rsplit("/", i)[0] for f in list(folders) for i in range(1, f.count("/") + 1)}
    configured = [
        (_folder(_settings(root, "templates.json").get("folder")), f"{OBSIDIAN}/templates.json"),
        (
            _folder(_settings(root, "plugins/templater-obsidian/data.json").get("templates_folder")),
            "Templater's settings",
        ),
    ]
    templates = [(f, f"the templates folder, from {where}") for f, where in configured if f and (root / f).is_dir()]
    # a folder named like templates, wherever it is
    if not templates:
        templates = [
            (f, "the templates folder, by its name")
            for f in sorted(folders)
            if _TEMPLATES.fullmatch(f.rsplit("/", 1)[-1].strip(" _-.0123456789"))
        ]
    for folder, why in dict(templates).items():
        leave_out(folder, f"{glob_escape(folder)}/**", why)
    attachments = _settings(root, "app.json").get("attachmentFolderPath")
    if isinstance(attachments, str) and attachments.strip().startswith("./") and _folder(attachments):
        # a subfolder beside each note
        sub = _folder(attachments)
        leave_out(f"**/{sub}", f"**/{glob_escape(sub)}/**", f"attachments, from {OBSIDIAN}/app.json")
    elif (folder := _folder(attachments)) and not str(attachments).strip().startswith("./"):
        leave_out(folder, f"{glob_escape(folder)}/**", f"the attachments folder, from {OBSIDIAN}/app.json")
    if drawings := [p for p in markdown if matches(p, [DRAWINGS])]:
        exclude.append(DRAWINGS)
        said.append(f"{len(drawings)} Excalidraw drawing(s) ({DRAWINGS})")
    others = sum(not name.endswith(".md") for name in _files(root))
    if others:
        said.append(f"{others} attachment(s) and other non-Markdown file(s) (only notes are read)")
    return exclude, said


def _files(root: Path) -> Iterable[str]:
    """Every file below root outside hidden folders, by name."""
    for _, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        yield from (n for n in filenames if not n.startswith("."))


def where_facts_may_be(root: Path, limit: int = 5000) -> str:
    """A hint for paths that matched nothing: a knomit KB here, or where other Markdown files are."""
    root = Path(root)
    if found := detect_knomit(root):
        return (
            f'this looks like a knomit KB ({found.evidence}): set [corpus] paths = ["kb/**/*.md"] '
            'and retract = "delete"'
        )
    seen: dict[str, int] = {}
    for n, path in enumerate(fact_paths(root, ("**/*.md",))):
        if n >= limit:
            break
        top = path.split("/")[0] if "/" in path else "."
        seen[top] = seen.get(top, 0) + 1
    if not seen:
        return "no Markdown file at all in the corpus"
    where = ", ".join(
        f"{n} in {d}/" if d != "." else f"{n} at the top" for d, n in sorted(seen.items(), key=lambda kv: -kv[1])[:3]
    )
    return f"Markdown files found elsewhere ({where}): set [corpus] paths in knomit-judge.toml"
