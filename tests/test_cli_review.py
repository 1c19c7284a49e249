"""The end-to-end slice: corpus -> alias judge (real SDK, loopback server) -> verdicts -> commits -> status."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner
from helpers import SAME, bought_digest, derived_rows, fact_text, git
from judges import DIFFERENT, PAIR, alias_responder
from messages_server import status, text

from knomit_judge.cli import cli
from knomit_judge.gitops import Lock, open_repo
from knomit_judge.session.review import ReviewOptions, review


def run(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def review_json(root, *extra):
    result = run("-q", "review", str(root), "--pass", "alias", "--json", *extra)
    return result, json.loads(result.stdout) if result.stdout.strip().startswith("{") else None


def test_alias_merge_commits_with_trailers_and_second_run_is_free(corpus_repo, judge_env):
    judge_env.responder = alias_responder()
    result, out = review_json(corpus_repo.root)
    assert result.exit_code == 0, result.output
    alias = out["passes"]["alias"]
    assert alias["state"] == "worked" and alias["resolved"] == 1 and alias["applied"] == 1
    assert alias["judge_calls"] == judge_env.calls > 0
    # the survivor has more carriers; the loser spelling is gone from its carrier
    assert "motifs: [penalty-blocks-own-recovery]" in corpus_repo.read("facts/ops/f3.md")
    subjects = corpus_repo.log()
    assert "alias: merge motif 'self-locking-penalty' into 'penalty-blocks-own-recovery'" in subjects
    body = git(corpus_repo.root, "log", "--grep=Knomit-Pass: alias", "-1", "--format=%B")
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=body, capture_output=True, text=True, check=True
    ).stdout
    trailers = dict(line.split(": ", 1) for line in parsed.splitlines())
    assert trailers["Knomit-Pass"] == "alias"
    assert trailers["Knomit-Verdict"].startswith("v")
    assert trailers["Knomit-Judge"] == "claude-sonnet-5-5 / alias@2"
    assert trailers["Knomit-Rationale"] == SAME["mechanism"]
    assert corpus_repo.status() == ""

    calls = judge_env.calls
    result, out = review_json(corpus_repo.root)
    assert out["passes"]["alias"]["state"] == "caught-up"
    assert out["passes"]["alias"]["judge_calls"] == 0
    assert judge_env.calls == calls


def test_a_case_only_tie_keeps_the_lower_case_spelling(tmp_path, judge_env):
    """Issue 54: `merge motif 'running' into 'Running'`: with one carrier each at one confidence, the last rule,
    the lexicographically smaller, kept the capital (ASCII sorts it first). The lower-case form survives."""
    from helpers import make_repo

    repo = make_repo(
        tmp_path / "corpus",
        {
            "facts/a.md": fact_text("Long runs build the aerobic base", ["Running"], body="Slow miles, every week."),
            "facts/b.md": fact_text(
                "Intervals raise the lactate threshold", ["running"], body="Hard repeats, then rest."
            ),
        },
    )
    spelled = ("Running", "running")
    judge_env.responder = lambda request, n: text(
        json.dumps(SAME if all(f'"spelling": "{m}"' in request.prompt for m in spelled) else DIFFERENT)
    )
    result, out = review_json(repo.root)
    assert result.exit_code == 0 and out["passes"]["alias"]["applied"] == 1, result.output
    assert "alias: merge motif 'Running' into 'running'" in repo.log()
    assert "motifs: [running]" in repo.read("facts/a.md") and "Running" not in repo.read("facts/a.md")


def test_editing_one_carrier_reasks_only_its_motifs_pairs(corpus_repo, judge_env):
    review_json(corpus_repo.root)
    first = {r.prompt for r in judge_env.requests}
    before = judge_env.calls
    corpus_repo.write(
        "facts/ops/f4.md",
        fact_text(
            "Queue growth amplifies latency under heavy load", ["queue-amplifies-latency"], 0.8, ["s4"], "Edited body."
        ),
    )
    corpus_repo.commit()
    review_json(corpus_repo.root)
    asked = judge_env.requests[before:]
    assert asked, "an edited carrier must make its pairs askable again"
    for r in asked:
        assert '"spelling": "queue-amplifies-latency"' in r.prompt
        assert r.prompt not in first


def test_same_without_mechanism_is_recorded_as_different_and_not_applied(corpus_repo, judge_env):
    judge_env.responder = alias_responder(same={"same": True, "mechanism": "  "})
    result, out = review_json(corpus_repo.root)
    alias = out["passes"]["alias"]
    assert alias["resolved"] == 0 and alias["applied"] == 0 and alias["declined"] == alias["judged"] > 0
    assert "self-locking-penalty" in corpus_repo.read("facts/ops/f3.md")
    listed = json.loads(run("verdicts", str(corpus_repo.root), "--pass", "alias", "--json").stdout)["verdicts"]
    planted = [v for v in listed if {v["subject"]["a"], v["subject"]["b"]} == set(PAIR)]
    assert planted[0]["answer"] == "different" and "without a mechanism" in planted[0]["rationale"]


def test_unparsed_replies_are_not_verdicts_and_make_the_pass_broken(corpus_repo, judge_env):
    judge_env.responder = lambda request, n: text("I think they are the same.")
    result, out = review_json(corpus_repo.root)
    alias = out["passes"]["alias"]
    assert result.exit_code == 1
    assert alias["state"] == "broken" and alias["judged"] == 0 and alias["unparsed"] == alias["offered"] > 0
    assert json.loads(run("verdicts", str(corpus_repo.root), "--json").stdout)["verdicts"] == []
    # nothing was answered, so the next session asks again
    calls = judge_env.calls
    judge_env.responder = alias_responder()
    result, out = review_json(corpus_repo.root)
    assert judge_env.calls > calls and out["passes"]["alias"]["resolved"] == 1


def test_api_500_is_unavailable_and_broken(fast_retry, judge_env):
    judge_env.responder = lambda request, n: status(500)
    result, out = review_json(fast_retry.root)
    alias = out["passes"]["alias"]
    assert result.exit_code == 1
    assert alias["state"] == "broken" and alias["unavailable"] == alias["offered"] > 0 and alias["judged"] == 0
    line = run("-q", "review", str(fast_retry.root), "--pass", "alias").stdout
    assert "alias: broken" in line and "first error: unavailable: HTTP 500" in line


def test_dry_run_writes_no_bought_state_only_derived_caches(corpus_repo, judge_env):
    # a db and history to protect
    review_json(corpus_repo.root)
    corpus_repo.write("facts/ops/f5.md", fact_text("A latch holds a breaker open", ["latch"]))
    corpus_repo.commit()
    before, head, calls = bought_digest(corpus_repo.root), corpus_repo.log("%H"), judge_env.calls
    cached = derived_rows(corpus_repo.root)
    result = run("-q", "review", str(corpus_repo.root), "--dry-run", "--evidence")
    assert result.exit_code == 0
    assert "would offer alias" in result.stdout and "evidence:" in result.stdout
    # corpus, git, journal, verdicts, replies, sessions, throttle: not a byte; the new fact's vector is kept
    assert bought_digest(corpus_repo.root) == before
    assert derived_rows(corpus_repo.root)["embeddings"] > cached["embeddings"]
    assert corpus_repo.log("%H") == head and corpus_repo.status() == ""
    assert judge_env.calls == calls


def test_a_second_dry_run_reuses_what_the_first_derived(corpus_repo):
    """Embeddings, neighbour and candidate lists are derived state: a dry run keeps them, the next reads them."""
    before = bought_digest(corpus_repo.root)
    first = review(corpus_repo.root, ReviewOptions(dry_run=True))
    second = review(corpus_repo.root, ReviewOptions(dry_run=True))
    # not one text embedded again
    assert first.embedded > 0 and second.embedded == 0
    assert all(n > 0 for n in derived_rows(corpus_repo.root).values())
    # the same plan, read back
    assert second.plan == first.plan and second.estimates == first.estimates
    assert bought_digest(corpus_repo.root) == before and corpus_repo.status() == ""


def test_a_dry_run_beside_a_running_session_keeps_nothing_and_still_plans(corpus_repo):
    # a session holds the corpus: the db is its to write
    with Lock(open_repo(corpus_repo.root)):
        result = review(corpus_repo.root, ReviewOptions(dry_run=True))
    assert result.embedded > 0 and result.plan
    assert derived_rows(corpus_repo.root) == {"embeddings": 0, "neighbour_sets": 0, "candidate_lists": 0}


def test_malformed_fact_is_named_and_the_rest_reviewed(corpus_repo, judge_env):
    judge_env.responder = alias_responder()
    corpus_repo.write("facts/bad/yaml.md", "---\ntitle: [unclosed\n---\nbody\n")
    # no title key or heading is a title from the file name (issue 50); an empty heading is still refused
    corpus_repo.write("facts/bad/notitle.md", "---\nmotifs: [x]\n---\n# \nbody\n")
    corpus_repo.write("facts/bad/latin1.md", "---\ntitle: caf\xe9\n---\n".encode("latin-1"))
    corpus_repo.write("facts/bad/binary.md", b"\x00\x01\x02")
    corpus_repo.commit()
    result = CliRunner().invoke(cli, ["review", str(corpus_repo.root), "--pass", "alias", "--json"])
    out = json.loads(result.stdout)
    problems = {p["path"]: p["reason"] for p in out["problems"]}
    assert set(problems) == {"facts/bad/yaml.md", "facts/bad/notitle.md", "facts/bad/latin1.md", "facts/bad/binary.md"}
    assert "YAML" in problems["facts/bad/yaml.md"] and "title" in problems["facts/bad/notitle.md"]
    assert "UTF-8" in problems["facts/bad/latin1.md"] and "binary" in problems["facts/bad/binary.md"]
    assert "facts/bad/yaml.md:2" in result.stderr
    assert out["passes"]["alias"]["resolved"] == 1


def test_second_session_exits_3_naming_the_holder(corpus_repo, judge_env):
    import fcntl
    import os

    lock = corpus_repo.root / ".git" / "knomit-judge.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    os.write(fd, b"pid 4242 on elsewhere")
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = run("review", str(corpus_repo.root))
        assert result.exit_code == 3
        assert "pid 4242 on elsewhere" in result.stderr
    finally:
        os.close(fd)
    assert judge_env.calls == 0


def test_dirty_tree_judges_and_stores_but_applies_nothing(corpus_repo, judge_env):
    judge_env.responder = alias_responder()
    # an unstaged edit to the settings the facts are read by, as to a fact, holds every decision (an edit to a
    # file that is no fact, or an untracked file outside the facts, would not: docs/corpus.md)
    corpus_repo.write("knomit-judge.toml", corpus_repo.read("knomit-judge.toml") + "# being edited\n")
    result, out = review_json(corpus_repo.root)
    assert out["passes"]["alias"]["resolved"] == 1 and out["passes"]["alias"]["applied"] == 0
    assert any("uncommitted" in n for n in out["notes"])
    assert "self-locking-penalty" in corpus_repo.read("facts/ops/f3.md")
    # once clean, the stored yes is applied without asking again
    git(corpus_repo.root, "checkout", "--", "knomit-judge.toml")
    calls = judge_env.calls
    result, out = review_json(corpus_repo.root)
    assert out["passes"]["alias"]["applied"] == 1
    assert "motifs: [penalty-blocks-own-recovery]" in corpus_repo.read("facts/ops/f3.md")
    assert judge_env.calls - calls == out["passes"]["alias"]["judge_calls"]


def test_usage_errors_exit_2(corpus_repo, tmp_path):
    assert run("review", str(corpus_repo.root), "--judge", "bogus").exit_code == 2
    assert run("review", str(tmp_path / "nowhere")).exit_code == 2
    plain = tmp_path / "plain"
    plain.mkdir()
    result = run("review", str(plain))
    assert result.exit_code == 2 and "not a git repository" in result.stderr
