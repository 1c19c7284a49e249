"""`knomit-judge init`: make a directory a corpus this tool can review."""

from __future__ import annotations

import re
from pathlib import Path

import git

from .config import CONFIG_FILE, DEFAULT_TOML, load_config
from .gitops import ACTOR
from .layout import Detected, detect_knomit
from .store import DB_PATH, Store

IGNORE_LINE = ".knomit/judge.db*"


def init_corpus(root: Path | str) -> list[str]:
    """Create config, .gitignore entry and db (git-initialising the directory if needed); commit them."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    said = []
    try:
        repo = git.Repo(root)
    except git.InvalidGitRepositoryError:
        repo = git.Repo.init(root)
        said.append(f"initialised a git repository in {root}")
    config = root / CONFIG_FILE
    found = detect_knomit(root)
    if found:
        said.append(f"detected a {found.kind} KB: {found.evidence}")
    if not config.exists():
        config.write_text(config_text(found), encoding="utf-8")
        said.append(f"wrote {CONFIG_FILE}" + (f" with [corpus] {corpus_settings(found)}" if found else ""))
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
    repo.git.add("--", CONFIG_FILE, ".gitignore")
    if repo.git.diff("--cached", "--name-only", "--", CONFIG_FILE, ".gitignore"):
        with repo.git.custom_environment(**ACTOR):
            repo.git.commit("-q", "-m", "knomit-judge: init", "--", CONFIG_FILE, ".gitignore")
        said.append("committed the configuration")
    return said


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
