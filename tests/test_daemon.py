"""The daemon: crontab schedules, sessions one at a time on a seconds-level trigger, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import motif_repo, stored_sessions
from messages_server import DEFAULT_REPLY, delay, text

from knomit_judge.cli import cli
from knomit_judge.daemon import cron_trigger, run_daemon
from knomit_judge.session.review import ReviewOptions, review

KNOMIT_JUDGE = Path(sys.executable).parent / "knomit-judge"
WEDNESDAY = datetime(2025, 1, 1, tzinfo=UTC)
# appended to [judge]: one judgment in flight, so "the current one" is one
SERIAL = "\nconcurrency = 1\n"


# slow: the daemon runs as a subprocess through several scheduled sessions
pytestmark = pytest.mark.slow


def decline(seconds: float = 0.0):
    """A judge that says no to every pass's question, after `seconds`."""

    def respond(request, n):
        if '"motif_a"' in request.prompt:
            reply = DEFAULT_REPLY
        elif '"fact_a"' in request.prompt:
            reply = '{"decision": "distinct", "rationale": "Two different claims."}'
        else:
            reply = '{"entails": false, "fact": null, "rationale": "Nothing new follows."}'
        return delay(seconds, text(reply)) if seconds else text(reply)

    return respond


def fire_times(expr: str, n: int = 4, start: datetime = WEDNESDAY) -> list[datetime]:
    trigger, out, prev, now = cron_trigger(expr), [], None, start
    for _ in range(n):
        prev = trigger.get_next_fire_time(prev, now)
        out.append(prev)
        now = prev + timedelta(microseconds=1)
    return out


def test_cron_expressions_keep_their_crontab_meaning():
    # 0 is Sunday, as in cron
    assert {t.strftime("%a %H:%M") for t in fire_times("0 3 * * 0")} == {"Sun 03:00"}
    assert fire_times("0 3 * * 7") == fire_times("0 3 * * 0")
    assert {t.strftime("%a") for t in fire_times("30 2 * * 1-5", 10)} == {"Mon", "Tue", "Wed", "Thu", "Fri"}
    # day of month and day of week both restricted: either matches, as in cron
    assert [t.strftime("%a %d") for t in fire_times("0 0 13 * 5")] == ["Fri 03", "Fri 10", "Mon 13", "Fri 17"]
    # six fields: seconds first
    times = fire_times("*/2 * * * * *")
    assert [(b - a).total_seconds() for a, b in zip(times, times[1:])] == [2.0, 2.0, 2.0]


def test_a_bad_schedule_or_corpus_exits_2_before_waiting(corpus_repo, tmp_path):
    result = CliRunner().invoke(cli, ["daemon", str(corpus_repo.root), "--cron", "0 3 * *"])
    assert result.exit_code == 2 and "--cron '0 3 * *': 4 fields" in result.stderr
    result = CliRunner().invoke(cli, ["daemon", str(tmp_path / "nowhere"), "--cron", "0 3 * * *"])
    assert result.exit_code == 2 and "nowhere: no such directory" in result.stderr


def test_daemon_runs_sessions_one_at_a_time_until_stopped(tmp_path, judge_env):
    # The first session asks 6 questions per pass at 0.4 s each, longer than the 1 s schedule: runs that come
    # due meanwhile must be skipped, not run alongside. Its balance spent, the second asks nothing.
    repo = motif_repo(tmp_path, "optimistic_cap = 6\nprobe_every = 9\n")
    repo.write("knomit-judge.toml", repo.read("knomit-judge.toml").replace("[judge]", "[judge]" + SERIAL))
    repo.commit("serial judge")
    judge_env.responder = decline(0.4)
    stop, results = threading.Event(), []

    def on_session(result):
        results.append(result)
        if len(results) == 2:
            stop.set()

    ran = []
    thread = threading.Thread(
        target=lambda: ran.append(run_daemon(repo.root, "*/1 * * * * *", stop=stop, on_session=on_session))
    )
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert ran == [2]
    rows = stored_sessions(repo)
    assert [r["id"] for r in rows] == [r.session for r in results]
    assert rows[1]["started_at"] >= rows[0]["ended_at"]
    assert [r["passes"]["alias"]["judged"] for r in rows] == [6, 0]
    assert [r["passes"]["prune"]["judged"] for r in rows] == [6, 0]
    assert judge_env.calls == 12 + sum(r["passes"]["discovery"]["judge_calls"] for r in rows)
    assert not any(r.broken for r in results)
    review(repo.root, ReviewOptions(dry_run=False, passes=("alias",)))  # the lock was released


def test_sigterm_stops_the_daemon_after_the_current_judgment(tmp_path, judge_env):
    # ~25 questions wait; only the one in flight may finish
    repo = motif_repo(tmp_path, "enabled = false\n")
    repo.write("knomit-judge.toml", repo.read("knomit-judge.toml").replace("[judge]", "[judge]" + SERIAL))
    repo.commit("serial judge")
    judge_env.responder = decline(1.0)
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": judge_env.url,
        "ANTHROPIC_API_KEY": "sk-ant-test-FAKEKEY-0123456789",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("KNOMIT_JUDGE_MODEL", None)
    # the judge model reads alone, as these tests count its calls
    env["KNOMIT_JUDGE_FIRST_READER"] = ""
    proc = subprocess.Popen(
        [str(KNOMIT_JUDGE), "daemon", str(repo.root), "--cron", "*/1 * * * * *"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while judge_env.calls < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert judge_env.calls >= 1, proc.stderr.read() if proc.poll() is not None else "no judge call"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert time.monotonic() - sent < 10
    assert "daemon: stopped after 1 session(s)" in err
    rows = stored_sessions(repo)
    assert len(rows) == 1 and rows[0]["ended_at"]
    alias = rows[0]["passes"]["alias"]
    # the judgment in flight finished and was stored; no other began
    assert alias["judged"] == judge_env.calls == 1
    assert any(n.startswith("stopping: ") for n in alias["notes"])
    # recorded as a plain review's SIGTERM is: every judged pass aborted, none defunded, no throttle record
    assert {n: rows[0]["passes"][n]["state"] for n in ("alias", "prune", "discovery")} == dict.fromkeys(
        ("alias", "prune", "discovery"), "aborted"
    )
    assert all("aborted: interrupted" in rows[0]["passes"][n]["notes"] for n in ("alias", "prune", "discovery"))
    throttle = json.loads(CliRunner().invoke(cli, ["status", str(repo.root), "--json"]).stdout)["throttle"]
    assert "defunded" not in (throttle["prune"]["state"], throttle["discovery"]["state"])
    # what it did ask is counted, aborted or not
    assert rows[0]["passes"]["alias"]["judge_calls"] == 1
    assert err.count("daemon: stopping") == 1, err  # the stop note, once
    # its verdict was journalled and committed
    assert repo.status() == ""
    calls = judge_env.calls
    judge_env.responder = decline()
    result = review(repo.root, ReviewOptions(passes=("alias",)))  # the lock was released
    alias = result.passes["alias"]
    # the daemon's one answer is not asked again
    assert alias.candidates > 20 and alias.cached == 1
    assert alias.judged == alias.candidates - 1 and judge_env.calls == calls + alias.judged
