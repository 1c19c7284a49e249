"""A session in a process of its own, signalled or killed mid-way: a review subprocess against the loopback
server that runs in the test process, and a knomit-judge command killed inside a git hook.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import REPO
from judges import DIFFERENT
from messages_server import delay, held, text


def judge_env_of(server) -> dict[str, str]:
    """The environment of a knomit-judge process that asks the loopback `server`: a fake key, no model download,
    the configured judge model, which reads alone (these tests count its calls)."""
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-FAKEKEY",
        "HF_HUB_OFFLINE": "1",
        "KNOMIT_JUDGE_FIRST_READER": "",
    }
    env.pop("KNOMIT_JUDGE_MODEL", None)
    return env


def start(repo, server, sigint=signal.SIG_DFL) -> subprocess.Popen:
    """The review as its own process; `sigint=signal.SIG_IGN` starts it as a shell starts a background job."""
    env = judge_env_of(server)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from knomit_judge.cli import main; main()",
            "-q",
            "review",
            str(repo.root),
            "--pass",
            "alias",
            "--json",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )


def slow_then_held(server, calls: int) -> threading.Event:
    """Replies after 0.4 s; from request `calls` on, only once the returned event is set.

    The session then cannot finish before the test has sent its signal, however long this process is
    descheduled between seeing the calls and signalling (under load, a stall once let a session end first
    and exit 0 instead of 130).
    """
    released = threading.Event()
    slow = delay(0.4, text(json.dumps(DIFFERENT)))
    server.responder = lambda req, n: slow if n < calls else held(released, slow)
    return released


def signal_after(proc, server, calls: int, sig, released: threading.Event) -> tuple[int, str]:
    """Send sig once the server has seen `calls` requests, then release the held ones; returns exit code and stderr."""
    deadline = time.monotonic() + 60
    while server.calls < calls:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the session never reached the judge"
        time.sleep(0.02)
    assert proc.poll() is None, "the session ended before the signal"
    proc.send_signal(sig)
    released.set()
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def hook(root: Path, name: str, body: str) -> Path:
    path = root / ".git" / "hooks" / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def kill_in_hook(root: Path, name: str, *argv: str) -> None:
    """Run a knomit-judge command in its own process group and SIGKILL the group inside a git hook."""
    marker = root.parent / f"{name}.running"
    hook(root, name, f"touch '{marker}'\nsleep 60")
    exe = Path(sys.executable).parent / "knomit-judge"
    proc = subprocess.Popen(
        [str(exe), *argv],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (root / ".git" / "hooks" / name).unlink()
    marker.unlink()
