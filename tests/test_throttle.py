"""The outcome-funded throttle, session after session, against the real SDK and the loopback server."""

from __future__ import annotations

import dataclasses
import json

from helpers import SAME, TOPICS, fact_text, motif_repo, session
from judges import asked
from messages_server import status, text

from knomit_judge.config import load_config
from knomit_judge.history import status as get_status
from knomit_judge.rebuild import rebuild
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store


def throttle_rows(repo):
    store = Store.for_corpus(repo.root)
    try:
        return list(reversed(store.throttle_rows("alias")))  # oldest first
    finally:
        store.close()


def test_declining_judge_walks_to_defunded_then_spends_one_probe_per_probe_every(tmp_path, judge_env):
    # the opening balance of 2 questions is spent in the first session; nothing resolved deposits more
    repo = motif_repo(tmp_path, "optimistic_cap = 2\nprobe_every = 3\n")
    calls, tails, lines = [], [], []
    for n in range(1, 8):
        # the first probe: it must offer the best-ranked waiting candidate (nothing changed: no fresh one)
        if n == 4:
            unthrottled = load_config(repo.root)
            unthrottled.budget = dataclasses.replace(unthrottled.budget, enabled=False)
            everything = review(repo.root, ReviewOptions(dry_run=True, passes=("alias",)), config=unthrottled)
            best = everything.plan["alias"][0]
            assert best["score"] == max(item["score"] for item in everything.plan["alias"])
            dry = review(repo.root, ReviewOptions(dry_run=True, passes=("alias",)))
            assert [item["subject"] for item in dry.plan["alias"]] == [best["subject"]]
        result, spent = session(repo, judge_env)
        if n == 4:
            assert asked(judge_env.requests[-1], best["subject"])
        alias = result.passes["alias"]
        calls.append(spent)
        tails.append(alias.throttle)
        lines.append(alias.line())
        assert alias.judged == alias.declined == spent and alias.resolved == 0
    assert calls == [2, 0, 0, 1, 0, 0, 1]
    assert tails == ["optimistic"] + ["defunded", "defunded", "defunded (probe)"] * 2
    assert lines[1].startswith("alias: defunded (next probe in 2 sessions) - ")
    assert lines[2].startswith("alias: defunded (next probe in 1 session) - ")
    assert lines[3].startswith("alias: worked - ") and "judged 1" in lines[3]
    rows = throttle_rows(repo)
    assert [(r["state"], r["probe_due"], r["probe_spent"]) for r in rows[1:]] == [
        ("defunded", 0, 0),
        ("defunded", 0, 0),
        ("defunded", 1, 1),
    ] * 2


def test_probe_with_no_candidate_is_not_counted_and_is_retried(tmp_path, judge_env):
    # 3 motifs: 3 candidate pairs, none at or below alias's floor (cache-masks-slowness / retry-storm is: 0.136)
    repo = motif_repo(tmp_path, "optimistic_cap = 3\nprobe_every = 2\n", topics=[TOPICS[0], TOPICS[2], TOPICS[3]])
    result, spent = session(repo, judge_env)
    assert spent == 3 and result.passes["alias"].throttle == "optimistic"
    # defunded, not due; nothing waits anyway
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].state == "caught-up"
    # the probe is due but finds no candidate
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].throttle == "defunded (probe)"
    assert (throttle_rows(repo)[-1]["probe_due"], throttle_rows(repo)[-1]["probe_spent"]) == (1, 0)

    repo.fact("facts/t/new.md", TOPICS[5][0], motifs=[TOPICS[5][1]], body="New evidence.")
    repo.commit("a new motif")
    # retried: the probe is still due, and now has a candidate
    result, spent = session(repo, judge_env)
    assert spent == 1 and result.passes["alias"].throttle == "defunded (probe)"
    assert result.passes["alias"].offered == 1 and result.passes["alias"].judged == 1
    # spent: the interval starts again
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].line().startswith("alias: defunded (next probe in 1 session)")


