"""A spelling the judge merged stays merged: its yes is restated, without a call, when the pair comes back."""

from __future__ import annotations

import json
import re

from helpers import ONE_CALL, SAME, fact_text, make_repo, write_config
from messages_server import text

from knomit_judge.history import status as get_status
from knomit_judge.rebuild import rebuild
from knomit_judge.revert import revert
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

JUDGE = ONE_CALL
PAIR = ("retry-storm", "retry-amplification")
DIFFERENT = json.dumps({"same": False, "mechanism": ""})


def corpus(tmp_path):
    repo = make_repo(
        tmp_path / "corpus",
        {
            "facts/a.md": fact_text("Retries multiply load during an outage", [PAIR[0]]),
            "facts/b.md": fact_text("Clients retrying at once amplify an outage", [PAIR[1]]),
        },
    )
    write_config(repo, JUDGE)
    return repo


def session(repo, server):
    before = server.calls
    alias = review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    return alias, server.calls - before


def merged(repo) -> list[tuple[str, str]]:
    """(lost, kept) of every alias merge commit, oldest first."""
    return [m.groups() for s in reversed(repo.log()) if (m := re.match(r"alias: merge motif '(.+)' into '(.+)'", s))]


def balance(repo) -> int:
    return get_status(repo.root)["throttle"]["alias"]["balance"]


def test_a_retired_spelling_used_again_is_merged_without_a_call(tmp_path, judge_env):
    repo = corpus(tmp_path)
    judge_env.responder = lambda request, n: text(json.dumps(SAME))
    alias, calls = session(repo, judge_env)
    assert calls == 1 and alias.applied == 1
    [(lost, kept)] = merged(repo)
    held = balance(repo)

    # were the pair asked again, it would not merge
    judge_env.responder = lambda request, n: text(DIFFERENT)
    repo.fact("facts/c.md", "Synchronised retries turn a blip into an outage", motifs=[lost])
    repo.commit("a writer uses the old spelling")
    head = repo.log()
    dry = review(repo.root, ReviewOptions(passes=("alias",), dry_run=True)).passes["alias"]
    assert dry.offered == 0 and any("would be restated without a call" in n for n in dry.notes), dry.line()
    # a dry run commits nothing
    assert repo.log() == head and repo.status() == ""
    alias, calls = session(repo, judge_env)
    assert calls == 0
    assert alias.state == "worked" and alias.resolved == alias.applied == 1
    assert any("restated without a call" in n for n in alias.notes)
    assert merged(repo) == [(lost, kept), (lost, kept)]
    assert kept in repo.read("facts/c.md") and lost not in repo.read("facts/c.md")
    # no question was asked: nothing withdrawn, nothing deposited
    assert balance(repo) == held
    assert repo.status() == ""

    # the restated verdict is in the journal like any other: a rebuild agrees, and nothing is asked again
    (repo.root / ".knomit" / "judge.db").unlink()
    rebuild(repo.root)
    assert balance(repo) == held
    _, calls = session(repo, judge_env)
    assert calls == 0


def test_a_revert_ends_the_standing_merge(tmp_path, judge_env):
    repo = corpus(tmp_path)
    judge_env.responder = lambda request, n: text(json.dumps(SAME))
    session(repo, judge_env)
    [(lost, kept)] = merged(repo)
    repo.fact("facts/c.md", "Synchronised retries turn a blip into an outage", motifs=[lost])
    repo.commit("a writer uses the old spelling")
    alias, calls = session(repo, judge_env)
    assert calls == 0 and alias.applied == 1

    store = Store.for_corpus(repo.root)
    try:
        restated = [v for v in store.verdicts("alias") if v.model == "mechanical"]
    finally:
        store.close()
    assert len(restated) == 1 and restated[0].commit_sha and restated[0].calls == 0
    revert(restated[0].id, repo.root, reason="c.md means something else by it")
    assert lost in repo.read("facts/c.md")

    # the person's revert stands, as a `no` on the pair as it is: not restated, not asked, not merged again
    alias, calls = session(repo, judge_env)
    assert calls == 0 and alias.applied == 0
    assert lost in repo.read("facts/c.md") and len(merged(repo)) == 2


def test_a_yes_made_stale_by_a_merge_on_a_shared_carrier_is_applied_in_the_same_session(tmp_path, judge_env):
    """Two yeses in one round; the first merge rewrites a fact both pairs touch, so the second's fingerprint moves."""
    repo = make_repo(
        tmp_path / "corpus",
        {
            "facts/a.md": fact_text("Retries multiply load during an outage", ["retry-storm", "thundering-herd"]),
            "facts/b.md": fact_text("Clients retrying at once amplify an outage", ["retry-amplification"]),
            "facts/c.md": fact_text("Every waiter wakes when the lock frees", ["herd-effect"]),
        },
    )
    write_config(repo, JUDGE)
    pairs = [{"retry-storm", "retry-amplification"}, {"thundering-herd", "herd-effect"}]

    def judge(request, n):
        same = any(all(f'"spelling": "{m}"' in request.prompt for m in pair) for pair in pairs)
        return text(json.dumps(SAME) if same else DIFFERENT)

    judge_env.responder = judge
    alias, calls = session(repo, judge_env)
    assert len(merged(repo)) == 2 and alias.applied == 2, alias.line()
    store = Store.for_corpus(repo.root)
    try:
        restated = [v for v in store.verdicts("alias") if v.model == "mechanical"]
        judged_yes = [v for v in store.verdicts("alias") if v.is_yes and v.model != "mechanical"]
    finally:
        store.close()
    # the second pair was not asked again: its judged yes went stale, and was restated and applied
    assert len(judged_yes) == 2 and len(restated) == 1 and restated[0].commit_sha
    assert any("restated without a call" in n for n in alias.notes)
    assert session(repo, judge_env)[1] == 0 and repo.status() == ""
