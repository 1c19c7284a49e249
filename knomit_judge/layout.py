"""Where a corpus keeps its facts: globs of fact paths, and recognising the layouts users already have."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
        elif c == "[" and "]" in glob[i + 2:]:
            j = glob.index("]", i + 2)
            body = glob[i + 1:j]
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


def fact_paths(root: Path, globs: Sequence[str] = DEFAULT_PATHS) -> list[str]:
    """Every file below the corpus matching the globs, as sorted posix relative paths (hidden ones skipped)."""
    root = Path(root)
    patterns = [re.compile(_glob_regex(g)) for g in globs]
    paths: set[str] = set()
    cut = len(os.path.join(str(root), ""))  # string slicing, not pathlib: 100k paths at scale
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
                if any(p.fullmatch(rel) for p in patterns):
                    paths.add(rel)
    return sorted(paths)


# knomit (github.com/knomit/knomit): facts under kb/, its ontology in one of these files.
KNOMIT_PATHS = ("kb/**/*.md",)
KNOMIT_ONTOLOGY = (".knomit/ontology.yaml", "domains/ontology.yaml", ".domains/ontology.yaml")
_SAMPLE = 50  # files looked at to recognise the format


@dataclass
class Detected:
    """A layout recognised in a directory, with the [corpus] settings it needs and what it was seen by."""

    kind: str
    paths: tuple[str, ...]
    motif_keys: tuple[str, ...]
    retract: str
    evidence: str


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
    seen = [f"{len(facts)} Markdown file(s) under kb/", *ontology,
            f"{shaped} of {len(sample)} sampled with front matter and a '#' title line"]
    return Detected("knomit", KNOMIT_PATHS, ("motifs",), "delete", ", ".join(seen))


def where_facts_may_be(root: Path, limit: int = 5000) -> str:
    """A hint for paths that matched nothing: a knomit KB here, or where other Markdown files are."""
    root = Path(root)
    if found := detect_knomit(root):
        return (f"this looks like a knomit KB ({found.evidence}): set [corpus] paths = [\"kb/**/*.md\"] "
                'and retract = "delete"')
    seen: dict[str, int] = {}
    for n, path in enumerate(fact_paths(root, ("**/*.md",))):
        if n >= limit:
            break
        top = path.split("/")[0] if "/" in path else "."
        seen[top] = seen.get(top, 0) + 1
    if not seen:
        return "no Markdown file at all in the corpus"
    where = ", ".join(f"{n} in {d}/" if d != "." else f"{n} at the top" for d, n in
                      sorted(seen.items(), key=lambda kv: -kv[1])[:3])
    return f"Markdown files found elsewhere ({where}): set [corpus] paths in knomit-judge.toml"
