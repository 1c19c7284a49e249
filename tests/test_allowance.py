"""Funding as an amount: a balance of questions derived from the verdicts, moved live, fresh questions first.

Real store, real git, the real SDK against the loopback Messages server (one order per question:
position_swap off, so judge calls count questions).
"""

from __future__ import annotations

import dataclasses
import json
import signal

import pytest
from helpers import SAME, TOPICS, fact_text, make_repo, motif_repo, session, write_config
from judges import asked
from messages_server import text
from processes import signal_after, slow_then_held, start

from knomit_judge.config import load_config
from knomit_judge.history import status as get_status
from knomit_judge.rebuild import rebuild
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store
from knomit_judge.throttle import Terms, assess, balance
from knomit_judge.verdicts import Verdict

NO = json.dumps({"same": False, "mechanism": ""})
SERIAL = "[judge]\nbackoff_s = 0.0\ntimeout_s = 20\nmax_attempts = 1\nposition_swap = false\nconcurrency = 1\n"


# slow: sessions replayed until the balance runs out, and a session subprocess killed mid-pass
pytestmark = pytest.mark.slow


def add(store, answers: str, session: str = "s1") -> None:
    """Store one verdict per letter, oldest first: y resolved something, n did not."""
    for a in answers:
        n = store.count_verdicts("alias")
        store.add_verdict(
            Verdict(
                "alias",
                f"fp{n}",
                {"a": "x", "b": str(n)},
                "same" if a == "y" else "different",
                a == "y",
                "",
                "m",
                "alias@2",
                session=session,
                created_at=f"2026-01-01T00:00:{n:02d}.000+00:00",
            )
        )


def test_balance_opens_at_the_cap_withdraws_per_question_deposits_per_resolution_and_never_goes_below_zero(db_path):
    store = Store(db_path)
    # a judge with no price: the balance counts questions
    cfg = Terms.questions(3, 4)
    b = balance(store, "alias", cfg)
    assert (b.questions, b.resolved, b.balance) == (0, 0, 3) and assess(store, "alias", cfg).state == "optimistic"
    add(store, "n")
    assert balance(store, "alias", cfg).balance == 2 and assess(store, "alias", cfg).state == "unproven"
    # 2 - 1 + 4
    add(store, "y")
    assert balance(store, "alias", cfg).balance == 5 and assess(store, "alias", cfg).state == "funded"
    add(store, "nnnnn")
    t = assess(store, "alias", cfg)
    assert balance(store, "alias", cfg).balance == 0 and t.state == "defunded" and t.allowance == 0
    # asked at zero (probes): zero, not below it
    add(store, "nnn")
    assert balance(store, "alias", cfg).balance == 0
    # a probe that resolves: 0 - 1 + 4, not dragged down by the probes before it
    add(store, "y")
    t = assess(store, "alias", cfg)
    assert balance(store, "alias", cfg).balance == 3 and (t.state, t.allowance, t.balance) == ("funded", 3, 3)
    # a reverted yes resolved nothing: its deposit is gone, and so is the last one's lift from zero
    store.mark_reverted(store.verdicts("alias")[-1].id, "wrong")
    assert balance(store, "alias", cfg).balance == 0
    assert (
        "balance 0: 11 asked for 11 questions, 1 resolved x 4 questions, opening 3 questions"
        in assess(store, "alias", cfg).why
    )
    store.close()


def test_a_session_stops_when_its_balance_runs_out_and_a_resolution_deposits_live(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "")
    write_config(repo, SERIAL + "\n[budget]\noptimistic_cap = 3\nquestions_per_resolution = 2\nprobe_every = 9\n")
    # the first question: yes; every later one: no
    judge_env.script([text(json.dumps(SAME))])
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    # 3 opening - 1 + 2 deposited by the first verdict as it came back = 4 more: 5 questions, then it stops
    assert spent == alias.judged == 5 and (alias.resolved, alias.applied) == (1, 1)
    assert alias.waiting > 0 and f"waiting {alias.waiting}," in alias.line() and alias.throttle == "optimistic"
    # the balance stopped it, not the dollar cap
    assert alias.cost_usd < 5.0
    t = get_status(repo.root)["throttle"]["alias"]
    assert (t["state"], t["balance"], t["next_probe_in"]) == ("defunded", 0, 9)
    # the merge rewrote carriers: their new questions are fresh, so the defunded pass probes the best one
    result, spent = session(repo, judge_env)
    assert spent == 1 and result.passes["alias"].throttle == "defunded (probe)"
    # nothing changed since: no probe for 9 sessions
    assert session(repo, judge_env)[1] == 0


