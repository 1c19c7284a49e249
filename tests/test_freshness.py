"""A new fact's duplicate is asked while it is new: prune owes each new fact its nearest questions.

Real store, real git, the real embedder, the real SDK against the loopback Messages server, which
answers by the fact titles in the prompt (merge for the one labelled pair, distinct otherwise).
"""

from __future__ import annotations

import os

from helpers import fact_text, make_repo, write_config
from judges import responder, titles_of

from knomit_judge.history import status as get_status
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

TOPICS = [
    ("cache-stampede", "When a hot cache key expires every request recomputes it at once and floods the database"),
    ("clock-skew", "Clock skew between servers makes timestamp ordering of events wrong"),
    ("priority-inversion", "A low-priority task holding a lock blocks the high-priority task waiting for it"),
    ("survivorship-bias", "Studying only the companies that survived overstates what success requires"),
    ("metric-target", "When a metric becomes a target people game it and it stops measuring anything"),
    ("retry-storm", "Clients retrying timed-out requests multiply the load on an overloaded server"),
    ("bus-factor", "A project only one engineer understands stalls when that engineer leaves"),
    ("alert-fatigue", "On-call engineers who get too many false alarms start ignoring real ones"),
    # two claims on one theme, distinct: the best-ranked pair, the one question the opening asks (most pairs of
    # these facts score below prune's floor, Pass.prior: hopeless, never read but by a probe or as owed)
    ("knowledge-silo", "A system only one engineer knows stops changing whenever that engineer is away"),
]
STAMPEDE = TOPICS[0][1]
# A writer's duplicate of the stampede fact, in other words: its pair ranks by similarity below the copy's.
PARAPHRASE = "Simultaneous misses on one popular cache entry stampede the backing store"
# A near copy of the retry fact (not byte-identical, so not the exact pass's): the best-ranked new pair.
NEAR_COPY = "Clients retrying timed-out requests multiply the load on an overloaded server fleet"
MERGE = {"decision": "merge", "rationale": "Both say a hot key's expiry floods the database with recomputes."}
JUDGE = "[judge]\nbackoff_s = 0.0\ntimeout_s = 20\nmax_attempts = 1\nconcurrency = 1\nswap_sample = 0.0\n"


def corpus(root, fresh_per_change: int):
    facts = {f"facts/{slug}.md": fact_text(title, [slug], body=title + ".") for slug, title in TOPICS}
    repo = make_repo(root, facts)
    # one question opens the balance; the probe every 9 sessions: the pass is defunded after session 1
    write_config(
        repo, JUDGE + f"\n[budget]\noptimistic_cap = 1\nprobe_every = 9\nfresh_per_change = {fresh_per_change}\n"
    )
    return repo


def prune(repo, server):
    before = server.calls
    result = review(repo.root, ReviewOptions(passes=("prune",)))
    return result.passes["prune"], server.calls - before


def add_new_facts(repo) -> None:
    repo.write("facts/stampede-again.md", fact_text(PARAPHRASE, ["stampede-again"], body=PARAPHRASE + "."))
    repo.write("facts/retry-fleet.md", fact_text(NEAR_COPY, ["retry-fleet"], body=NEAR_COPY + "."))
    repo.commit("a writer adds two facts")


def test_a_defunded_prune_pass_asks_a_new_facts_duplicate_in_the_session_that_first_sees_it(tmp_path, judge_env):
    judge_env.responder = responder(prune={frozenset({STAMPEDE, PARAPHRASE}): MERGE})
    asked_by = {}
    # 0: the rule off, so the test shows what it changes
    for per in (0, 2):
        repo = corpus(tmp_path / f"per{per}", per)
        assert prune(repo, judge_env)[1] == 1  # the opening balance
        assert get_status(repo.root)["throttle"]["prune"]["state"] == "defunded"
        add_new_facts(repo)
        first = len(judge_env.requests)
        r, spent = prune(repo, judge_env)
        # a yes is asked in 2 orders
        asked = list(dict.fromkeys(titles_of(q) for q in judge_env.requests[first:]))
        asked_by[per] = (r, spent, asked, repo)

    # without the rule, the one fresh probe goes to the best-ranked new pair: the near copy, not the duplicate
    r, spent, asked, _ = asked_by[0]
    assert spent == 1 and r.throttle == "defunded (probe)" and r.applied == 0
    assert NEAR_COPY in asked[0] and PARAPHRASE not in asked[0]

    r, spent, asked, repo = asked_by[2]
    assert r.throttle == "defunded (probe)" and r.applied == 1 and r.resolved == 1
    assert frozenset({STAMPEDE, PARAPHRASE}) in asked
    # the owed go by score: the near copy's pair still first
    assert asked[0] == asked_by[0][2][0]
    assert "status: retracted" in repo.read("facts/stampede-again.md") or "status: retracted" in repo.read(
        "facts/cache-stampede.md"
    )


def test_an_unchanged_or_merely_touched_corpus_owes_nothing(tmp_path, judge_env):
    judge_env.responder = responder()
    repo = corpus(tmp_path / "c", 2)
    assert prune(repo, judge_env)[1] == 1
    # nothing changed: defunded, its probe 8 sessions away
    assert prune(repo, judge_env)[1] == 0
    path = repo.root / "facts/bus-factor.md"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # touched, same content
    r, spent = prune(repo, judge_env)
    assert spent == 0 and r.throttle == "defunded"


def test_owed_questions_withdraw_from_the_balance_and_are_not_asked_twice(tmp_path, judge_env):
    """Asked at a balance of zero they take it nowhere below zero; a rerun does not owe them again."""
    judge_env.responder = responder()
    repo = corpus(tmp_path / "c", 2)
    assert prune(repo, judge_env)[1] == 1
    add_new_facts(repo)
    r, spent = prune(repo, judge_env)
    assert 2 <= spent <= 4 and r.resolved == 0
    t = get_status(repo.root)["throttle"]["prune"]
    assert (t["state"], t["balance"]) == ("defunded", 0)
    # the new facts are no longer new; nothing else changed
    assert prune(repo, judge_env)[1] == 0


def test_a_session_killed_after_asking_the_owed_questions_is_not_followed_by_asking_them_again(tmp_path, judge_env):
    """What a new fact was owed is counted from the stored verdicts, not from a session that completed."""
    judge_env.responder = responder()
    repo = corpus(tmp_path / "c", 2)
    assert prune(repo, judge_env)[1] == 1
    add_new_facts(repo)
    r, spent = prune(repo, judge_env)
    assert spent >= 2
    store = Store.for_corpus(repo.root)
    # as if killed before its end: no throttle record, so the new facts are still new to the next session
    try:
        with store.db.atomic():
            store.db.execute("DELETE FROM throttle WHERE session = ?", [r_session(store)])
    finally:
        store.close()
    # their owed questions are answered: at most the defunded pass's one fresh probe, not 2 more a fact
    assert prune(repo, judge_env)[1] <= 1


def r_session(store) -> str:
    return store.db.execute("SELECT session FROM throttle ORDER BY rowid DESC LIMIT 1").fetchone()[0]
