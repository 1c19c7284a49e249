"""`-q` on every command: nothing on stderr but errors, no progress or confirmation line on stdout.

A command's results (review's status lines, status, verdicts, inbox, calibrate, any --json) are what it was
run for: -q keeps them, byte for byte. A command that only does something (init, revert, label, report,
daemon) prints nothing under -q (issue 54: `knomit-judge -q init` printed 4 lines). Each runs as a
user runs it, the real console script in its own process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import DEMO, GIT_ENV, REPO, git

from knomit_judge.cli import cli

KNOMIT_JUDGE = Path(sys.executable).parent / "knomit-judge"
CALIBRATION = REPO / "corpus-fixtures" / "calibration"
DEMO_JUDGE = f"scripted:{DEMO / 'judge-replies.jsonl'}"

# slow: every command in its own process
pytestmark = pytest.mark.slow


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    return subprocess.run(
        [str(KNOMIT_JUDGE), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env={**env, **GIT_ENV}
    )


def fresh(root: Path, facts: Path) -> Path:
    """A directory holding `facts` (a folder of fact files), made a git repository, not yet initialised."""
    shutil.copytree(facts, root / "facts")
    git(root, "init", "-q", "-b", "main")
    return root


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory) -> Path:
    """The demo corpus initialised and reviewed once with its scripted judge: verdicts, commits, a session."""
    root = fresh(tmp_path_factory.mktemp("quiet") / "demo", DEMO / "facts")
    shutil.copy(DEMO / "knomit-judge.toml", root / "knomit-judge.toml")
    assert run("-q", "init", str(root)).returncode == 0
    git(root, "add", "facts", "knomit-judge.toml")
    git(root, "commit", "-q", "-m", "demo corpus")  # as `make demo` does
    done = run("review", str(root), "--judge", DEMO_JUDGE)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def proposed(tmp_path_factory) -> Path:
    """The demo corpus with [apply] mode = "propose", reviewed once: its decisions wait on the proposals branch."""
    root = fresh(tmp_path_factory.mktemp("quiet") / "demo", DEMO / "facts")
    (root / "knomit-judge.toml").write_text(
        (DEMO / "knomit-judge.toml").read_text(encoding="utf-8") + '\n[apply]\nmode = "propose"\n', encoding="utf-8"
    )
    assert run("-q", "init", str(root)).returncode == 0
    git(root, "add", "facts", "knomit-judge.toml")
    git(root, "commit", "-q", "-m", "demo corpus")
    done = run("review", str(root), "--judge", DEMO_JUDGE)
    assert done.returncode == 0, done.stderr
    return root


def waiting_proposal(root: Path) -> str:
    items = json.loads(run("inbox", str(root), "--json").stdout)["items"]
    return next(i["verdict"] for i in items if i["kind"] == "proposal")


def applied_verdict(root: Path) -> str:
    rows = json.loads(run("verdicts", str(root), "--json").stdout)["verdicts"]
    return next(r["id"] for r in rows if r["commit_sha"] and r["pass"] != "exact")


def daemon(root: Path, quiet: bool) -> subprocess.CompletedProcess:
    """The daemon on a far schedule, stopped by SIGTERM once its handler is in place."""
    proc = subprocess.Popen(
        [
            str(KNOMIT_JUDGE),
            *(["-q"] if quiet else []),
            "daemon",
            str(root),
            "--cron",
            "0 3 1 1 *",
            "--judge",
            DEMO_JUDGE,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    deadline = time.monotonic() + 60
    # before that, SIGTERM would kill it, not stop it
    while not caught(proc.pid, signal.SIGTERM):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    # the handler is set just before the scheduler starts and says so
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def caught(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` (Linux: the SigCgt mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(mask & (1 << (sig - 1)))


# Each command as a user runs it, on its own copy of the reviewed demo corpus (or a fresh directory):
# (how to run it with the corpus at `root` and scratch space at `tmp`, whether its stdout is a result -q keeps).
COMMANDS = {
    "init": (lambda root, tmp: ["init", str(fresh(tmp / "new", DEMO / "facts"))], False),
    "review": (lambda root, tmp: ["review", str(root), "--judge", DEMO_JUDGE], True),
    "status": (lambda root, tmp: ["status", str(root)], True),
    "verdicts": (lambda root, tmp: ["verdicts", str(root)], True),
    "inbox": (lambda root, tmp: ["inbox", str(root)], True),
    "rebuild": (lambda root, tmp: ["rebuild", str(root)], True),
    "revert": (lambda root, tmp: ["revert", applied_verdict(root), str(root)], False),
    "label": (lambda root, tmp: ["label", applied_verdict(root), "yes", str(root)], False),
    "report": (lambda root, tmp: ["report", str(root), "--html", str(tmp / "report.html")], False),
    "calibrate": (
        lambda root, tmp: [
            "calibrate",
            str(CALIBRATION / "labels.jsonl"),
            str(calibration(tmp)),
            "--judge",
            f"scripted:{CALIBRATION / 'judge-replies.jsonl'}",
        ],
        True,
    ),
    "daemon": (None, False),
    "links": (lambda root, tmp: ["links", str(root)], True),
    # on the `proposed` corpus: approve says what landed and what was left (a result), reject only confirms
    "approve": (lambda root, tmp: ["approve", "--all", str(root)], True),
    "reject": (lambda root, tmp: ["reject", waiting_proposal(root), str(root)], False),
}
PROPOSING = {"approve", "reject"}


def calibration(tmp: Path) -> Path:
    root = fresh(tmp / "calibration", CALIBRATION / "facts")
    assert run("-q", "init", str(root)).returncode == 0
    git(root, "add", "facts")
    git(root, "commit", "-q", "-m", "calibration corpus")
    return root


def test_every_command_is_covered():
    assert set(COMMANDS) == set(cli.commands), "a new command: say here what it prints under -q"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_quiet_leaves_only_results_and_errors(name, request, tmp_path):
    reviewed = request.getfixturevalue("proposed" if name in PROPOSING else "reviewed")
    outputs = {}
    for quiet in (False, True):
        root, tmp = tmp_path / f"q{quiet}" / "demo", tmp_path / f"t{quiet}"
        tmp.mkdir(parents=True)
        shutil.copytree(reviewed, root, symlinks=True)
        make, keeps = COMMANDS[name]
        if make is None:
            done = daemon(root, quiet)
        else:
            done = run(*(["-q"] if quiet else []), *make(root, tmp))
        assert done.returncode == 0, (name, quiet, done.stderr)
        outputs[quiet] = done
    loud, quiet = outputs[False], outputs[True]
    assert quiet.stderr == "", f"-q {name} logged: {quiet.stderr}"
    if keeps:
        assert quiet.stdout and quiet.stdout == normalised(loud.stdout, quiet.stdout)
    else:
        # without -q it says what it did
        assert loud.stdout or loud.stderr
        assert quiet.stdout == "", f"-q {name} printed: {quiet.stdout}"


def normalised(loud: str, quiet: str) -> str:
    """The loud run's stdout with what differs between two runs (session ids, times, paths) taken from the quiet one:
    lines that differ only in those."""
    if loud.count("\n") != quiet.count("\n"):
        return loud
    volatile = re.compile(
        r"\d{8}T\d{6}Z-[0-9a-f]{4}|\d{4}-\d\d-\d\dT[\d:.+]+|/q(True|False)/|/t(True|False)/|"
        r"\b[0-9a-f]{7,40}\b"
    )
    same = all(volatile.sub("", a) == volatile.sub("", b) for a, b in zip(loud.splitlines(), quiet.splitlines()))
    return quiet if same else loud


def test_quiet_names_no_warning_but_the_corpus_line_counts_what_was_skipped(reviewed, tmp_path):
    """A skipped fact is a warning without -q; with it, stderr stays empty and the result still says it."""
    outputs = {}
    for quiet in (False, True):
        root = tmp_path / f"q{quiet}" / "demo"
        shutil.copytree(reviewed, root, symlinks=True)
        (root / "facts" / "bad.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
        git(root, "add", "facts/bad.md")
        git(root, "commit", "-q", "-m", "a bad fact")
        outputs[quiet] = run(*(["-q"] if quiet else []), "review", str(root), "--judge", DEMO_JUDGE)
    loud, quiet = outputs[False], outputs[True]
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "skipped facts/bad.md:2" in loud.stderr
    assert quiet.stderr == "" and "1 skipped" in quiet.stdout
