"""Message Batches end to end: `review --batch` submits, the next session collects, decisions land.

Through the real SDK (messages.batches.create / retrieve / results) to the loopback server, whose
batches stay `in_progress` until the test ends them.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
import sqlite_utils
from click.testing import CliRunner
from helpers import REPO, SAME, SMALL, CorpusRepo, make_repo, write_config
from messages_server import reply_name, tool
from processes import judge_env_of

from knomit_judge.cli import cli
from knomit_judge.rebuild import rebuild

FIRST, SECOND = "penalty-blocks-own-recovery", "self-locking-penalty"
DIFFERENT = {"same": False, "mechanism": ""}
# one call at claude-sonnet-5-5 prices, 1000 tokens in, 100 out
SYNC_USD = (1000 * 2.0 + 100 * 10.0) / 1e6


NO = {
    "prune_reply": {"decision": "distinct", "rationale": "Two claims."},
    "discovery_reply": {"entails": False, "fact": None, "rationale": "Nothing new."},
}


def judge(req, n):
    """Alias: yes for the two spellings of one mechanism, no otherwise; prune and discovery: no.

    1000 tokens in, 100 out per call.
    """
    same = f'"spelling": "{FIRST}"' in req.prompt and f'"spelling": "{SECOND}"' in req.prompt
    answer = NO.get(reply_name(req.body)) or (SAME if same else DIFFERENT)
    return tool(answer, input_tokens=1000, output_tokens=100)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("template") / "small"
    make_repo(root, SMALL)
    # embeddings in the db: sessions (and the daemon subprocess) only judge
    rebuild(root)
    return root


@pytest.fixture
def repo(template, tmp_path, judge_env) -> CorpusRepo:
    shutil.copytree(template, tmp_path / "small", symlinks=True)
    repo = CorpusRepo(tmp_path / "small")
    configure(repo)
    judge_env.responder = judge
    return repo


def configure(repo, **judge_keys):
    # every question in the swap sample (both orders), unless a test says otherwise: the counts below are of
    # both orders' requests; test_one_order_in_a_batch_* shows the batch with first orders only
    values = {"backoff_s": 0.0, "timeout_s": 20, "swap_sample": 1.0, **judge_keys}
    write_config(repo, "[judge]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()))


def run(repo, *extra):
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "alias", *extra])
    out = json.loads(result.stdout) if "--json" in extra and result.stdout.startswith("{") else None
    return result, out


def db(repo):
    return sqlite_utils.Database(repo.root / ".knomit" / "judge.db")


def test_one_order_in_a_batch_and_the_second_only_where_the_first_was_not_the_default(repo, judge_env):
    configure(repo, swap_sample=0.0)
    submitted, _ = run(repo, "--batch")
    [batch] = judge_env.batches.values()
    assert f"batch {batch.id}: 3 requests submitted" in submitted.stdout.splitlines()  # first orders only
    assert {r["position"] for r in db(repo)["batch_requests"].rows} == {0}

    judge_env.end_batches()
    collected, out = run(repo, "--batch", "--json")
    alias = out["passes"]["alias"]
    # the two first orders that gave the default are verdicts; the yes waits on its second order, batched
    assert (alias["judged"], alias["declined"], alias["resolved"], alias["batched"]) == (2, 2, 0, 1)
    second = [b for b in out["batches"] if b["status"] == "submitted"]
    assert [b["requests"] for b in second] == [1]
    assert [r["position"] for r in db(repo)["batch_requests"].rows_where("batch_id = ?", [second[0]["id"]])] == [1]
    assert judge_env.calls == 0

    judge_env.end_batches()
    done, out = run(repo, "--json")
    alias = out["passes"]["alias"]
    assert (alias["resolved"], alias["applied"]) == (1, 1)
    [yes] = db(repo)["verdicts"].rows_where("pass = 'alias' AND is_yes = 1")
    assert (yes["orders"], json.loads(yes["by_position"])) == (2, ["same", "same"])
    assert any(s.startswith("alias: merge motif ") for s in repo.log())


def test_batch_submitted_waited_on_then_collected_and_applied(repo, judge_env):
    submitted, _ = run(repo, "--batch")
    assert submitted.exit_code == 0, submitted.output
    [batch] = judge_env.batches.values()
    # 3 questions x 2 orders
    assert f"batch {batch.id}: 6 requests submitted" in submitted.stdout.splitlines()
    [line] = [x for x in submitted.stdout.splitlines() if x.startswith("alias:")]
    assert line.startswith("alias: batched - candidates 3, offered 3, judged 0") and "judge calls 0" in line
    # nothing asked one by one
    assert judge_env.calls == 0
    # in the judge model's dialect, as a request made one by one would be (structured outputs on claude-sonnet-5-5)
    assert all(
        reply_name(r["params"]) == "alias_reply" and r["params"]["output_config"]["effort"] == "low"
        for r in batch.requests
    )
    assert [r["status"] for r in db(repo)["batches"].rows] == ["submitted"]
    assert db(repo)["batch_requests"].count == 6

    # not collected yet: reported, never asked again
    waiting, out = run(repo, "--json")
    assert waiting.exit_code == 0, waiting.output
    alias = out["passes"]["alias"]
    assert (alias["state"], alias["offered"], alias["batched"], alias["cached"], alias["judge_calls"]) == (
        "batched",
        0,
        3,
        0,
        0,
    )
    assert f"waiting on batch {batch.id}, 6 requests" in alias["notes"]
    assert out["batches"] == [{"id": batch.id, "requests": 6, "status": "waiting"}]
    assert f"waiting on batch {batch.id}, 6 requests" in run(repo)[0].stdout
    assert judge_env.batch_calls.count("create") == 1 and judge_env.calls == 0

    judge_env.end_batches()
    collected, out = run(repo, "--batch", "--json")
    assert collected.exit_code == 0, collected.output
    alias = out["passes"]["alias"]
    assert (alias["state"], alias["judged"], alias["resolved"], alias["applied"]) == ("worked", 3, 1, 1)
    assert alias["judge_calls"] == 6 and alias["cost_usd"] == pytest.approx(6 * SYNC_USD / 2)
    assert judge_env.calls == 0
    assert any(
        s.startswith(f"alias: merge motif '{SECOND}' into '{FIRST}'")
        or s.startswith(f"alias: merge motif '{FIRST}' into '{SECOND}'")
        for s in repo.log()
    )
    verdicts = list(db(repo)["verdicts"].rows_where("pass = 'alias'"))
    assert len(verdicts) == 3 and all(v["cost_usd"] == pytest.approx(2 * SYNC_USD / 2) for v in verdicts)
    assert {json.dumps(SAME), json.dumps(DIFFERENT)} >= {r for v in verdicts for r in json.loads(v["replies"])}
    # journalled like any reply: the journal in git holds the three verdicts
    assert len((repo.root / ".knomit" / "verdicts" / "alias.jsonl").read_text().splitlines()) == 3
    # the merge made new questions (a carrier changed): they go into a new batch; the old one is done
    first, second = out["batches"]
    assert first == {"id": batch.id, "requests": 6, "status": "collected", "succeeded": 6}
    assert second["status"] == "submitted" and second["id"] != batch.id
    assert alias["batched"] >= 1 and second["requests"] == 2 * alias["batched"]
    assert [r["status"] for r in db(repo)["batches"].rows_where(order_by="submitted_at")] == ["collected", "submitted"]
    ids = [r["custom_id"] for b in judge_env.batches.values() for r in b.requests]
    assert len(ids) == len(set(ids))  # nothing was submitted twice

    again, out = run(repo, "--json")
    assert out["batches"] == [{"id": second["id"], "requests": second["requests"], "status": "waiting"}]
    assert judge_env.calls == 0 and judge_env.batch_calls.count("create") == 2


def test_batch_cost_is_half_the_synchronous_cost_for_the_same_usage(repo, judge_env, template, tmp_path):
    judge_env.responder = lambda req, n: tool(DIFFERENT, input_tokens=1000, output_tokens=100)  # nothing applied
    shutil.copytree(template, tmp_path / "sync", symlinks=True)
    sync_repo = CorpusRepo(tmp_path / "sync")
    configure(sync_repo)
    sync = run(sync_repo, "--json")[1]["passes"]["alias"]
    assert sync["judge_calls"] == judge_env.calls == 6 and sync["cost_usd"] == pytest.approx(6 * SYNC_USD)

    run(repo, "--batch")
    judge_env.end_batches()
    batch = run(repo, "--json")[1]["passes"]["alias"]
    # the batch made no synchronous call
    assert batch["judge_calls"] == 6 and judge_env.calls == 6
    assert batch["cost_usd"] == pytest.approx(sync["cost_usd"] / 2)


def test_dry_run_batch_estimates_at_the_batch_price(repo, judge_env):
    def estimate(*extra):
        result, out = run(repo, "--dry-run", "--json", *extra)
        assert result.exit_code == 0, result.output
        [note] = [n for n in out["passes"]["alias"]["notes"] if n.startswith("would ask")]
        return note

    sync, batch = estimate(), estimate("--batch")
    assert batch.endswith(" at batch prices") and not sync.endswith(" at batch prices")
    usd = lambda note: float(note.split("about $", 1)[1].split()[0])  # noqa: E731
    assert usd(batch) == pytest.approx(usd(sync) / 2, abs=0.0001) and usd(sync) > 0
    assert judge_env.calls == 0 and judge_env.batch_calls == []


def test_expired_errored_and_refused_requests(repo, judge_env):
    # nothing applied, so no new questions
    judge_env.responder = lambda req, n: tool(DIFFERENT)
    # requests go in question by question, both orders together: 0-1, 2-3, 4-5
    judge_env.batch_outcome = lambda n, params: {0: "expired", 2: "errored", 4: "invalid"}.get(n)
    run(repo, "--batch")
    judge_env.end_batches()
    result, out = run(repo, "--json")
    # nothing judged, something offered: broken
    assert result.exit_code == 1, result.output
    alias = out["passes"]["alias"]
    assert (alias["judged"], alias["unavailable"], alias["refused"]) == (0, 2, 1)
    assert out["batches"][0]["expired"] == 1 and out["batches"][0]["errored"] == 1
    assert db(repo)["refusals"].count == 1
    # the unavailable two are asked again next session, the refused one is not; each asks only the
    # request that failed, as the other order's batch result is in the reply cache
    result, out = run(repo, "--json")
    assert result.exit_code == 0 and out["passes"]["alias"]["judged"] == 2 and judge_env.calls == 2


def test_batch_needs_the_real_api(repo, tmp_path):
    replies = tmp_path / "r.jsonl"
    replies.write_text("")
    result, _ = run(repo, "--batch", "--judge", f"scripted:{replies}")
    assert result.exit_code == 2 and "needs --judge anthropic" in result.stderr


def test_a_killed_daemon_batch_is_collected_by_the_next_session_without_resubmitting(repo, judge_env):
    configure(repo, mode="batch")
    env = judge_env_of(judge_env)
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from knomit_judge.cli import main; main()",
            "daemon",
            str(repo.root),
            "--cron",
            "* * * * * *",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        # a first session submits; a later one finds it still running and leaves it alone
        while not any(c.startswith("retrieve") for c in judge_env.batch_calls):
            assert time.monotonic() < deadline and daemon.poll() is None, "the daemon never polled its batch"
            time.sleep(0.1)
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
    assert judge_env.batch_calls.count("create") == 1 and judge_env.calls == 0
    [row] = db(repo)["batches"].rows
    assert row["status"] == "submitted" and db(repo)["batch_requests"].count_where("pass = 'alias'") == 6

    judge_env.end_batches()
    # still mode = "batch": collects first, then would batch what is new
    result, out = run(repo, "--json")
    assert result.exit_code == 0, result.output
    alias = out["passes"]["alias"]
    assert alias["judged"] == 3 and alias["applied"] == 1 and judge_env.calls == 0
    assert any(s.startswith("alias: merge motif") for s in repo.log())
    ids = [r["custom_id"] for b in judge_env.batches.values() for r in b.requests]
    # no request was ever submitted twice
    assert len(ids) == len(set(ids))


def test_a_batch_that_cannot_be_submitted_leaves_its_questions_unavailable(repo, judge_env):
    judge_env.batch_create_faults.extend([500, 500, 500])
    result, out = run(repo, "--batch", "--json")
    # offered, nothing judged, nothing in a batch: broken
    assert result.exit_code == 1
    alias = out["passes"]["alias"]
    assert (alias["unavailable"], alias["batched"], alias["state"]) == (3, 0, "broken")
    assert "batch not submitted: HTTP 500" in alias["first_error"]
    assert db(repo)["batches"].count == 0 and judge_env.batch_calls == ["create"] * 3
    # the next session submits them
    result, out = run(repo, "--batch", "--json")
    assert result.exit_code == 0 and out["batches"][0]["status"] == "submitted"


def test_a_batch_the_api_lost_gives_its_questions_back(repo, judge_env):
    run(repo, "--batch")
    # the API answers 404 for it from now on
    judge_env.batches.clear()
    result, out = run(repo, "--json")
    assert result.exit_code == 0, result.output
    assert out["batches"][0]["status"] == "lost"
    assert out["passes"]["alias"]["judged"] >= 3 and judge_env.calls >= 6  # asked synchronously instead


def sigterm_during_create(repo, server) -> subprocess.CompletedProcess:
    """`review --batch` in its own process, sent SIGTERM once the API has made the batch and before its reply."""
    server.batch_create_hold = threading.Event()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from knomit_judge.cli import main; main()",
            "-q",
            "review",
            str(repo.root),
            "--pass",
            "alias",
            "--batch",
        ],
        cwd=REPO,
        env=judge_env_of(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.batch_created.wait(90), "the session never created its batch"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        # the held reply goes to a closed connection
        server.batch_create_hold.set()
        server.batch_create_hold = None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
def test_a_sigterm_during_the_create_call_leaves_a_batch_the_next_session_finds_not_one_it_buys_again(repo, judge_env):
    killed = sigterm_during_create(repo, judge_env)
    assert killed.returncode == 130, killed.stderr
    assert "Traceback" not in killed.stderr
    # the API has the batch
    assert judge_env.batch_calls == ["create"] and len(judge_env.batches) == 1
    [row] = db(repo)["batches"].rows
    # recorded before the call returned
    assert row["status"] == "pending" and row["requests"] == 6
    assert {r["batch_id"] for r in db(repo)["batch_requests"].rows} == {row["id"]}

    # the next session, in batch mode too
    again, out = run(repo, "--batch", "--json")
    assert again.exit_code == 0, again.output
    [made] = judge_env.batches.values()
    assert judge_env.batch_calls.count("create") == 1 and "list" in judge_env.batch_calls
    # nothing asked one by one either: the questions wait on the batch found
    assert judge_env.calls == 0
    assert {"id": made.id, "requests": 6, "status": "waiting"} in out["batches"]
    assert [r["id"] for r in db(repo)["batches"].rows] == [made.id]

    judge_env.end_batches()
    # collects it; what its merge makes new goes in a batch of its own
    done, out = run(repo, "--batch", "--json")
    alias = out["passes"]["alias"]
    assert alias["judged"] == 3 and alias["applied"] == 1 and judge_env.calls == 0
    assert any(s.startswith("alias: merge motif") for s in repo.log())
    ids = [r["custom_id"] for b in judge_env.batches.values() for r in b.requests]
    # no request was ever submitted twice
    assert len(ids) == len(set(ids))


@pytest.mark.slow
def test_a_submission_cut_short_before_the_api_made_it_asks_its_questions_again(repo, judge_env):
    killed = sigterm_during_create(repo, judge_env)
    assert killed.returncode == 130, killed.stderr
    # the API never had it (the request did not arrive whole)
    judge_env.batches.clear()
    again, out = run(repo, "--json")
    assert again.exit_code == 0, again.output
    assert [b["status"] for b in out["batches"]] == ["not submitted"]
    alias = out["passes"]["alias"]
    # asked now, one by one
    assert alias["judged"] >= 3 and alias["applied"] == 1 and judge_env.calls >= 6
    [row] = db(repo)["batches"].rows
    assert row["status"] == "lost"


def test_a_create_whose_answer_is_lost_is_found_in_the_list_before_it_is_sent_again(repo, judge_env):
    # the SDK gives up on a reply that does not come: an answer lost
    configure(repo, timeout_s=1.0)
    judge_env.batch_create_hold = threading.Event()
    try:
        result, out = run(repo, "--batch", "--json")
    finally:
        judge_env.batch_create_hold.set()
    assert result.exit_code == 0, result.output
    # the retry looked in the list first, and found it
    assert judge_env.batch_calls.count("create") == 1
    [made] = judge_env.batches.values()
    assert [b["id"] for b in out["batches"] if b["status"] == "submitted"] == [made.id]
    assert [(r["id"], r["status"]) for r in db(repo)["batches"].rows] == [(made.id, "submitted")]


def test_pending_submissions_are_matched_across_pages_of_the_list_by_size_and_time(repo, judge_env, monkeypatch):
    import anthropic

    from knomit_judge import batches

    # the list read a page of two at a time
    monkeypatch.setattr(batches, "LIST_PAGE", 2)
    killed = sigterm_during_create(repo, judge_env)
    assert killed.returncode == 130, killed.stderr
    [ours] = judge_env.batches.values()
    # other clients of the same key make batches since: newer than ours, of other sizes
    client = anthropic.Anthropic(base_url=judge_env.url, api_key="sk-ant-test-FAKEKEY")
    params = {"model": "claude-sonnet-5-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    for n in (1, 2, 3, 5, 7):
        client.messages.batches.create(requests=[{"custom_id": f"other-{n}-{i}", "params": params} for i in range(n)])
    again, out = run(repo, "--batch", "--json")
    assert again.exit_code == 0, again.output
    assert {"id": ours.id, "requests": 6, "status": "waiting"} in out["batches"]
    # six batches, newest first, two a page
    assert judge_env.batch_calls.count("list") >= 3
    assert [r["id"] for r in db(repo)["batches"].rows] == [ours.id]


def test_an_ended_batch_without_results_is_lost_and_its_questions_asked_again(repo, judge_env):
    run(repo, "--batch")
    [batch] = judge_env.batches.values()
    judge_env.archive(batch.id)  # ended, archived: results_url null
    result, out = run(repo, "--json")
    # not a traceback (the SDK's AnthropicError)
    assert result.exit_code == 0, result.output
    assert [b["status"] for b in out["batches"]] == ["lost"]
    alias = out["passes"]["alias"]
    # asked again, one by one
    assert alias["judged"] >= 3 and alias["applied"] == 1 and judge_env.calls >= 6
    assert db(repo)["batches"].get(batch.id)["status"] == "lost"
