"""The metrics file for a judge nobody watches, and the units that run it unattended.

Real reviews through the real SDK to the loopback server; the file is read back with prometheus_client's
own text parser; the kill is a real SIGKILL of a real writer process; the units go through the real
systemd-analyze where the machine has it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import JUDGE as THROTTLE_JUDGE
from helpers import copy_of, git, parse, value, write_config
from messages_server import DEFAULT_REPLY, status, text

from knomit_judge.cli import cli
from knomit_judge.config import load_config
from knomit_judge.metrics import _PASS_GAUGES, PASS_STATES, write_atomic

REPO = Path(__file__).resolve().parent.parent
# one call per question, one at a time
JUDGE = THROTTLE_JUDGE + "concurrency = 1\n"


# slow: the cron line and systemd units run the installed tool in a shell
pytestmark = pytest.mark.slow


@pytest.fixture
def many(templates, tmp_path):
    return copy_of(templates["many"], tmp_path)


def review_cli(repo, *extra):
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "alias", *extra])
    assert result.exit_code in (0, 1), result.output
    return result


def status_json(repo) -> dict:
    return json.loads(CliRunner().invoke(cli, ["-q", "status", str(repo.root), "--json"]).stdout)


def test_a_review_writes_a_metrics_file_the_prometheus_parser_reads_back(many, judge_env, tmp_path):
    # 4 questions at claude-sonnet-4-6's $3 / $15, then the rest waits
    write_config(many, JUDGE + 'model = "claude-sonnet-4-6"\nmax_cost_usd = 0.0025\n')
    prom = tmp_path / "textfile" / "knomit-judge.prom"
    prom.parent.mkdir()
    before = time.time()
    out = json.loads(review_cli(many, "--json", "--metrics-file", str(prom)).stdout)
    samples = parse(prom)
    corpus = str(many.root)
    alias = out["passes"]["alias"]

    # the state: one series per state name, the current one at 1
    states = {
        dict(ls)["state"]: v
        for (n, ls), v in samples.items()
        if n == "knomit_judge_pass_state" and dict(ls)["pass"] == "alias"
    }
    assert set(states) == set(PASS_STATES) and states == {s: float(s == "worked") for s in PASS_STATES}
    assert all(dict(ls)["corpus"] == corpus for _, ls in samples)
    for key in ("candidates", "offered", "judged", "resolved", "waiting"):
        name = "knomit_judge_pass_candidates" if key == "candidates" else f"knomit_judge_pass_{key}_candidates"
        assert value(samples, name, **{"pass": "alias"}) == alias[key]
    assert alias["waiting"] > 0 and alias["judged"] == 4
    assert value(samples, "knomit_judge_pass_session_cost_usd", **{"pass": "alias"}) == pytest.approx(alias["cost_usd"])
    assert value(samples, "knomit_judge_pass_today_cost_usd", **{"pass": "alias"}) == pytest.approx(alias["cost_usd"])
    assert value(samples, "knomit_judge_today_cost_usd") == pytest.approx(out["spend"]["today_usd"])
    ended = value(samples, "knomit_judge_pass_last_session_timestamp_seconds", **{"pass": "alias"})
    assert before - 1 <= ended <= time.time()
    assert value(samples, "knomit_judge_pass_last_success_timestamp_seconds", **{"pass": "alias"}) == ended
    assert value(samples, "knomit_judge_pass_failed_sessions", **{"pass": "alias"}) == 0
    # a pass this session did not run has no last session to report, but its throttle and allowance
    assert not [k for k in samples if k[0] == "knomit_judge_pass_state" and dict(k[1])["pass"] == "prune"]
    assert value(samples, "knomit_judge_pass_throttle_state", **{"pass": "prune", "state": "optimistic"}) == 1
    # the opening in money, counted in questions of the judge model at its price
    # the opening, $0.05, at claude-sonnet-4-6: 8
    opening = int(0.05 / load_config(many.root).question_usd() + 1e-9)
    assert value(samples, "knomit_judge_pass_allowance_questions", **{"pass": "prune"}) == opening
    # the corpus
    assert value(samples, "knomit_judge_corpus_state", state="read") == 1
    assert value(samples, "knomit_judge_corpus_state", state="broken") == 0
    assert value(samples, "knomit_judge_corpus_read_files") == 10
    assert value(samples, "knomit_judge_corpus_skipped_files") == 0

    # status --json carries the same figures, so a script needs only one of them
    m = status_json(many)["metrics"]
    assert m["passes"]["alias"]["judged"] == 4 and m["corpus"]["read"] == 10
    assert value(samples, "knomit_judge_pass_allowance_questions", **{"pass": "alias"}) == (
        math.inf if m["passes"]["alias"]["allowance"] is None else m["passes"]["alias"]["allowance"]
    )
    assert datetime.fromisoformat(m["passes"]["alias"]["last_session_at"]).timestamp() == ended
    for key, name in (
        ("today_usd", "knomit_judge_today_cost_usd"),
        ("last_30_days_usd", "knomit_judge_last_30_days_cost_usd"),
        ("month_projection_usd", "knomit_judge_month_projection_cost_usd"),
        ("day_cap_usd", "knomit_judge_day_cap_usd"),
    ):
        assert value(samples, name) == pytest.approx(m["spend"][key])
    # every per-pass series of the file is the figure of the same name in status --json
    for name, _, key in _PASS_GAUGES:
        for pass_name, figs in m["passes"].items():
            want = figs[key]
            if isinstance(want, str):
                want = datetime.fromisoformat(want).timestamp()
            found = [v for (n, ls), v in samples.items() if n == name and dict(ls)["pass"] == pass_name]
            if want is None and key != "allowance":
                assert found == [], (name, pass_name)
            else:
                assert found == [math.inf if want is None else pytest.approx(want)], (name, pass_name)
    # no temporary file left behind
    assert not list(prom.parent.glob(".*"))

    # a dry run writes no metrics file
    mtime = prom.stat().st_mtime_ns
    review_cli(many, "--dry-run", "--metrics-file", str(prom))
    assert prom.stat().st_mtime_ns == mtime


def test_broken_sessions_in_a_row_and_the_last_success_are_in_the_file(many, judge_env, tmp_path):
    prom = tmp_path / "k.prom"
    write_config(
        many,
        JUDGE + "max_cost_usd = 0.0025\n\n[budget]\nenabled = false\n"
        f"\n[metrics]\ntextfile = {json.dumps(str(prom))}\n",
    )
    review_cli(many)
    good = value(parse(prom), "knomit_judge_pass_last_success_timestamp_seconds", **{"pass": "alias"})
    judge_env.responder = lambda req, n: status(500)
    for n in (1, 2):
        assert review_cli(many).exit_code == 1
        samples = parse(prom)
        assert value(samples, "knomit_judge_pass_failed_sessions", **{"pass": "alias"}) == n
        assert value(samples, "knomit_judge_pass_state", **{"pass": "alias", "state": "broken"}) == 1
        assert value(samples, "knomit_judge_pass_last_success_timestamp_seconds", **{"pass": "alias"}) == good
        assert value(samples, "knomit_judge_pass_last_session_timestamp_seconds", **{"pass": "alias"}) > good
    assert status_json(many)["metrics"]["passes"]["alias"]["failed_sessions"] == 2


def test_a_metrics_path_that_cannot_work_exits_2_before_the_session(many, judge_env, tmp_path):
    # in the work tree, not ignored
    write_config(many, JUDGE + '\n[metrics]\ntextfile = "metrics.prom"\n')
    result = CliRunner().invoke(cli, ["-q", "review", str(many.root)])
    assert (
        result.exit_code == 2 and "metrics.textfile 'metrics.prom': inside the corpus and not ignored" in result.stderr
    )
    result = CliRunner().invoke(
        cli, ["-q", "review", str(many.root), "--metrics-file", str(tmp_path / "no" / "k.prom")]
    )
    assert result.exit_code == 2 and "does not exist" in result.stderr
    assert judge_env.calls == 0
    # git-ignored, the same place is fine: the tree stays clean and decisions still apply
    many.write(".gitignore", many.read(".gitignore") + "metrics.prom\n")
    many.commit("ignore the metrics file")
    review_cli(many)
    assert (many.root / "metrics.prom").exists() and git(many.root, "status", "--porcelain") == ""


def test_a_metrics_directory_the_session_cannot_write_exits_2_before_the_session(many, judge_env, tmp_path):
    head = many.log("%H")
    # no file can be made there, not even by root (who passes every permission check)
    places = ["/proc"]
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir(mode=0o555)
        places.append(str(tmp_path / "ro"))
    for place in places:
        result = CliRunner().invoke(cli, ["-q", "review", str(many.root), "--metrics-file", f"{place}/k.prom"])
        assert result.exit_code == 2 and f"--metrics-file '{place}/k.prom': cannot write in {place}" in result.stderr
    assert judge_env.calls == 0 and many.log("%H") == head and status_json(many)["last_session"] is None


def test_a_metrics_file_not_written_after_the_session_is_a_non_zero_exit(many, judge_env, tmp_path):
    write_config(many, JUDGE)
    folder = tmp_path / "textfile"
    folder.mkdir()

    def respond(request, n):
        # while the session runs the directory becomes a file: the write fails as on a full disk
        if folder.is_dir():
            folder.rmdir()
            folder.write_text("not a directory\n", encoding="utf-8")
        return text(DEFAULT_REPLY)

    judge_env.responder = respond
    result = CliRunner().invoke(
        cli, ["-q", "review", str(many.root), "--pass", "alias", "--json", "--metrics-file", str(folder / "k.prom")]
    )
    assert judge_env.calls > 0
    # a systemd unit shows it failed
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["metrics_error"].startswith(f"metrics file {folder / 'k.prom'} not written")
    # the session itself is done and committed
    assert out["passes"]["alias"]["state"] == "worked"
    assert status_json(many)["last_session"]["id"] == out["session"]


# The writer, killed between writing the new text and renaming it into place: fsync is the last step
# before the rename, so the hook announces that the new text is all written, then waits to be killed.
WRITER = """
import os, sys, time
from pathlib import Path
from knomit_judge import metrics
real_fsync = os.fsync
def fsync_then_hang(fd):
    real_fsync(fd)
    print("written", flush=True)
    time.sleep(60)