def test_the_balance_survives_deleting_every_counter(tmp_path, judge_env):
    """No counter holds it: without the throttle history, or the whole db, the verdicts give the same balance."""
    repo = motif_repo(tmp_path, "", n=4)  # 4 motifs, 6 questions
    write_config(repo, SERIAL + "\n[budget]\noptimistic_cap = 10\nquestions_per_resolution = 5\n")
    judge_env.script([text(json.dumps(SAME))])
    result, spent = session(repo, judge_env)
    alias = result.passes["alias"]
    assert alias.resolved == 1 and alias.waiting == 0 and spent == alias.judged
    expected = 10 + 5 - alias.judged
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == expected > 0
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "funded"

    store = Store.for_corpus(repo.root)
    store.db.execute("DELETE FROM throttle")
    store.db.execute("DELETE FROM sessions")
    store.db.conn.commit()
    store.close()
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == expected
    (repo.root / ".knomit" / "judge.db").unlink()
    rebuild(repo.root)
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == expected
    assert get_status(repo.root)["throttle"]["alias"]["state"] == "funded"
    # caught up: every question answered, nothing asked, the balance kept for what comes next
    result, spent = session(repo, judge_env)
    assert spent == 0 and result.passes["alias"].state == "caught-up"
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == expected


def fresh_motif(repo, name: str = "photosynthesis", title: str = "Plants turn light into sugar") -> None:
    """A writer's new fact, with a spelling unlike the others: by score alone its questions rank low
    (photosynthesis's all at or below alias's floor: hopeless by the prior, asked by nothing but a probe)."""
    repo.fact("facts/t/new.md", title, motifs=[name], body="Unrelated.")
    repo.commit("a writer adds a fact")


def plan(repo, enabled: bool = True) -> list[dict]:
    config = load_config(repo.root)
    config.budget = dataclasses.replace(config.budget, enabled=enabled)
    return review(repo.root, ReviewOptions(dry_run=True, passes=("alias",)), config=config).plan["alias"]


def test_fresh_questions_go_before_the_backlog(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "")
    write_config(repo, SERIAL + "\n[budget]\noptimistic_cap = 10\n")
    assert session(repo, judge_env)[1] == 10
    # a spelling whose best three questions (0.182 to 0.199) rank among the backlog's (0.184, 0.181, ...), above
    # alias's floor: photosynthesis's are all below it, hopeless, and a prior holds them back
    fresh_motif(repo, "password-reuse", "One leaked password opens every account that reuses it")
    # by score alone, the backlog would come first; the new spelling's questions do
    by_score = sorted(plan(repo, enabled=False), key=lambda q: -q["score"])
    assert any("password-reuse" not in (q["subject"]["a"], q["subject"]["b"]) for q in by_score[:3])
    # three more questions (a larger opening cap re-values the balance: 13 - 10)
    write_config(repo, repo.read("knomit-judge.toml").replace("optimistic_cap = 10", "optimistic_cap = 13"))
    offered = plan(repo)
    assert len(offered) == 3 and all("password-reuse" in (q["subject"]["a"], q["subject"]["b"]) for q in offered)
    fresh = [q for q in by_score if "password-reuse" in (q["subject"]["a"], q["subject"]["b"])]
    # by score among the fresh
    assert [q["subject"] for q in offered] == [q["subject"] for q in fresh[:3]]
    before = len(judge_env.requests)
    result, spent = session(repo, judge_env)
    assert spent == 3 and result.passes["alias"].fresh >= 3
    assert all('"spelling": "password-reuse"' in r.prompt for r in judge_env.requests[before:])
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == 0


def test_a_defunded_pass_spends_its_probe_on_the_best_fresh_candidate(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "")
    write_config(repo, SERIAL + "\n[budget]\noptimistic_cap = 4\nprobe_every = 1\n")  # a probe every session
    assert session(repo, judge_env)[1] == 4
    fresh_motif(repo)
    by_score = sorted(plan(repo, enabled=False), key=lambda q: -q["score"])
    assert "photosynthesis" not in (by_score[0]["subject"]["a"], by_score[0]["subject"]["b"])
    best_fresh = next(q for q in by_score if "photosynthesis" in (q["subject"]["a"], q["subject"]["b"]))
    result, spent = session(repo, judge_env)
    assert spent == 1 and result.passes["alias"].throttle == "defunded (probe)"
    assert asked(judge_env.requests[-1], best_fresh["subject"])


