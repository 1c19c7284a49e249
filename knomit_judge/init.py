"""`knomit-judge init`: make a directory a corpus this tool can review."""

from __future__ import annotations

import re
from pathlib import Path

import git

from .config import CONFIG_FILE, DEFAULT_TOML, load_config
from .errors import NotACorpus
from .gitops import dirty_paths, enclosing_top, run_git
from .layout import Detected, detect_knomit, fact_paths
from .store import DB_PATH, Store

IGNORE_LINE = ".knomit/judge.db*"


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
    found = detect_knomit(root)
    if found:
        said.append(f"detected a {found.kind} KB: {found.evidence}")
    if not config.exists():
        config.write_text(config_text(found), encoding="utf-8")
        said.append(f"wrote {CONFIG_FILE}" + (f" with [corpus] {corpus_settings(found)}" if found else ""))
        if found:  # the alias pass then reviews motif spellings only: say how to review entity spellings too
            said.append('alias reviews the spellings under motifs; to merge entity spellings as well '
                        '(Postgres / PostgreSQL), set [corpus] motif_keys = ["motifs", "entities"]')
    elif found and load_config(root).corpus.paths != list(found.paths):
        said.append(f"kept the existing {CONFIG_FILE}; its [corpus] paths do not look at kb/ "
                    f"(for this KB: {corpus_settings(found)})")
    load_config(root)  # an existing file must be valid
    ignore = root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if IGNORE_LINE not in lines:
        ignore.write_text("\n".join([*lines, IGNORE_LINE]) + "\n", encoding="utf-8")
        said.append(f"added {IGNORE_LINE} to .gitignore")
    if not found:
        (root / "facts").mkdir(exist_ok=True)
    Store.for_corpus(root).close()
    said.append(f"database at {DB_PATH}")
    paths = [CONFIG_FILE, ".gitignore"]
    facts = found_facts(repo, root) if fresh else []
    if fresh:
        said.append(f"found {len(facts)} fact file(s): committing them with the configuration" if facts
                    else "found no fact files")
    # paths on stdin: a folder of notes can hold more files than one command line. update-index, not
    # `add --pathspec-from-file`: that matches every pathspec against every file, minutes at 100k notes.
    run_git(repo, "update-index", "--add", "-z", "--stdin", input="\0".join(paths + facts).encode())
    if facts or run_git(repo, "diff", "--cached", "--name-only", "--", *paths):
        # a fresh repository's index holds only what was added above; in an existing one, commit only our files
        run_git(repo, "commit", "-q", "-m", "knomit-judge: init", *([] if fresh else ["--", *paths]))
        said.append("committed the configuration" + (f" and {len(facts)} fact file(s)" if facts else ""))
    if fresh and (left := dirty_paths(repo)):
        said.append(f"{len(left)} other file(s) are not committed (e.g. {left[0]}): commit them or list them in "
                    ".gitignore, or every decision waits for a clean work tree")
    return said


def check_target(root: Path, create: bool) -> None:
    """Refuse a path that does not exist (unless `create`) and one inside another git repository."""
    top = enclosing_top(root)
    if top is not None and top != root.resolve():
        raise NotACorpus(f"{root} is inside the git repository {top}: a corpus must be the top of its own "
                         f"repository (to make {top} the corpus: knomit-judge init {top})")
    if not root.exists() and not create:
        raise NotACorpus(f"{root}: no such directory (check the path, or pass --create to make it)")


def found_facts(repo, root: Path) -> list[str]:
    """The fact files in a directory just made a repository, less those its own .gitignore excludes."""
    ignored = set(run_git(repo, "ls-files", "-z", "--others", "--ignored", "--exclude-standard").split("\0"))
    return [p for p in fact_paths(root, load_config(root).corpus.paths) if p not in ignored]


def corpus_values(found: Detected) -> dict[str, str]:
    """The [corpus] settings of a detected layout, as TOML values."""
    quote = lambda values: "[" + ", ".join(f'"{v}"' for v in values) + "]"  # noqa: E731
    return {"paths": quote(found.paths), "motif_keys": quote(found.motif_keys), "retract": f'"{found.retract}"'}


def corpus_settings(found: Detected) -> str:
    return ", ".join(f"{k} = {v}" for k, v in corpus_values(found).items())


def config_text(found: Detected | None) -> str:
    """The default configuration, with the [corpus] settings of a detected layout written in."""
    if not found:
        return DEFAULT_TOML
    head, corpus = DEFAULT_TOML.split("[corpus]\n", 1)
    for key, value in corpus_values(found).items():
        # keep the comment after the value where it was
        corpus = re.sub(rf"^{key} = [^#\n]*", lambda m: f"{key} = {value} ".ljust(len(m.group(0))),
                        corpus, count=1, flags=re.M)
    return f"{head}[corpus]  # written by init for the {found.kind} KB it detected\n{corpus}"
