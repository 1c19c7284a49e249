"""Exact duplicates: retracted mechanically, one commit per group, with no judge call, whatever the budget."""

from __future__ import annotations

import json
import socket

from click.testing import CliRunner
from helpers import BODY, FAST, TITLE, assert_four_trailers, duplicates_corpus, fact_text, git, make_repo, write_config
from judges import responder
from messages_server import status

from knomit_judge.cli import cli
from knomit_judge.corpus import load_corpus, parse_fact
from knomit_judge.session.review import ReviewOptions, review


def closed_port_url() -> str:
    """An address where nothing listens: every judge call would be refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_exact_duplicates_retracted_with_no_judge_even_when_unreachable(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", closed_port_url())
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-FAKEKEY-0123456789")
    repo = duplicates_corpus(tmp_path)
    write_config(repo, FAST)

    result = review(repo.root, ReviewOptions())

    exact = result.passes["exact"]
    assert exact.state == "worked" and exact.candidates == 2 and exact.applied == 2 and exact.judge_calls == 0
    commits = assert_four_trailers(repo.root, "exact")  # one commit per group
    assert len(commits) == 2 and {t["Knomit-Judge"] for t in commits} == {"mechanical / exact@1"}
    facts = load_corpus(repo.root).facts
    # the original survives, whatever a copy's confidence: all were added in one commit, so the path order decides
    assert facts["facts/retry/waves-again.md"].active and facts["facts/cache/url-dup.md"].active
    for lost, kept in [
        ("facts/retry/waves.md", "facts/retry/waves-again.md"),
        ("facts/retry/waves-copy.md", "facts/retry/waves-again.md"),
        ("facts/cache/url.md", "facts/cache/url-dup.md"),
    ]:
        assert facts[lost].status == "retracted" and f"survivor: {kept}" in repo.read(lost)
    assert b"\r\nsources:" in (repo.root / "facts/retry/waves-again.md").read_bytes()  # CRLF kept on rewrite
    # retracted, not merged: the survivor takes in the sources it lacks (none is left only in git history)
    assert facts["facts/retry/waves-again.md"].sources == ("r3", "r4", "r2", "r1")
    assert facts["facts/retry/waves-again.md"].motifs == ("retry-sync",)
    bodies = git(repo.root, "log", "--grep=^Knomit-Pass: exact$", "--format=%b")
    assert "survives as the\noriginal (the fact git first saw), and a copy adds no evidence" in bodies
    assert "- facts/retry/waves.md: the path order (added in one commit)" in bodies
    assert "- facts/cache/url.md: the path order (added in one commit)" in bodies
    assert (
        "Carried over into facts/retry/waves-again.md:\n- from facts/retry/waves-copy.md: sources: + r2\n"
        "- from facts/retry/waves.md: sources: + r1\n" in bodies
    )
    # unknown keys kept in the loser
    assert "owner: web-team\n" in repo.read("facts/cache/url.md")
    assert parse_fact("l", repo.read("facts/notes/linker.md")).links == (
        "facts/retry/waves-again.md",
        "facts/cache/url-dup.md",
    )
    # the judged passes still tried, and say so; the mechanical pass did not wait for them
    assert result.broken and result.passes["prune"].unavailable > 0

    again = review(repo.root, ReviewOptions())
    assert again.passes["exact"].state == "nothing-qualified"
    assert len(git(repo.root, "log", "--grep=^Knomit-Pass: exact$", "--format=%H").split()) == 2


def test_exact_runs_while_prune_is_defunded_and_judge_returns_500(tmp_path, judge_env):
    repo = make_repo(
        tmp_path / "corpus",
        {
            "facts/a.md": fact_text(TITLE, ["retry-sync"], 0.5, ["r1"], BODY),
            # three claims about retries: distinct, but close enough that the prior asks their pairs (Pass.prior)
            "facts/b.md": fact_text(
                "Exponential backoff alone still lets retrying clients collide",
                ["backoff"],
                0.6,
                ["c1"],
                "Backoff without jitter keeps clients in step, so their retries collide.",
            ),
            "facts/c.md": fact_text(
                "A retry storm after an outage keeps the server from recovering",
                ["retry-storm"],
                0.5,
                ["y"],
                "Clients retrying at once after an outage overload the recovering server.",
            ),
        },
    )
    # an opening balance of 2 for 3 questions: the first session spends it, one question waits
    write_config(repo, FAST + "\n[budget]\noptimistic_cap = 2\nprobe_every = 5\n")
    # every pair is distinct: verdicts, none resolved
    judge_env.responder = responder()
    first = review(repo.root, ReviewOptions(passes=("prune",)))
    assert first.passes["prune"].declined > 0 and first.passes["prune"].resolved == 0

    # only an exact copy: a new distinct fact would be a fresh question, which a defunded pass probes
    repo.write("facts/z-copy.md", fact_text(TITLE, ["retry-sync"], 0.5, ["r1"], BODY))
    repo.commit("a duplicate")
    judge_env.responder = lambda request, n: status(500)
    calls = judge_env.calls

    second = review(repo.root, ReviewOptions(passes=("prune",)))

    assert second.passes["prune"].state == "defunded", second.text_lines()
    assert second.passes["exact"].applied == 1 and judge_env.calls == calls
    [t] = assert_four_trailers(repo.root, "exact")
    assert t["Knomit-Rationale"] == "same normalised title and body"
    assert "survivor: facts/a.md" in repo.read("facts/z-copy.md")  # the older path survives
    assert not second.broken


def test_a_dry_run_names_the_exact_duplicates_the_session_then_retracts(tmp_path, judge_env):
    repo = duplicates_corpus(tmp_path)
    write_config(repo, FAST)
    r = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--dry-run", "--json"])
    dry = json.loads(r.stdout)
    assert dry["passes"]["exact"]["state"] == "would-offer" and dry["passes"]["exact"]["offered"] == 2
    plan = {tuple(i["evidence"]["retract"]): i["evidence"]["survivor"] for i in dry["plan"]["exact"]}
    assert plan == {
        ("facts/retry/waves-copy.md", "facts/retry/waves.md"): "facts/retry/waves-again.md",
        ("facts/cache/url.md",): "facts/cache/url-dup.md",
    }
    out = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--dry-run"]).stdout
    assert "retract 3 exact duplicate(s) in 2 group(s) without a call" in out.splitlines()[0]
    assert "would retract exact facts/cache/url.md, keeping facts/cache/url-dup.md" in out
    assert "exact: would-offer" in out and "exact: caught-up" not in out

    real = json.loads(CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--json"]).stdout)
    assert real["passes"]["exact"]["state"] == "worked" and real["passes"]["exact"]["applied"] == 2
    facts = load_corpus(repo.root).facts
    assert {p for p, f in facts.items() if not f.active} == {p for retract in plan for p in retract}
    # and once they are retracted, the dry run says there is nothing to do
    again = json.loads(
        CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--dry-run", "--json"]).stdout
    )
    assert again["passes"]["exact"]["state"] == "nothing-qualified" and "exact" not in again["plan"]


def test_of_two_exact_duplicates_the_one_git_saw_first_survives_and_a_copy_adds_no_sources(tmp_path, judge_env):
    # the original sorts after its copy and has the lower confidence: neither the path nor the fixed rules of a
    # merge may choose the copy; its `sources` count (2, as knomit writes it) must not become 4
    original = fact_text(TITLE, ["retry-sync"], 0.5, ["r1"], BODY).replace('sources: ["r1"]', "sources: 2")
    repo = make_repo(
        tmp_path / "corpus",
        {
            "facts/perf/waves.md": original,
            "facts/other.md": fact_text("Sourdough rises in a warm kitchen", ["yeast"], 0.5, ["y"], "Warm yeast."),
        },
    )
    assert "sources: 2" in original
    repo.write("facts/perf/a-waves-copy.md", original.replace("confidence: 0.5", "confidence: 0.9"))
    repo.commit("a copy, added later")
    write_config(repo, FAST)
    judge_env.responder = responder()

    dry = json.loads(CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--dry-run", "--json"]).stdout)
    [plan] = dry["plan"]["exact"]
    assert plan["evidence"]["survivor"] == "facts/perf/waves.md"
    assert plan["evidence"]["retract"] == ["facts/perf/a-waves-copy.md"]
    # the judged passes are planned without the copy the exact pass retracts first
    planned = json.dumps(dry["plan"].get("prune", [])) + json.dumps(dry["plan"].get("discovery", []))
    assert "a-waves-copy" not in planned
    assert dry["passes"]["prune"]["offered"] <= dry["passes"]["prune"]["candidates"]

    result = review(repo.root, ReviewOptions())

    assert result.passes["exact"].applied == 1
    facts = load_corpus(repo.root).facts
    assert facts["facts/perf/waves.md"].active and facts["facts/perf/a-waves-copy.md"].status == "retracted"
    # its sources unchanged: not a byte rewritten
    assert repo.read("facts/perf/waves.md") == original
    body = git(repo.root, "log", "--grep=^Knomit-Pass: exact$", "--format=%B")
    assert "exact: retract 1 exact duplicate(s) of facts/perf/waves.md" in body
    assert "- facts/perf/a-waves-copy.md: git saw it first" in body and "Carried over" not in body