def test_an_unchanged_corpus_converges_to_caught_up_or_to_the_probe_alone(tmp_path, judge_env):
    """Each session works the backlog down within its balance; none spends a fresh cap."""
    repo = motif_repo(tmp_path, "")
    write_config(repo, SERIAL + "\n[budget]\noptimistic_cap = 10\nprobe_every = 3\n")
    calls = [session(repo, judge_env)[1] for _ in range(7)]
    # defunded: nothing but its probe
    assert calls == [10, 0, 0, 1, 0, 0, 1]

    rich = motif_repo(tmp_path / "rich", "")
    # a resolution worth 100 questions: every read is worth its price however many no's came before (worth.py)
    write_config(rich, SERIAL + "\n[budget]\noptimistic_cap = 100\nquestions_per_resolution = 100\n")
    results = [session(rich, judge_env) for _ in range(4)]
    first = results[0][0].passes["alias"]
    # every question but the 7 the prior rules out (at or below alias's floor, Pass.prior): they wait for good
    assert results[0][1] == first.candidates - 7 < 100 and first.waiting == 7
    assert [spent for _, spent in results[1:]] == [0, 0, 0]
    # nothing is asked again; the 7 the prior rules out wait, held by the worth rule (not the balance)
    assert {r.passes["alias"].state for r, _ in results[1:]} == {"defunded"}
    assert {r.passes["alias"].waiting for r, _ in results[1:]} == {7}
    assert get_status(rich.root)["throttle"]["alias"]["state"] == "unproven"  # its balance is kept


def test_a_session_killed_mid_pass_with_a_live_balance_is_followed_by_one_that_spends_exactly_the_rest(
    tmp_path, judge_env
):
    """SIGKILL mid-pass, after a resolution deposited into the live balance: the next session asks exactly
    what the verdicts leave (cap + resolutions x per-resolution - questions), no more, no less."""
    # the subprocess is pointed at it by start(); this process by judge_env
    messages_server = judge_env
    facts = {
        f"facts/t/f{i}.md": fact_text(title, [motif], body=f"{title}. Seen in more than one system.")
        for i, (title, motif) in enumerate(TOPICS)
    }
    repo = make_repo(tmp_path / "busy", facts)
    write_config(
        repo,
        "[judge]\nbackoff_s = 0.0\nconcurrency = 2\nposition_swap = false\n\n"
        "[budget]\noptimistic_cap = 4\nquestions_per_resolution = 4\n",
    )
    # embeddings stored: the subprocess only judges
    rebuild(repo.root)
    released = slow_then_held(messages_server, 7)
    yes_sent = []

    # the first question is a yes: it deposits 4 while the session runs
    def first_yes(req, n):
        if not yes_sent:
            yes_sent.append(n)
            return text(json.dumps(SAME))
        return slow(req, n)

    slow, messages_server.responder = messages_server.responder, first_yes
    # 7 calls is past the opening cap of 4: only the live deposit lets the killed session get that far
    code, _ = signal_after(start(repo, messages_server), messages_server, 7, signal.SIGKILL, released)
    assert code == -signal.SIGKILL

    messages_server.responder = lambda req, n: text(NO)
    before = messages_server.calls
    result = review(repo.root, ReviewOptions(passes=("alias",)))
    alias = result.passes["alias"]
    store = Store.for_corpus(repo.root)
    try:
        verdicts = store.verdicts("alias")
    finally:
        store.close()
    resolved = sum(v.is_yes for v in verdicts)
    # candidates were left: the balance, not the backlog, stopped it
    assert resolved == 1 and alias.waiting > 0
    # neither over- nor under-spent: every question the balance paid for has its verdict, and no more
    assert len(verdicts) == 4 + 4 * resolved
    assert alias.judged == len(verdicts) - sum(v.session != result.session for v in verdicts)
    # a reply parsed before the kill is not bought again
    assert messages_server.calls - before <= alias.judged
    assert get_status(repo.root)["throttle"]["alias"]["balance"] == 0
    # after it, nothing but a probe: on the best fresh question, as the merge changed carriers since
    after = review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    assert after.judged <= 1 and after.throttle.startswith("defunded")