os.fsync = fsync_then_hang
metrics.write_atomic(Path(sys.argv[1]), sys.stdin.read())
"""


def test_killing_the_writer_mid_write_leaves_the_old_file_whole(tmp_path):
    prom = tmp_path / "knomit-judge.prom"
    old = '# HELP knomit_judge_x An old figure.\n# TYPE knomit_judge_x gauge\nknomit_judge_x{corpus="/c"} 1\n'
    write_atomic(prom, old)
    new = old.replace("} 1", "} 2") + "".join(f'knomit_judge_x{{corpus="/c{i}"}} {i}\n' for i in range(20000))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(prom)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    proc.stdin.write(new)
    proc.stdin.close()
    assert proc.stdout.readline().strip() == "written"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    # whole, and still what it was
    assert prom.read_text(encoding="utf-8") == old
    assert parse(prom) == {("knomit_judge_x", (("corpus", "/c"),)): 1.0}
    [tmp] = [p for p in tmp_path.iterdir() if p != prom]
    assert tmp.name.startswith(".knomit-judge.prom.") and not tmp.name.endswith(".prom")  # the collector skips it
    # the kill came after the whole new text was written
    assert tmp.read_text(encoding="utf-8") == new
    # the next session's write replaces it whole
    write_atomic(prom, new)
    assert prom.read_text(encoding="utf-8") == new


# -- running it unattended ------------------------------------------------------------------------

UNITS = REPO / "contrib" / "systemd"
# One install for every example: `pipx install` as the user who runs the sessions, the key in that user's home.
# The system unit's user is knomit; cron and the README run as whoever owns the corpus.
UNIT_HOME = "/home/knomit"
EXE, KEY_FILE, LOG = ".local/bin/knomit-judge", ".config/knomit-judge.env", ".local/state/knomit-judge.log"


def cron_lines() -> dict[str, str]:
    """The crontab line of contrib/cron.example, of the README and of docs/unattended.md, by file."""
    found = {}
    for path in (REPO / "contrib" / "cron.example", REPO / "README.md", REPO / "docs" / "unattended.md"):
        [line] = [x for x in path.read_text(encoding="utf-8").splitlines() if x.startswith("0 3 * * * ")]
        found[path.name] = line.split(None, 5)[5]
    return found


def test_the_units_are_a_oneshot_service_and_a_timer_that_cannot_overlap_it():
    service = (UNITS / "knomit-judge-review.service").read_text(encoding="utf-8")
    timer = (UNITS / "knomit-judge-review.timer").read_text(encoding="utf-8")
    keys = [line.split("=", 1)[0] for line in service.splitlines() if line and not line.startswith("#")]
    assert "Type=oneshot" in service.splitlines() and "RemainAfterExit" not in keys
    assert "Unit=knomit-judge-review.service" in timer.splitlines() and "Persistent=true" in timer.splitlines()
    assert "--metrics-file" in service
    cron = (REPO / "contrib" / "cron.example").read_text(encoding="utf-8")
    assert 'knomit-judge" -q review' in cron and "--metrics-file" in cron


def test_the_units_the_cron_example_and_the_readme_name_one_install_and_one_key_file(tmp_path):
    service = (UNITS / "knomit-judge-review.service").read_text(encoding="utf-8").splitlines()
    assert f"ExecStart={UNIT_HOME}/{EXE} review . \\" in service
    # no "-": a missing key file fails the unit
    assert f"EnvironmentFile={UNIT_HOME}/{KEY_FILE}" in service
    for name, line in cron_lines().items():
        assert f'"$HOME/{EXE}"' in line and f'. "$HOME/{KEY_FILE}"' in line, name
        assert line.endswith(f'>> "$HOME/{LOG}" 2>&1'), name
    # the key file's set-up line in the unit's comment, run in the user's home (sudo -i), where ~/.config is missing
    [setup] = [x.split("sudo -iu knomit ", 1)[1].split("#")[0] for x in service if "knomit install " in x]
    subprocess.run(["sh", "-c", setup], cwd=tmp_path, check=True)
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600 and (tmp_path / KEY_FILE).read_text() == ""


@pytest.mark.parametrize("name", ["cron.example", "README.md", "unattended.md"])
def test_a_cron_line_logs_a_missing_key_file_and_the_tool_s_errors_in_its_log_not_in_cron_mail(name, tmp_path):
    line = cron_lines()[name].replace("/srv/knowledge", '"$HOME/my-kb"')
    home = tmp_path / "home"
    # a directory, not a corpus: the tool itself must say so
    (home / "my-kb").mkdir(parents=True)
    (home / ".local" / "state").mkdir(parents=True)
    # cron's bare environment; and git's ceiling (tests/conftest.py): the test's folder is inside the clone
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "GIT_CEILING_DIRECTORIES": os.environ["GIT_CEILING_DIRECTORIES"],
    }
    # cron mails whatever the line itself prints: it must print nothing
    done = subprocess.run(["/bin/sh", "-c", line], env=env, capture_output=True, text=True, timeout=60)
    assert (done.stdout, done.stderr) == ("", "") and done.returncode != 0
    assert f"{home}/{KEY_FILE}" in (home / LOG).read_text(encoding="utf-8")

    (home / KEY_FILE).parent.mkdir(parents=True)
    key = "ANTHROPIC_API_KEY=sk-ant-test-FAKEKEY-0123456789\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n"
    (home / KEY_FILE).write_text(key, encoding="utf-8")
    (home / EXE).parent.mkdir(parents=True)
    (home / EXE).symlink_to(shutil.which("knomit-judge") or Path(sys.executable).parent / "knomit-judge")
    done = subprocess.run(["/bin/sh", "-c", line], env=env, capture_output=True, text=True, timeout=120)
    assert (done.stdout, done.stderr) == ("", "") and done.returncode == 2
    # the key file was read and the tool ran: its own error (the directory is no corpus) is in the log too
    assert (home / LOG).read_text(encoding="utf-8").splitlines()[
        -1
    ] == f"knomit-judge: {home}/my-kb: not a git repository (run `knomit-judge init` there)"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not on this machine")
def test_systemd_analyze_verifies_the_units(tmp_path):
    """The shipped units as they are, but for the knomit user's home: a scratch one where pipx put knomit-judge."""
    home = tmp_path / "home"
    (home / EXE).parent.mkdir(parents=True)
    (home / EXE).symlink_to(shutil.which("knomit-judge") or Path(sys.executable).parent / "knomit-judge")
    (home / KEY_FILE).parent.mkdir(parents=True)
    (home / KEY_FILE).write_text("ANTHROPIC_API_KEY=x\n", encoding="utf-8")
    for unit in UNITS.iterdir():
        (tmp_path / unit.name).write_text(
            unit.read_text(encoding="utf-8").replace(UNIT_HOME, str(home)), encoding="utf-8"
        )
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / u.name) for u in UNITS.iterdir())],
        capture_output=True,
        text=True,
    )
    # verify exits 0 even on a line it ignores; any message at all is a fault in the units
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stdout + done.stderr


def test_a_session_that_aborts_still_writes_the_file_saying_so(many, judge_env, tmp_path):
    prom = tmp_path / "k.prom"
    write_config(many, JUDGE)
    judge_env.responder = lambda req, n: status(401, message="invalid x-api-key")
    result = CliRunner().invoke(cli, ["-q", "review", str(many.root), "--pass", "alias", "--metrics-file", str(prom)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    samples = parse(prom)
    assert value(samples, "knomit_judge_pass_state", **{"pass": "alias", "state": "aborted"}) == 1
    assert value(samples, "knomit_judge_pass_failed_sessions", **{"pass": "alias"}) == 1
    assert not [k for k in samples if k[0] == "knomit_judge_pass_last_success_timestamp_seconds"]
