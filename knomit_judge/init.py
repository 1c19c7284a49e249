"""`knomit-judge init`: make a directory a corpus this tool can review."""

from __future__ import annotations

from pathlib import Path

import git

from .config import CONFIG_FILE, DEFAULT_TOML, load_config
from .gitops import ACTOR
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
    if not config.exists():
        config.write_text(DEFAULT_TOML, encoding="utf-8")
        said.append(f"wrote {CONFIG_FILE}")
    load_config(root)  # an existing file must be valid
    ignore = root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    if IGNORE_LINE not in lines:
        ignore.write_text("\n".join([*lines, IGNORE_LINE]) + "\n", encoding="utf-8")
        said.append(f"added {IGNORE_LINE} to .gitignore")
    (root / "facts").mkdir(exist_ok=True)
    Store.for_corpus(root).close()
    said.append(f"database at {DB_PATH}")
    repo.git.add("--", CONFIG_FILE, ".gitignore")
    if repo.git.diff("--cached", "--name-only", "--", CONFIG_FILE, ".gitignore"):
        with repo.git.custom_environment(**ACTOR):
            repo.git.commit("-q", "-m", "knomit-judge: init", "--", CONFIG_FILE, ".gitignore")
        said.append("committed the configuration")
    return said
