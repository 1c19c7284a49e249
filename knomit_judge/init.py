"""`knomit-judge init`: make a directory a corpus this tool can review."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import git
import yaml

from .config import CONFIG_FILE, DEFAULT_TOML, load_config
from .corpus import DEFAULT_MOTIF_KEYS, front_matter
from .errors import NotACorpus
from .gitops import dirty_paths, enclosing_top, run_git
from .layout import (
    DEFAULT_PATHS,
    OBSIDIAN,
    WORKSPACE,
    Detected,
    detect_knomit,
    detect_vault,
    fact_paths,
    matches,
)
from .store import DB_PATH, Store

IGNORE_LINE = ".knomit/judge.db*"
# front-matter list keys that hold a note's tags or motifs, most specific first
TAG_KEYS = ("motifs", "tags", "keywords", "topics", "categories")
# Markdown files looked at to find a folder of notes
_LOOK = 5000
# files read per folder to see front matter and its keys
_SAMPLE = 50


def init_corpus(root: Path | str, create: bool = False) -> list[str]:
    """Create config, .gitignore entry and db (git-initialising the directory if needed); commit them.

    A directory that was not a repository also gets the fact files found in it committed, so the
    first session finds a clean tree. Refuses a path that does not exist (unless `create`) and a
    path inside another repository, which would nest a repository in it.
    """
    root = Path(root).expanduser().absolute()
    check_target(root, create)
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    said = []
    try:
        repo, fresh = git.Repo(root), False
    except git.InvalidGitRepositoryError:
        repo, fresh = git.Repo.init(root), True
        said.append(f"initialised a git repository in {root}")
    config = root / CONFIG_FILE
    found, looked = detect(root)
    if found:
        said.append(f"detected a {found.kind} KB: {found.evidence}")
        if found.notes is not None:
            said.append(
                f"will read {found.notes} note(s)"
                + (f"; leaves out {'; '.join(found.left_out)}" if found.left_out else "")
            )
    elif looked:
        said.append(looked)
    if not config.exists():
        config.write_text(config_text(found), encoding="utf-8")
        said.append(f"wrote {CONFIG_FILE}" + (f" with [corpus] {corpus_settings(found)}" if found else ""))
        if found and found.kind == "knomit":
            said.append(knomit_keys_said(root, found))
    elif found and load_config(root).corpus.paths != list(found.paths):
        said.append(
            f"kept the existing {CONFIG_FILE}; its [corpus] paths do not look at "
            f"{', '.join(found.paths)} (for this KB: {corpus_settings(found)})"
        )
    # an existing file must be valid
    load_config(root)
    ignore = root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    # Obsidian rewrites its workspace files while it is open: worth no commit (they hold no decision back either)
    wanted = [IGNORE_LINE, *([WORKSPACE] if list(root.glob(WORKSPACE)) else [])]
    if added := [line for line in wanted if line not in lines]:
        ignore.write_text("\n".join([*lines, *added]) + "\n", encoding="utf-8")
        said.append(f"added {', '.join(added)} to .gitignore")
    tracked = [p for p in run_git(repo, "ls-files", "-z", "--", OBSIDIAN).split("\0") if matches(p, [WORKSPACE])]
    if tracked:
        said.append(
            f"{tracked[0]} is committed, so .gitignore does not keep it out: `git rm --cached "
            f"{' '.join(tracked)}` stops committing it (an uncommitted change to it holds no decision back)"
        )
    if not found:
        (root / "facts").mkdir(exist_ok=True)
    Store.for_corpus(root).close()
    said.append(f"database at {DB_PATH}")
    paths = [CONFIG_FILE, ".gitignore"]
    facts = found_facts(repo, root) if fresh else []
    if fresh:
        said.append(
            f"found {len(facts)} fact file(s): committing them with the configuration"
            if facts
            else "found no fact files"
        )
    # paths on stdin: a folder of notes can hold more files than one command line. update-index, not
    # `add --pathspec-from-file`: that matches every pathspec against every file, minutes at 100k notes.
    run_git(repo, "update-index", "--add", "-z", "--stdin", input="\0".join(paths + facts).encode())
    if facts or run_git(repo, "diff", "--cached", "--name-only", "--", *paths):
        # a fresh repository's index holds only what was added above; in an existing one, commit only our files
        run_git(repo, "commit", "-q", "-m", "knomit-judge: init", *([] if fresh else ["--", *paths]))
        said.append("committed the configuration" + (f" and {len(facts)} fact file(s)" if facts else ""))
    if fresh and (left := dirty_paths(repo)):
        said.append(
            f"{len(left)} other file(s) are not committed (e.g. {left[0]}): git keeps them once you commit "
            "them or list them in .gitignore; no decision waits for them"
        )
    return said


def detect(root: Path) -> tuple[Detected | None, str]:
    """The layout of a directory (a knomit KB, a vault, a folder of notes), or None and what was looked for."""
    if found := detect_knomit(root):
        found.motif_keys = knomit_keys(root, found)
        return found, ""
    if found := detect_vault(root):
        return found, ""
    return detect_notes(root)


def knomit_keys(root: Path, found: Detected) -> tuple[str, ...]:
    """The motif keys a knomit KB's facts carry: `motifs` where a sampled fact has them, else `entities` where
    facts have those (knomit's agentic-engineering KB: no fact of 289 has `motifs:`, all have `entities:`)."""
    counts = _key_counts(root, found.paths, ("motifs", "entities"))
    return ("entities",) if not counts.get("motifs") and counts.get("entities") else ("motifs",)


def knomit_keys_said(root: Path, found: Detected) -> str:
    """What init says of the motif keys it chose for a knomit KB, and how to review the other spellings too."""
    counts = _key_counts(root, found.paths, ("motifs", "entities"))
    sampled = counts.pop("", 0)
    seen = ", ".join(f"`{k}:` in {counts.get(k, 0)}" for k in ("motifs", "entities"))
    if found.motif_keys == ("entities",):
        return (
            f"alias reviews the spellings under entities (of {sampled} sampled facts: {seen}); "
            "merged entity spellings are rewritten inside `entities`"
        )
    tail = (
        (
            "; to merge entity spellings as well (Postgres / PostgreSQL), set [corpus] motif_keys = "
            '["motifs", "entities"]'
        )
        if counts.get("entities")
        else ""
    )
    return f"alias reviews the spellings under motifs (of {sampled} sampled facts: {seen}){tail}"


def _key_counts(root: Path, globs: tuple[str, ...], keys: tuple[str, ...]) -> dict[str, int]:
    """Of a sample of the fact files, how many hold each key as a non-empty list; "" is the sample's size."""
    sample = fact_paths(root, globs)[:_SAMPLE]
    counts: dict[str, int] = {"": len(sample)}
    for meta in (_front(root / p) for p in sample):
        for key in keys:
            if isinstance(meta.get(key), list) and meta[key]:
                counts[key] = counts.get(key, 0) + 1
    return counts


def check_target(root: Path, create: bool) -> None:
    """Refuse a path that does not exist (unless `create`) and one inside another git repository."""
    top = enclosing_top(root)
    if top is not None and top != root.resolve():
        raise NotACorpus(
            f"{root} is inside the git repository {top}: a corpus must be the top of its own "
            f"repository (to make {top} the corpus: knomit-judge init {top})"
        )
    if not root.exists() and not create:
        raise NotACorpus(f"{root}: no such directory (check the path, or pass --create to make it)")


class Folder(NamedTuple):
    """A top-level folder of Markdown, as detect_notes sampled it."""

    name: str
    # Markdown files in it (of the first _LOOK in the corpus)
    files: int
    # of those sampled, how many have front matter
    fronted: int
    sampled: int
    # TAG_KEYS found as lists in the sampled front matter, and in how many files
    keys: dict[str, int]

    @property
    def notes(self) -> bool:
        # most of the sampled files have front matter
        return self.fronted * 2 > self.sampled


def detect_notes(root: Path) -> tuple[Detected | None, str]:
    """A folder of notes: the top-level folder holding the most Markdown files with front matter (most of those
    sampled), and the list key of theirs that holds tags or motifs. (None, what was looked for and the closest
    folder of Markdown) when there is none; (None, "") for our own facts/ layout, which the defaults already read.

    Only folders: Markdown at the top of a repository is its README and friends far more often than notes.
    """
    by_folder: dict[str, list[str]] = {}
    markdown = fact_paths(root, ("**/*.md",))[:_LOOK]
    for path in markdown:
        if "/" in path:
            by_folder.setdefault(path.split("/")[0], []).append(path)
    seen = []
    for name, paths in by_folder.items():
        sample = paths[:_SAMPLE]
        metas = [m for m in (_front(root / p) for p in sample) if m]
        keys: dict[str, int] = {}
        for meta in metas:
            for key in TAG_KEYS:
                if isinstance(meta.get(key), list):
                    keys[key] = keys.get(key, 0) + 1
        seen.append(Folder(name, len(paths), len(metas), len(sample), keys))
    notes = [f for f in seen if f.notes]
    if not notes:
        if not seen:
            return None, (
                "looked for Markdown with front matter under any folder: found no Markdown file in a "
                "folder; facts go under facts/"
            )
        closest = max(seen, key=lambda f: (f.files, f.fronted))
        return None, (
            f"looked for Markdown with front matter under any folder: found none; the closest folder of "
            f"Markdown is {closest.name}/ ({closest.files} file(s), most without front matter); facts go "
            "under facts/, or set [corpus] paths"
        )
    # our own facts/ first, whatever else holds notes; else the folder with the most notes (estimated from the sample)
    best = max(notes, key=lambda f: (f.name == "facts", f.fronted * f.files // f.sampled, f.files))
    # the most common tag key; in a tie the more specific name (TAG_KEYS' order)
    keys = best.keys
    key = max(keys, key=lambda k: (keys[k], -TAG_KEYS.index(k))) if keys else DEFAULT_MOTIF_KEYS[0]
    globs = (f"{best.name}/**/*.md",)
    if globs == tuple(DEFAULT_PATHS) and (key,) == tuple(DEFAULT_MOTIF_KEYS):
        # our own layout: the defaults read it
        return None, ""
    tags = (
        f"`{key}:` lists in {keys[key]} of them"
        if keys
        else f"no list key of {', '.join(TAG_KEYS)} in them (motifs read from `{key}:` once notes carry it)"
    )
    others = sorted(((n, len(paths)) for n, paths in by_folder.items() if n != best.name), key=lambda kv: -kv[1])
    at_top = sum(1 for p in markdown if "/" not in p)
    where = [f"{n} in {d}/" for d, n in others[:3]] + [f"{at_top} at the top"] * bool(at_top)
    outside = sum(n for _, n in others) + at_top
    left_out = (
        (
            f"{outside} Markdown file(s) outside {best.name}/ ({', '.join(where)}"
            + (", ..." if len(others) > 3 else "")
            + "): set [corpus] paths to read them too",
        )
        if outside
        else ()
    )
    # a note of the folder without front matter is a note too (titled by its heading or file name)
    return Detected(
        "notes",
        globs,
        (key,),
        "status",
        f"{best.files} Markdown file(s) under {best.name}/, {best.fronted} of {best.sampled} sampled "
        f"with front matter, {tags}",
        front_matter="optional",
        notes=best.files,
        left_out=left_out,
    ), ""


def _front(path: Path) -> dict[str, Any]:
    """A file's front matter, read from its head; {} when it has none or cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", "replace").replace("\r\n", "\n")
    except OSError:
        return {}
    try:
        return front_matter(head)
    # a note whose YAML does not parse is simply not front matter here
    except yaml.YAMLError:
        return {}


def found_facts(repo: git.Repo, root: Path) -> list[str]:
    """The fact files in a directory just made a repository, less those its own .gitignore excludes."""
    ignored = set(run_git(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard").split("\0"))
    corpus = load_config(root).corpus
    return [p for p in fact_paths(root, corpus.paths, corpus.exclude) if p not in ignored]


def corpus_values(found: Detected) -> dict[str, str]:
    """The [corpus] settings of a detected layout, as TOML values (those left at their defaults unsaid)."""
    values = {
        "paths": toml_list(found.paths),
        "motif_keys": toml_list(found.motif_keys),
        "retract": f'"{found.retract}"',
    }
    if found.front_matter != "required":
        values["front_matter"] = f'"{found.front_matter}"'
    if found.exclude:
        values["exclude"] = toml_list(found.exclude)
    if found.inline_tags:
        values["inline_tags"] = "true"
    return values


def toml_list(values: tuple[str, ...]) -> str:
    """Strings as a TOML array (basic strings: a backslash or quote in a glob escaped)."""
    return "[" + ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"


def corpus_settings(found: Detected) -> str:
    """The [corpus] settings of a detected layout, as init says them."""
    return ", ".join(f"{k} = {v}" for k, v in corpus_values(found).items())


def config_text(found: Detected | None) -> str:
    """The default configuration, with the [corpus] settings of a detected layout written in."""
    if not found:
        return DEFAULT_TOML
    head, corpus = DEFAULT_TOML.split("[corpus]\n", 1)
    for key, value in corpus_values(found).items():
        # keep the comment after the value where it was
        if m := re.search(rf"^{key} = [^#\n]*", corpus, flags=re.M):
            corpus = corpus[: m.start()] + f"{key} = {value} ".ljust(len(m.group(0))) + corpus[m.end() :]
    return f"{head}[corpus]  # written by init for the {found.kind} KB it detected\n{corpus}"
