"""A real headless Chromium for the report's browser tests, and the gate that keeps them from rotting unseen.

`make test` installs nothing outside the clone, so where there is no Chromium a browser test skips. CI
(`.ci/run`) installs Chromium and sets KNOMIT_REQUIRE_BROWSER=1: there a browser test that skips, for any
reason, is a failure, so a browser test can never again pass CI by not running.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

REQUIRE = "KNOMIT_REQUIRE_BROWSER"
# the flags that start it headless here and in CI: no sandbox as root, no GPU, no network of its own
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str:
    """The Chromium executable; skips the test (a failure under KNOMIT_REQUIRE_BROWSER) when there is none."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        why = "chromium is not on PATH (see the README: `sudo apt-get install chromium`, then `make test-browser`)"
        pytest.fail(why) if os.environ.get(REQUIRE) else pytest.skip(why)
    return exe


def run_chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'chromium'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def chromium_dom(path, tmp_path, *flags: str) -> str:
    """The page's DOM after Chromium has parsed, laid out and run it."""
    return run_chromium(tmp_path, *flags, "--dump-dom", path.as_uri()).stdout


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Where KNOMIT_REQUIRE_BROWSER is set, a test marked `browser` that skipped has failed."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("browser") and os.environ.get(REQUIRE):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        why = why.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"a browser test must run where {REQUIRE} is set (CI), but it skipped: {why}"
