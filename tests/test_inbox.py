"""The inbox: undecided questions before samples, samples fixed by the session id, and not one byte written."""

from __future__ import annotations

import json

from click.testing import CliRunner
from helpers import DEMO, SAME, demo_repo, tree_digest
from messages_server import text

from knomit_judge.cli import cli
from knomit_judge.gitops import Lock, open_repo
from knomit_judge.inbox import inbox, sample
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.verdicts import Verdict

P, S, Q = "penalty-blocks-own-recovery", "self-locking-penalty", "queue-amplifies-latency"
DIFFERENT = {"same": False, "mechanism": ""}


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def split_responder(request, n):
    """P and S are one mechanism; P and Q are 'same' only when P is shown first: a split by position."""
    at = {m: request.prompt.find(f'"spelling": "{m}"') for m in (P, S, Q)}
    if at[P] >= 0 and at[S] >= 0:
        return text(json.dumps(SAME))
    if at[P] >= 0 and at[Q] >= 0 and at[P] < at[Q]:
        return text(json.dumps({"same": True, "mechanism": "Both feed back on themselves."}))
    return text(json.dumps(DIFFERENT))


def test_inbox_lists_splits_before_samples_with_evidence_and_writes_nothing(corpus_repo, judge_env):
    judge_env.responder = split_responder
    out = run("-q", "review", corpus_repo.root, "--pass", "alias", "--json")
    assert json.loads(out.stdout)["passes"]["alias"]["applied"] == 1
    before, calls = tree_digest(corpus_repo.root), judge_env.calls
    # no lock taken: it runs beside a session
    with Lock(open_repo(corpus_repo.root)):
        out = run("inbox", corpus_repo.root, "--json")
    assert out.exit_code == 0, out.output
    items = json.loads(out.stdout)["items"]
    assert [i["kind"] for i in items] == ["undecided", "sample"]
    split, applied = items
    assert split["why"].startswith("split by position: ") and split["answer"] == "different"
    assert set(split["subject"].values()) == {P, Q} and split["commit"] is None
    # carrier titles of each side
    assert set(split["evidence"]) == {P, Q} and len(split["evidence"][P]) == 3
    assert set(applied["subject"].values()) == {P, S} and applied["commit"]
    assert applied["evidence"]["carriers rewritten by the commit"] == [
        "A sanction that prevents self repair keeps the node quarantined"
    ]
    assert applied["label"] == f"knomit-judge label {applied['verdict']} yes|no {corpus_repo.root}"
    text_out = run("inbox", corpus_repo.root, "--limit", "1").stdout
    assert "1. [undecided] alias" in text_out and "first 1 shown" in text_out and "2. [" not in text_out
    assert tree_digest(corpus_repo.root) == before and judge_env.calls == calls

    # a labelled item leaves the inbox; the db rebuilt from the journal gives the same inbox
    assert run("label", split["verdict"], "yes", corpus_repo.root).exit_code == 0
    (corpus_repo.root / ".knomit" / "judge.db").unlink()
    assert run("rebuild", corpus_repo.root).exit_code == 0
    again = json.loads(run("inbox", corpus_repo.root, "--json").stdout)["items"]
    assert again == [applied]


def decisions(session: str, n: int) -> list[Verdict]:
    return [
        Verdict(
            pass_name="alias",
            fingerprint=f"f{i}",
            subject={"a": f"m{i}", "b": f"n{i}"},
            answer="same",
            is_yes=True,
            rationale="r",
            model="m",
            prompt="alias@1",
            session=session,
            id=f"v{i:012d}",
            commit_sha=f"{i:040d}",
        )
        for i in range(n)
    ]


def test_the_sample_is_fixed_by_the_session_id_not_by_order():
    ten = decisions("20261202T030000Z-aaaa", 10)
    chosen = [v.id for v in sample(ten, 0.2)]
    assert len(chosen) == 2  # 0.2 of 10
    # db order does not matter
    assert [v.id for v in sample(list(reversed(ten)), 0.2)] == chosen
    assert [v.id for v in sample(ten, 0.2)] == chosen
    other = {tuple(v.id for v in sample(decisions(f"20261202T030000Z-{s}", 10), 0.2)) for s in "bcdef"}
    # another session draws its own
    assert other != {tuple(chosen)}
    # at least one of every session that applied something
    assert len(sample(decisions("s", 3), 0.1)) == 1
    assert sample(ten, 0.0) == []


def test_a_proposal_comes_before_the_sample_and_the_sample_is_the_configured_share(tmp_path):
    repo = demo_repo(tmp_path / "demo", "\n[calibration]\nsample_rate = 0.5\n")
    review(repo.root, ReviewOptions(judge=f"scripted:{DEMO / 'judge-replies.jsonl'}"))
    items = inbox(repo.root)["items"]
    kinds = [i.kind for i in items]
    # alias: 2 of its 3, prune: 1 of its 2
    assert kinds == ["proposal", "sample", "sample", "sample"]
    proposal = items[0]
    assert proposal.verdict.pass_name == "discovery" and proposal.verdict.commit_sha
    assert proposal.evidence["proposed"]["title"] == proposal.verdict.payload["title"]
    assert [i.verdict.pass_name for i in items[1:]] == ["alias", "alias", "prune"]