def test_unavailable_probe_is_not_counted_and_is_retried(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\nprobe_every = 2\n", n=6)
    assert session(repo, judge_env)[1] == 2
    assert session(repo, judge_env)[1] == 0
    # the probe's session: the API is down
    judge_env.responder = lambda request, n: status(500)
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    assert spent == 1 and alias.throttle == "defunded (probe)"
    assert alias.state == "broken" and alias.unavailable == 1 and alias.judged == 0 and result.broken
    assert throttle_rows(repo)[-1]["probe_spent"] == 0

    judge_env.responder = lambda request, n: text('{"same": false, "mechanism": ""}')
    result, spent = session(repo, judge_env)  # retried next session
    assert spent == 1 and result.passes["alias"].throttle == "defunded (probe)"
    assert result.passes["alias"].judged == 1 and throttle_rows(repo)[-1]["probe_spent"] == 1
    assert session(repo, judge_env)[1] == 0
    assert session(repo, judge_env)[1] == 1


def test_resolving_probe_refunds_the_pass(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\nprobe_every = 2\nquestions_per_resolution = 3\n")
    assert session(repo, judge_env)[1] == 2
    assert session(repo, judge_env)[1] == 0
    # the probe: yes; every later question: no
    judge_env.script([text(json.dumps(SAME))])
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    # the probe's resolution deposits 3 at once (less the probe itself): the session asks on, 2 more questions
    assert spent == 3 and alias.throttle == "defunded (probe)" and alias.resolved == alias.applied == 1
    assert any(s.startswith("alias: merge motif ") for s in repo.log())
    # 3 deposited, 3 asked: back at 0. The balance is derived from the verdicts, so valuing a resolution
    # higher re-values the one already bought: 30 - 1 - 2 = 27 questions, funded
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "defunded"
    repo.write(
        "knomit-judge.toml",
        repo.read("knomit-judge.toml").replace("questions_per_resolution = 3", "questions_per_resolution = 30"),
    )
    repo.commit("a resolution is worth more")

    judge_env.responder = lambda request, n: text('{"same": false, "mechanism": ""}')
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == 27
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "funded"
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    assert alias.throttle == "funded"
    waiting = alias.candidates - alias.cached
    # the balance covers every waiting candidate
    assert 2 < waiting <= 27 and alias.offered == waiting == spent


def test_exact_duplicates_are_retracted_while_defunded(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\nprobe_every = 3\n")
    assert session(repo, judge_env)[1] == 2
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].line().startswith("alias: defunded (next probe in 2 sessions)")

    dup = fact_text(
        "Retries multiply load during an outage",
        ["retry-storm"],
        sources=["s9"],
        body="Retries multiply load during an outage. Seen in more than one system.",
    )
    repo.write("facts/t/copy.md", dup)
    repo.commit("a copy")
    result, spent = session(repo, judge_env)
    exact = result.passes["exact"]
    assert exact.state == "worked" and exact.applied == 1
    assert spent == 0 and result.passes["alias"].line().startswith("alias: defunded (next probe in 1 session)")
    assert any(s.startswith("exact: retract 1 exact duplicate(s) of ") for s in repo.log())
    retired = [p for p in ("facts/t/f2.md", "facts/t/copy.md") if "status: retracted" in repo.read(p)]
    assert len(retired) == 1


def test_disabled_budget_is_unthrottled_and_offers_everything(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "enabled = false\noptimistic_cap = 2\n")
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    assert alias.line().endswith("[unthrottled]")
    assert alias.candidates > 2 and alias.offered == alias.candidates == spent and alias.waiting == 0
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "unthrottled"
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].state == "caught-up"
    assert {r["state"] for r in throttle_rows(repo)} == {"unthrottled"}


def test_defunded_survives_losing_the_database(tmp_path, judge_env):
    """The state comes from the verdicts, which come back from the journal in git: no reset to optimistic."""
    repo = motif_repo(tmp_path, "optimistic_cap = 3\nprobe_every = 4\n")
    assert session(repo, judge_env)[1] == 3
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "defunded"
    (repo.root / ".knomit" / "judge.db").unlink()
    rebuild(repo.root)
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "defunded"
    assert session(repo, judge_env)[1] == 0
