"""The README's shell examples, run as a newcomer would run them after `make demo`, so they cannot rot.

The convention, for README.md and every page of docs/ (docs/_pending aside):
- a ```sh block is run. The blocks of one file run in order, as one `bash -euo pipefail` script, from
  a scratch clone in which `make demo` has run: `.venv` (the venv running these tests),
  `corpus-fixtures/`, and `.demo/knomit-demo` reviewed twice with the scripted judge, as the Makefile
  does. In the README `knomit-judge` is not on PATH until a block activates the venv, as for a
  newcomer; a page of docs/ starts with the venv active, as its reader comes from the README. HOME is a
  scratch home holding `~/my-kb`, a committed copy of the knomit fixture (corpus-fixtures/knomit),
  for "use it on the KB you have".
- a ```console, ```text, ```toml, ```ini (any other) block is shown, never run: commands that install
  (`make`), call the real API, or need ids that differ on each run go there, as transcripts.
No API key is set and ANTHROPIC_BASE_URL is a closed loopback port, so no example reaches a real API.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DEMO, GIT_ENV, REPO, git

from knomit_judge.init import init_corpus
from knomit_judge.session.review import ReviewOptions, review

FENCE = re.compile(r"^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S)
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


# slow: runs the README's shell examples (make demo among them) in a fresh clone
pytestmark = pytest.mark.slow


def sh_blocks(text: str) -> list[str]:
    return [m["body"] for m in FENCE.finditer(text) if m["lang"] == "sh"]


@pytest.fixture(scope="module")
def after_make_demo(tmp_path_factory) -> Path:
    """A scratch clone and home as `make demo` leaves them (built once; each test runs in a copy)."""
    top = tmp_path_factory.mktemp("newcomer")
    clone = top / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(Path(sys.prefix))
    (clone / "corpus-fixtures").symlink_to(REPO / "corpus-fixtures")
    demo = clone / ".demo" / "knomit-demo"
    demo.mkdir(parents=True)
    shutil.copytree(DEMO / "facts", demo / "facts")
    shutil.copy(DEMO / "knomit-judge.toml", demo)
    git(demo, "init", "-q", "-b", "main")
    init_corpus(demo)
    git(demo, "add", "facts", "knomit-judge.toml")
    git(demo, "commit", "-q", "-m", "demo corpus")
    for _ in range(2):
        review(demo, ReviewOptions(judge=f"scripted:{DEMO / 'judge-replies.jsonl'}"))
    kb = top / "home" / "my-kb"
    shutil.copytree(REPO / "corpus-fixtures" / "knomit", kb, ignore=shutil.ignore_patterns("judge-replies.jsonl"))
    git(kb, "init", "-q", "-b", "main")
    git(kb, "add", "-A")
    git(kb, "commit", "-q", "-m", "knowledge written by knomit's agents")
    return top


def newcomer_env(home: Path) -> dict[str, str]:
    """This environment without an API key or knomit-judge on PATH; a scratch home with a git identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k != "VIRTUAL_ENV"}
    path = [d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "knomit-judge").exists()]
    return {
        **env,
        **GIT_ENV,
        "HOME": str(home),
        "PATH": os.pathsep.join(path),
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    }


@pytest.mark.parametrize(
    "page", [p for p in PAGES if sh_blocks(p.read_text(encoding="utf-8"))], ids=lambda p: str(p.relative_to(REPO))
)
def test_shell_examples_run(page, after_make_demo, tmp_path):
    top = tmp_path / "newcomer"
    shutil.copytree(after_make_demo, top, symlinks=True)
    blocks = sh_blocks(page.read_text(encoding="utf-8"))
    script = "\n".join(f"# {page.name}, sh block {i + 1}\n{block}" for i, block in enumerate(blocks))
    if page.name != "README.md":
        script = ". .venv/bin/activate\n" + script
    done = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", script],
        cwd=top / "clone",
        env=newcomer_env(top / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{page.name}: exit {done.returncode}\n{done.stderr[-4000:]}"


def test_the_convention_runs_sh_and_only_sh():
    text = "```sh\nrun me\n```\n```console\n$ not me\n```\n```text\nnor me\n```\n```\nnor me\n```\n"
    assert sh_blocks(text) == ["run me\n"]


def test_the_readme_has_examples_that_run():
    """The first screen's example activates the venv, and the KB example is among those run."""
    blocks = sh_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert blocks and blocks[0].startswith(". .venv/bin/activate")
    assert any("knomit-judge init" in b for b in blocks)


def test_the_readmes_dry_run_example_keeps_every_pass_line(after_make_demo, tmp_path):
    """The KB example's filter keeps the summary and every pass's line (a `sed -n 1,6p` cut discovery's)."""
    top = tmp_path / "newcomer"
    shutil.copytree(after_make_demo, top, symlinks=True)
    [line] = [
        x
        for b in sh_blocks((REPO / "README.md").read_text(encoding="utf-8"))
        for x in b.splitlines()
        if "--dry-run |" in x
    ]
    script = f'. .venv/bin/activate\nKB=~/my-kb\nknomit-judge -q init "$KB" >/dev/null\n{line}\n'
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=top / "clone",
        env=newcomer_env(top / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    shown = done.stdout.splitlines()
    assert shown[0].startswith("dry run: would ask")
    for name in ("corpus", "exact", "alias", "describe", "prune", "discovery"):
        assert any(x.startswith(f"{name}: ") for x in shown), (name, shown)
    assert not any(x.startswith("would offer") for x in shown)
