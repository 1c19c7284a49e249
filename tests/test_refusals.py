"""A question the API refuses for its content is that question's problem, never the session's; and the
evidence budget keeps a long fact from making any prompt too long.

Real sessions through the real SDK to the loopback server, which refuses bodies over `max_body`.
"""

from __future__ import annotations

import json

import pytest
import sqlite_utils
from click.testing import CliRunner
from helpers import fact_text, make_repo, write_config
from messages_server import status, text

from knomit_judge.cli import cli

DISTINCT = json.dumps({"decision": "distinct", "rationale": "Two different claims."})
# characters: under corpus.max_fact_bytes, far over what the server takes in one request
HUGE = 300_000
FACTS = {
    "facts/a.md": fact_text(
        "Queue growth amplifies latency under load", ["queue"], body="Longer queues, longer waits."
    ),
    "facts/b.md": fact_text("Long queues make requests wait longer", ["queue"], body="Waiting grows with the queue."),
    "facts/c.md": fact_text("Retry storms overload a recovering backend", ["retry"], body="Retries pile up."),
    "facts/huge.md": fact_text(
        "A postmortem with the whole incident log pasted in",
        ["log"],
        body="The log follows.\n" + "2026-10-02 12:00:00 request timed out\n" * (HUGE // 38),
    ),
}


@pytest.fixture
def huge_repo(tmp_path, judge_env):
    repo = make_repo(tmp_path / "huge", FACTS)
    judge_env.max_body = 100_000
    judge_env.responder = lambda req, n: text(DISTINCT)
    return repo


def configure(repo, **judge):
    values = {"backoff_s": 0.0, "timeout_s": 20, "position_swap": False, **judge}
    write_config(
        repo,
        "[judge]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()) + "\n[budget]\nenabled = false\n",
    )


def review_json(repo, *extra):
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--json", *extra])
    return result, (json.loads(result.stdout) if result.stdout.startswith("{") else None)


def test_a_huge_fact_is_refused_alone_and_not_asked_again(huge_repo, judge_env):
    # no cut: the huge body reaches the API whole
    configure(huge_repo, max_evidence_chars=1_000_000)
    result, out = review_json(huge_repo)
    assert result.exit_code == 0, result.output
    prune = out["passes"]["prune"]
    huge_questions = [r for r in judge_env.requests if len(json.dumps(r.body)) > judge_env.max_body]
    assert len(huge_questions) == prune["refused"] >= 1
    # every other question was judged
    assert prune["judged"] == prune["offered"] - prune["refused"] >= 1
    # a refusal is not retried
    assert prune["state"] == "worked" and prune["attempts"] == judge_env.calls
    assert prune["first_error"].startswith("refused: HTTP 400 invalid_request_error: prompt is too long")
    assert "check ANTHROPIC_API_KEY" not in result.output
    db = sqlite_utils.Database(huge_repo.root / ".knomit" / "judge.db")
    assert db["refusals"].count == prune["refused"]
    assert all("facts/huge.md" in json.loads(r["subject"]).values() for r in db["refusals"].rows)
    assert "facts/huge.md" not in {p for v in db["verdicts"].rows for p in json.loads(v["subject"]).values()}

    calls = judge_env.calls
    again, out2 = review_json(huge_repo)
    # the next session does not ask it again
    assert again.exit_code == 0 and judge_env.calls == calls
    prune2 = out2["passes"]["prune"]
    assert (prune2["state"], prune2["offered"], prune2["refused"]) == ("caught-up", 0, 0)
    assert prune2["cached"] == prune2["candidates"]  # answered, or refused earlier
    assert any(
        n.startswith(f"{prune['refused']} question(s) refused by the API in an earlier session")
        for n in prune2["notes"]
    )
    [text_line] = [
        x
        for x in CliRunner().invoke(cli, ["-q", "review", str(huge_repo.root), "--pass", "prune"]).stdout.splitlines()
        if x.startswith("prune:")
    ]
    assert ", refused 0, " in text_line and "refused by the API in an earlier session" in text_line


def test_a_refusal_under_another_prompt_version_does_not_hold_the_question(huge_repo, judge_env):
    configure(huge_repo, max_evidence_chars=1_000_000)
    first = review_json(huge_repo)[1]["passes"]["prune"]["refused"]
    db = sqlite_utils.Database(huge_repo.root / ".knomit" / "judge.db")
    # as if the prompt changed since
    db.execute("UPDATE refusals SET prompt = 'prune@0'").connection.commit()
    calls = judge_env.calls
    out = review_json(huge_repo)[1]["passes"]["prune"]
    assert out["refused"] == first and judge_env.calls - calls == first  # asked again, refused again


def test_the_evidence_budget_cuts_a_long_body_visibly_and_nothing_is_refused(huge_repo, judge_env):
    configure(huge_repo, max_evidence_chars=2000)
    result, out = review_json(huge_repo)
    assert result.exit_code == 0, result.output
    prune = out["passes"]["prune"]
    assert prune["refused"] == 0 and prune["judged"] == prune["offered"] >= 3
    cut = [r for r in judge_env.requests if "characters not shown]" in r.prompt]
    assert cut and all(len(json.dumps(r.body)) < 10_000 for r in judge_env.requests)
    body = FACTS["facts/huge.md"].split("---\n", 2)[2].rstrip("\n")
    shown = json.loads(cut[0].prompt.split("<evidence>\n", 1)[1].split("\n</evidence>", 1)[0])
    fact = next(f for f in shown.values() if f["title"].startswith("A postmortem"))
    kept, marker = fact["body"].rsplit("\n", 1)
    assert len(fact["body"]) <= 2000 and body.startswith(kept)
    assert marker == f"[… {len(body) - len(kept)} characters not shown]"


@pytest.mark.parametrize("code", [400, 413, 422])
def test_content_4xx_is_refused_and_the_session_goes_on(tmp_path, judge_env, code):
    repo = make_repo(tmp_path / "c", {k: v for k, v in FACTS.items() if k != "facts/huge.md"})
    configure(repo)
    judge_env.script([status(code, message="request rejected")])
    judge_env.responder = lambda req, n: text(DISTINCT)
    result, out = review_json(repo)
    assert result.exit_code == 0, result.output
    prune = out["passes"]["prune"]
    assert prune["refused"] == 1 and prune["judged"] == prune["offered"] - 1 >= 1


def test_403_still_stops_the_session_with_exit_2(tmp_path, judge_env):
    repo = make_repo(tmp_path / "c", {k: v for k, v in FACTS.items() if k != "facts/huge.md"})
    configure(repo, concurrency=1)
    judge_env.responder = lambda req, n: status(403, message="no permission")
    result, _ = review_json(repo)
    assert result.exit_code == 2 and "HTTP 403" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr


def test_discovery_evidence_is_cut_the_same_way(tmp_path):
    from knomit_judge.corpus import load_corpus
    from knomit_judge.passes.discovery import DiscoveryPass

    repo = make_repo(tmp_path / "d", FACTS)
    corpus = load_corpus(repo.root, 1_048_576)
    members = [corpus.facts[p] for p in ("facts/a.md", "facts/b.md", "facts/huge.md")]
    [evidence] = DiscoveryPass().candidate(members, max_chars=2000).orders
    huge = evidence["facts"][2]["body"]
    assert len(huge) <= 2000 and huge.endswith("characters not shown]")
    assert [f["body"] for f in evidence["facts"][:2]] == [m.body for m in members[:2]]  # short bodies untouched
