"""Propose, then apply ([apply] mode = "propose"): decisions wait on the proposals branch for a person's word.

Real components only: a bare repository as the shared remote, real clones, the real CLI (CliRunner), the real
anthropic SDK against the loopback Messages server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ONE_CALL, SYNC, THREE, fact_text, git, make_repo
from judges import planted
from messages_server import text, tool

from knomit_judge.cli import cli
from knomit_judge.corpus import parse_fact

PROPOSALS = "knomit-judge/proposals"
PROPOSE = '\n[apply]\nmode = "propose"\n'
# every question asked at once, and every pair a candidate whatever the neighbours: a caught-up session asks none
UNTHROTTLED = "\n[budget]\nenabled = false\n\n[shortlist]\nk = 20\n"
# an exact duplicate: retracted without a judge call
COPY = {"facts/ops/f5.md": THREE["facts/ops/f4.md"]}


def run(*args) -> tuple[int, dict | str]:
    out = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    if "--json" in args:
        return out.exit_code, json.loads(out.stdout) if out.stdout.strip() else out.output
    return out.exit_code, out.output


def lines_for_every_spelling(req, n):
    """The describe step: a line for every spelling asked, so no spelling is asked again in a later session."""
    return tool(
        {
            "lines": [
                {"spelling": s, "mechanism": f"What {s} names."}
                for s in re.findall(r'"spelling": "([^"]+)"', req.prompt)
            ]
        }
    )


@pytest.fixture
def shared(tmp_path):
    """A bare remote holding THREE (a planted yes per judged pass) and an exact copy of f4, set to propose; every
    ref update logged."""
    seed = make_repo(tmp_path / "seed", {**THREE, **COPY})
    seed.write("knomit-judge.toml", ONE_CALL + UNTHROTTLED + SYNC + PROPOSE)
    seed.commit("config: propose")
    bare = tmp_path / "kb.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed.root), str(bare))
    git(bare, "config", "core.logAllRefUpdates", "true")
    return bare


@pytest.fixture
def judge(judge_env):
    judge_env.responder = planted
    judge_env.describer = lines_for_every_spelling
    return judge_env


def clone(bare: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(bare), str(dest))
    return dest


def rev(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref).strip()


def trailers(repo: Path, rev_range: str, key: str) -> list[str]:
    out = git(repo, "log", f"--format=%(trailers:key={key},valueonly,separator=%x00)%x00", rev_range)
    return [v.strip() for v in out.split("\0") if v.strip()]


def fast_forwards_only(bare: Path, ref: str) -> None:
    """Every update of the ref on the remote was a fast-forward: nothing was ever force-pushed."""
    updates = git(bare, "reflog", "show", "--format=%H", ref).split()
    for new, old in zip(updates, updates[1:]):
        git(bare, "merge-base", "--is-ancestor", old, new)


def test_propose_reject_approve_through_the_cli_on_a_shared_remote(tmp_path, shared, judge):
    main_before = rev(shared, "main")
    reviewer = clone(shared, tmp_path / "reviewer")
    code, first = run("-q", "review", reviewer, "--json")
    assert code == 0, first
    # the remote's main did not move; the decisions went to the proposals branch, one commit each
    assert rev(shared, "main") == main_before and rev(reviewer, "main") == main_before
    assert git(reviewer, "status", "--porcelain") == ""
    proposed = trailers(shared, f"main..{PROPOSALS}", "Knomit-Verdict")
    assert first["proposals"]["proposed"] and sorted(proposed) == sorted(first["proposals"]["proposed"])
    passes = trailers(shared, f"main..{PROPOSALS}", "Knomit-Pass")
    # one commit per decision, the exact duplicate's retraction included
    assert sorted(passes) == ["alias", "discovery", "exact", "prune"], passes
    assert trailers(shared, f"main..{PROPOSALS}", "Knomit-Proposal") == [PROPOSALS] * 4
    assert first["sync"]["branch"] == PROPOSALS and first["sync"]["state"] == "synced"
    # the journal rides on the proposals branch: every verdict of the session is there
    journal = git(shared, "show", f"{PROPOSALS}:.knomit/verdicts/prune.jsonl")
    assert len(journal.splitlines()) == first["passes"]["prune"]["judged"]

    code, inbox = run("inbox", reviewer, "--json")
    assert code == 0, inbox
    waiting = [i for i in inbox["items"] if "approve" in i]
    assert [i["kind"] for i in inbox["items"][:4]] == ["proposal"] * 4 and len(waiting) == 4
    by_pass = {i["pass"]: i for i in waiting}
    for item in waiting:
        assert item["commit"] in git(shared, "rev-list", PROPOSALS) and item["verdict"] in proposed
        assert item["approve"] == f"knomit-judge approve {item['verdict']} {reviewer}"
        assert item["reject"].startswith(f"knomit-judge reject {item['verdict']} {reviewer}")
        assert item["evidence"] and item["subject"]
    assert by_pass["prune"]["rationale"] == "Both report the same hedging result."

    # a second session on the unchanged corpus: no judge call, nothing proposed twice
    calls = judge.calls
    code, second = run("-q", "review", reviewer, "--json")
    assert code == 0, second
    assert judge.calls == calls, [r.prompt[:80] for r in judge.requests[calls:]]
    assert second["proposals"]["proposed"] == [] and len(second["proposals"]["waiting"]) == 4
    assert sorted(trailers(shared, f"main..{PROPOSALS}", "Knomit-Verdict")) == sorted(proposed)
    assert rev(shared, "main") == main_before

    # a writer pushes to main
    writer = clone(shared, tmp_path / "writer")
    (writer / "notes.md").write_text("A writer's note, outside the facts.\n")
    git(writer, "add", "-A")
    git(writer, "commit", "-q", "-m", "writer: a note")
    git(writer, "push", "-q", "origin", "HEAD:main")
    written = rev(writer, "HEAD")

    rejected = by_pass["discovery"]["verdict"]
    code, said = run("reject", rejected, reviewer, "--note", "it does not follow", "--json")
    assert code == 0, said
    assert said["rejected"] == rejected and said["label"]["label"] == "no"
    assert rejected in trailers(shared, f"main..{PROPOSALS}", "Knomit-Dropped")
    # reject moves no reviewed branch
    assert rev(shared, "main") == written

    code, approved = run("approve", "--all", reviewer, "--json")
    assert code == 0, approved
    others = ["alias", "exact", "prune"]
    landed = {by_pass[n]["verdict"] for n in others}
    assert set(approved["approved"]) == landed and approved["left"] == {}
    main = rev(shared, "main")
    git(shared, "merge-base", "--is-ancestor", written, main)  # with the writer's commit
    assert sorted(trailers(shared, f"{written}..main", "Knomit-Verdict")) == sorted(landed)
    assert sorted(trailers(shared, f"{written}..main", "Knomit-Pass")) == others
    # the same decision commits: subject and trailers intact
    for name in others:
        sha = approved["approved"][by_pass[name]["verdict"]]
        assert git(shared, "log", "-1", "--format=%B", sha) == git(
            shared, "log", "-1", "--format=%B", by_pass[name]["commit"]
        )
    labels = [json.loads(line) for line in git(shared, "show", "main:.knomit/labels.jsonl").splitlines()]
    assert {(lab["verdict"], lab["label"]) for lab in labels} == {*((v, "yes") for v in landed), (rejected, "no")}
    f2, f3, f5 = (
        parse_fact(f"facts/ops/{n}.md", git(shared, "show", f"main:facts/ops/{n}.md")) for n in ("f2", "f3", "f5")
    )
    fast_forwards_only(shared, "refs/heads/main")
    fast_forwards_only(shared, f"refs/heads/{PROPOSALS}")

    # a third session: no judge call, and the rejected decision is not proposed again
    calls = judge.calls
    code, third = run("-q", "review", reviewer, "--json")
    assert code == 0, third
    assert judge.calls == calls, [r.prompt[:80] for r in judge.requests[calls:]]
    assert third["proposals"]["proposed"] == [] and third["proposals"]["waiting"] == []
    assert rev(shared, "main") == main
    assert rejected not in trailers(shared, f"main..{PROPOSALS}", "Knomit-Verdict") or rejected in trailers(
        shared, f"main..{PROPOSALS}", "Knomit-Dropped"
    )


def proposed_once(tmp_path: Path, bare: Path, name: str = "reviewer") -> tuple[Path, dict]:
    """A clone of the remote and its first proposing session: the clone and the proposals by pass."""
    reviewer = clone(bare, tmp_path / name)
    code, out = run("-q", "review", reviewer, "--json")
    assert code == 0, out
    waiting = {p["pass"]: p for p in out["proposals"]["waiting"]}
    assert sorted(waiting) == ["alias", "discovery", "exact", "prune"], out["proposals"]
    return reviewer, waiting


def test_a_merged_pull_request_counts_as_approval_of_all_of_it(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    # the pull request, merged on the hosting side: a merge commit of the proposals branch into main
    hub = clone(shared, tmp_path / "hub")
    git(hub, "fetch", "-q", "origin", PROPOSALS)
    git(hub, "merge", "-q", "--no-ff", "-m", "Merge pull request #1 from knomit-judge/proposals", "FETCH_HEAD")
    git(hub, "push", "-q", "origin", "HEAD:main")
    merged = rev(hub, "HEAD")

    calls = judge.calls
    code, out = run("-q", "review", reviewer, "--json")
    assert code == 0, out
    assert judge.calls == calls
    ids = {p["verdict"] for p in waiting.values()}
    assert set(out["proposals"]["approved"]) == ids and out["proposals"]["waiting"] == []
    # the session recorded the approvals without moving main
    assert rev(shared, "main") == merged
    # recorded as approvals: a yes label each, on the proposals branch, which holds nothing else now
    labels = [json.loads(line) for line in git(shared, "show", f"{PROPOSALS}:.knomit/labels.jsonl").splitlines()]
    assert {(lab["verdict"], lab["label"]) for lab in labels} == {(v, "yes") for v in ids}
    assert git(shared, "diff", "--name-only", "main", PROPOSALS).split() == [".knomit/labels.jsonl"]
    verdicts = {v["id"]: v for v in run("verdicts", reviewer, "--json")[1]["verdicts"]}
    # applied, read from the remote's main
    assert all(verdicts[v]["commit_sha"] for v in ids)
    # and a later session neither labels them again nor proposes anything
    code, again = run("-q", "review", reviewer, "--json")
    assert code == 0 and again["proposals"]["approved"] == [] and again["proposals"]["proposed"] == []
    assert judge.calls == calls


def test_facts_moved_under_a_proposal_drop_it_and_its_question_is_asked_again(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    writer = clone(shared, tmp_path / "writer")
    backup = writer / "facts/perf/backup.md"
    backup.write_text(backup.read_text().replace("Backup requests after p95", "Backup requests sent after p95"))
    git(writer, "commit", "-q", "-am", "writer: backup.md reworded")
    (writer / "notes.md").write_text("a note\n")
    git(writer, "add", "-A")
    git(writer, "commit", "-q", "-m", "writer: a note")
    git(writer, "push", "-q", "origin", "HEAD:main")

    calls = judge.calls
    code, out = run("-q", "review", reviewer, "--json")
    assert code == 0, out
    prune = waiting["prune"]["verdict"]
    assert out["proposals"]["dropped"] == {prune: "its facts moved on origin/main: facts/perf/backup.md"}
    asked = [r.prompt for r in judge.requests[calls:]]
    assert any(
        r.startswith("Are fact A") and "Backup requests sent after p95" in r and "Hedged" in r
        # asked again, as after any edit, and proposed again on the writer's text
        for r in asked
    )
    now = {p["pass"]: p for p in out["proposals"]["waiting"]}
    assert now["prune"]["verdict"] != prune and out["proposals"]["proposed"] == [now["prune"]["verdict"]]
    # the others are the very same commits, on the merged main
    for name in ("exact", "alias", "discovery"):
        assert now[name]["commit"] == waiting[name]["commit"]
    git(shared, "merge-base", "--is-ancestor", rev(writer, "HEAD"), PROPOSALS)
    retired = parse_fact("facts/perf/backup.md", git(shared, "show", f"{PROPOSALS}:facts/perf/backup.md"))
    assert "sent after p95" in retired.body and retired.status == "retracted"
    assert git(shared, "diff", "--name-only", "main", PROPOSALS, "--", "facts").split() == sorted(
        {"facts/ops/f3.md", "facts/ops/f5.md", *now["prune"]["paths"], *now["discovery"]["paths"]}
    )
    fast_forwards_only(shared, f"refs/heads/{PROPOSALS}")


def test_approve_all_of_an_unmoved_branch_lands_the_very_commits(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    tip = rev(shared, PROPOSALS)
    code, out = run("approve", "--all", reviewer, "--json")
    assert code == 0, out
    assert out["approved"] == {p["verdict"]: p["commit"] for p in waiting.values()}  # the same shas
    git(shared, "merge-base", "--is-ancestor", tip, "main")
    assert git(shared, "rev-list", f"main..{PROPOSALS}") == ""
    labels = [json.loads(line) for line in git(shared, "show", "main:.knomit/labels.jsonl").splitlines()]
    assert sorted(lab["verdict"] for lab in labels if lab["label"] == "yes") == sorted(out["approved"])
    assert rev(reviewer, "main") == rev(shared, "main") and git(reviewer, "status", "--porcelain") == ""
    calls = judge.calls
    code, again = run("-q", "review", reviewer, "--json")
    assert code == 0 and judge.calls == calls and again["proposals"]["waiting"] == []


def test_a_corpus_copied_with_its_git_proposes_in_its_own_tree_and_leaves_the_original_alone(tmp_path, shared, judge):
    """A copy (a restored backup, a runner's cache) holds a proposals tree whose link names the original's repository:
    it is made again here, never used, so the copy's sessions never touch the original's branch."""
    import shutil

    reviewer, waiting = proposed_once(tmp_path, shared)
    original = rev(reviewer, PROPOSALS)
    copy = tmp_path / "copied"
    shutil.copytree(reviewer, copy, symlinks=True)
    calls = judge.calls
    code, out = run("-q", "review", copy, "--json")
    assert code == 0, out
    assert judge.calls == calls and sorted(p["verdict"] for p in out["proposals"]["waiting"]) == sorted(
        p["verdict"] for p in waiting.values()
    )
    assert (
        Path(git(copy / ".git" / "knomit-proposals", "rev-parse", "--git-common-dir").strip()).resolve()
        == (copy / ".git").resolve()
    )
    # the original's branch did not move
    assert rev(reviewer, PROPOSALS) == original
    code, out = run("approve", "--all", copy, "--json")
    assert code == 0 and sorted(out["approved"]) == sorted(p["verdict"] for p in waiting.values()), out


def test_a_fresh_clone_buys_nothing_again_and_proposes_nothing_twice(tmp_path, shared, judge):
    proposed_once(tmp_path, shared)
    calls, tip = judge.calls, rev(shared, PROPOSALS)
    # another machine: no db, only what the remote holds
    elsewhere = clone(shared, tmp_path / "elsewhere")
    code, out = run("-q", "review", elsewhere, "--json")
    assert code == 0, out
    assert judge.calls == calls, [r.prompt[:60] for r in judge.requests[calls:]]
    assert out["proposals"]["proposed"] == [] and len(out["proposals"]["waiting"]) == 4
    assert rev(shared, PROPOSALS) == tip


# fx carries both losing spellings: each alias merge rewrites it, the second on the first's change
LATCH, LATCHING, QUEUE, QUEUEING = "feedback-latch", "latching-feedback", "queue-growth", "growing-queue"
SHARED = {
    "facts/a/fx.md": fact_text(
        "A latch that feeds on its own output grows the queue",
        [LATCH, LATCHING, QUEUEING],
        0.5,
        ["s1"],
        "The output holds the latch, and the held latch lets work pile up.",
    ),
    "facts/a/fy.md": fact_text(
        "An alarm that silences itself stays silent",
        [LATCH],
        0.5,
        ["s2"],
        "Silence is the condition that keeps the alarm off.",
    ),
    "facts/a/fz.md": fact_text(
        "Arrivals faster than service make the backlog climb",
        [QUEUE],
        0.9,
        ["s3"],
        "Each second more arrive than leave, so the backlog only grows.",
    ),
}


def two_merges(req, n):
    """The loopback judge: the two latch spellings are one, the two queue spellings are one; all else is no."""
    if req.prompt.startswith("Do motif A"):
        pair = set(re.findall(r'"spelling": "([^"]+)"', req.prompt))
        same = pair in ({LATCH, LATCHING}, {QUEUE, QUEUEING})
        return text(json.dumps({"same": same, "mechanism": "One mechanism under two names." if same else ""}))
    if req.prompt.startswith("Are fact A"):
        return text(json.dumps({"decision": "distinct", "rationale": ""}))
    return text(json.dumps({"entails": False, "fact": None, "rationale": ""}))


def test_approve_some_re_applies_them_in_order_and_leaves_one_made_on_another(tmp_path, judge_env):
    judge_env.responder, judge_env.describer = two_merges, lines_for_every_spelling
    # no remote: the proposals branch stays in this clone
    repo = make_repo(tmp_path / "kb", SHARED)
    repo.write("knomit-judge.toml", ONE_CALL + UNTHROTTLED + PROPOSE)
    repo.commit("config: propose")
    head, before = rev(repo.root, "HEAD"), repo.read("facts/a/fx.md")
    code, out = run("-q", "review", repo.root, "--json")
    assert code == 0, out
    assert rev(repo.root, "HEAD") == head and repo.read("facts/a/fx.md") == before and repo.status() == ""
    # in the order they were proposed
    first, second = (p["verdict"] for p in out["proposals"]["waiting"])
    assert [p["paths"] for p in out["proposals"]["waiting"]] == [["facts/a/fx.md"]] * 2

    # made on the first's change: it waits for it
    code, out = run("approve", second, repo.root, "--json")
    assert code == 0, out
    assert out["approved"] == {} and out["left"] == {second: "its files changed since it was proposed (facts/a/fx.md)"}
    assert rev(repo.root, "HEAD") == head

    code, out = run("approve", first, repo.root, "--json")
    assert code == 0, out
    assert list(out["approved"]) == [first] and [p["verdict"] for p in out["proposals"]["waiting"]] == [second]
    # now its files are as it found them
    code, out = run("approve", second, repo.root, "--json")
    assert code == 0, out
    assert list(out["approved"]) == [second] and out["proposals"]["waiting"] == []
    fx = parse_fact("facts/a/fx.md", repo.read("facts/a/fx.md"))
    assert set(fx.motifs) == {LATCH, QUEUE}
    # landed in the order proposed
    assert trailers(repo.root, "HEAD", "Knomit-Verdict")[:2] == [second, first]
    assert [lab["verdict"] for lab in map(json.loads, repo.read(".knomit/labels.jsonl").splitlines())] == [
        first,
        second,
    ]
    assert repo.status() == ""


def test_approve_and_reject_say_what_is_wrong_and_change_nothing(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    before = (rev(shared, "main"), rev(shared, PROPOSALS), rev(reviewer, "HEAD"))
    for args in (
        ["approve", reviewer],
        ["approve", "--all", waiting["alias"]["verdict"], reviewer],
        ["approve", "vffffffffffff", reviewer],
        ["reject", "vffffffffffff", reviewer],
        ["approve", "--all", reviewer, "extra"],
    ):
        out = CliRunner().invoke(cli, [str(a) for a in args])
        assert out.exit_code == 2, (args, out.output)
        assert "Traceback" not in out.output and out.output.strip()
    assert (rev(shared, "main"), rev(shared, PROPOSALS), rev(reviewer, "HEAD")) == before
    # commit mode: nothing is proposed, and the command says why
    plain = make_repo(tmp_path / "plain", {})
    out = CliRunner().invoke(cli, ["approve", "--all", str(plain.root)])
    assert out.exit_code == 2 and 'apply.mode is "commit"' in out.output


def test_status_the_metrics_and_the_report_show_the_proposals_waiting_and_their_age(tmp_path, shared, judge):
    from prometheus_client.parser import text_string_to_metric_families

    reviewer, waiting = proposed_once(tmp_path, shared)
    metrics = tmp_path / "kj.prom"
    code, out = run("-q", "review", reviewer, "--metrics-file", metrics)
    assert code == 0, out
    assert "proposals knomit-judge/proposals on origin/main: 4 waiting, 0 new" in out
    oldest = min(p["proposed_at"] for p in waiting.values())
    code, status = run("status", reviewer, "--json")
    assert code == 0, status
    for figures in (status["proposals"], status["metrics"]["proposals"]):
        assert figures["waiting"] == 4 and figures["oldest_at"] == oldest and 0 <= figures["oldest_age_s"] < 600
        assert sorted(i["verdict"] for i in figures["items"]) == sorted(p["verdict"] for p in waiting.values())
    code, text_ = run("status", reviewer)
    assert f"proposals knomit-judge/proposals on origin/main: 4 waiting, the oldest since {oldest}" in text_
    samples = {
        s.name: s
        for f in text_string_to_metric_families(metrics.read_text())
        for s in f.samples
        if s.name.startswith("knomit_judge_proposals")
    }
    assert samples["knomit_judge_proposals_waiting"].value == 4
    assert samples["knomit_judge_proposals_waiting"].labels["branch"] == PROPOSALS
    from datetime import datetime

    assert (
        samples["knomit_judge_proposals_oldest_timestamp_seconds"].value == datetime.fromisoformat(oldest).timestamp()
    )
    page = tmp_path / "report.html"
    code, said = run("report", reviewer, "--html", page)
    assert code == 0, said
    html = page.read_text()
    assert "<h2>Proposals waiting</h2>" in html and "4 decision(s) wait on" in html
    assert all(f"knomit-judge approve {p['verdict']}" in html for p in waiting.values())


PROPOSE_WORKFLOW = Path(__file__).resolve().parent.parent / "contrib" / "github-actions" / "knomit-judge-propose.yml"


def test_the_propose_workflow_passes_actionlint(tmp_path):
    from helpers import actionlint

    done = actionlint(PROPOSE_WORKFLOW, tmp_path)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr
    wf = PROPOSE_WORKFLOW.read_text()
    for needed in (
        "schedule:",
        "fetch-depth: 0",
        "cancel-in-progress: false",
        "pull-requests: write",
        "secrets.ANTHROPIC_API_KEY",
        "knomit-judge review .",
        "gh pr create",
        "gh pr edit",
    ):
        assert needed in wf, needed
    # the check can fail: a context that does not exist is found
    broken = tmp_path / "broken.yml"
    broken.write_text(wf.replace("github.token", "github.tokens"))
    assert actionlint(broken, tmp_path).returncode != 0


def pull_request_step(corpus: Path, tmp_path: Path, open_pr: str = "") -> tuple[list[str], str]:
    """The workflow's pull-request step run as the runner runs it, the real knomit-judge and a stand-in `gh`
    (not ours) that logs its arguments: (gh calls, the body it was given)."""
    import os
    import subprocess
    import sys

    import yaml

    step = next(
        s
        for s in yaml.safe_load(PROPOSE_WORKFLOW.read_text())["jobs"]["review"]["steps"]
        if s.get("name") == "Open or update the pull request"
    )
    bin_dir, temp = tmp_path / "bin", tmp_path / "runner"
    bin_dir.mkdir(exist_ok=True)
    temp.mkdir(exist_ok=True)
    log = tmp_path / "gh.log"
    log.unlink(missing_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ "$2" = list ] && echo "{open_pr}"\nexit 0\n')
    gh.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "RUNNER_TEMP": str(temp),
        "PROPOSALS": PROPOSALS,
        "REVIEWED": "main",
        "GH_TOKEN": "test",
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=corpus, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    body = temp / "body.md"
    return log.read_text().splitlines(), body.read_text() if body.exists() else ""


def test_the_pull_request_lists_each_decision_with_its_evidence_and_commands(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    calls, body = pull_request_step(reviewer, tmp_path)
    assert calls[0] == f"pr list --head {PROPOSALS} --base main --state open --json number --jq .[0].number // empty"
    assert calls[1].startswith(
        f"pr create --head {PROPOSALS} --base main --title knomit-judge: 4 decision(s) proposed --body-file "
    )
    for p in waiting.values():
        assert (
            f"`knomit-judge approve {p['verdict']}`" in body and f"`knomit-judge reject {p['verdict']} --note" in body
        )
        assert p["subject"] in body
    assert "Both report the same hedging result." in body and "Hedged requests cut p99" in body  # the evidence
    # the pull request is open: it is updated
    calls, _ = pull_request_step(reviewer, tmp_path, open_pr="7")
    assert calls[1].startswith("pr edit 7 --title knomit-judge: 4 decision(s) proposed")
    assert run("approve", "--all", reviewer)[0] == 0
    # nothing waits: it is closed
    calls, _ = pull_request_step(reviewer, tmp_path, open_pr="7")
    assert calls[1].startswith("pr close 7 --comment")


def test_a_proposing_session_killed_mid_commit_is_rolled_back_and_proposes_it_once(corpus_repo, judge_env):
    from judges import PAIR, alias_yes
    from processes import kill_in_hook

    judge_env.responder = alias_yes
    corpus_repo.write("knomit-judge.toml", ONE_CALL + PROPOSE)
    corpus_repo.commit("config: propose")
    head, calls = rev(corpus_repo.root, "HEAD"), judge_env.calls
    # the hook runs in the proposals' work tree too: the session dies as it commits its first decision there
    kill_in_hook(corpus_repo.root, "pre-commit", "review", str(corpus_repo.root), "--pass", "alias")
    tree = corpus_repo.root / ".git" / "knomit-proposals"
    assert (corpus_repo.root / ".git" / "worktrees" / "knomit-proposals" / "knomit-pending.json").exists()
    # the change half-made, in its tree only
    assert "facts/ops/f3.md" in git(tree, "status", "--porcelain")
    assert rev(corpus_repo.root, "HEAD") == head and corpus_repo.status() == ""

    code, out = run("-q", "review", corpus_repo.root, "--pass", "alias", "--json")
    assert code == 0, out
    assert any("killed while applying verdict" in n for n in out["proposals"]["notes"]), out["proposals"]
    # asked once, by the killed session: applied again from its verdict, not asked again
    assert len([r for r in judge_env.requests[calls:] if all(f'"spelling": "{m}"' in r.prompt for m in PAIR)]) == 1
    [alias] = out["proposals"]["waiting"]
    assert out["proposals"]["proposed"] == [alias["verdict"]]
    assert trailers(corpus_repo.root, f"main..{PROPOSALS}", "Knomit-Verdict") == [alias["verdict"]]  # once
    assert git(tree, "status", "--porcelain") == "" and rev(corpus_repo.root, "HEAD") == head


def test_an_approval_the_remote_did_not_take_exits_1_and_goes_out_with_the_next(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    main = rev(shared, "main")
    git(reviewer, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    out = CliRunner().invoke(cli, ["approve", "--all", str(reviewer)])
    assert out.exit_code == 1 and "the reviewed branch was not pushed" in out.output, out.output
    assert "Traceback" not in out.output and rev(shared, "main") == main
    assert set(trailers(reviewer, "HEAD", "Knomit-Verdict")) >= {p["verdict"] for p in waiting.values()}
    git(reviewer, "remote", "set-url", "origin", str(shared))
    code, again = run("approve", "--all", reviewer, "--json")
    assert code == 0 and again["approved"] == {} and again["sync"]["state"] == "synced", again
    assert rev(shared, "main") == rev(reviewer, "HEAD")


def test_rebuild_reads_the_proposals_tree_and_check_finds_it_equal(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    code, out = run("rebuild", reviewer, "--check")
    # the sessions' derived state is of the proposals' tree, and so is the check's
    assert code == 0, out
    code, said = run("reject", waiting["discovery"]["verdict"], reviewer, "--json")
    assert code == 0, said
    # a lost db: the journal on both branches restores it
    for db in (reviewer / ".knomit").glob("judge.db*"):
        db.unlink()
    code, out = run("rebuild", reviewer)
    assert code == 0, out
    code, out = run("rebuild", reviewer, "--check")
    assert code == 0, out
    verdicts = {v["id"]: v for v in run("verdicts", reviewer, "--json")[1]["verdicts"]}
    # the reject's revert line, from the branch
    assert verdicts[waiting["discovery"]["verdict"]]["reverted"] is True
    calls = judge.calls
    code, again = run("-q", "review", reviewer, "--json")
    assert code == 0 and judge.calls == calls and again["proposals"]["proposed"] == [], again
    assert len(again["proposals"]["waiting"]) == 3


def test_a_no_label_on_a_waiting_proposal_drops_it_at_the_next_session(tmp_path, shared, judge):
    reviewer, waiting = proposed_once(tmp_path, shared)
    vid = waiting["prune"]["verdict"]
    code, out = run("label", vid, "no", reviewer, "--note", "not one fact")
    assert code == 0, out
    code, out = run("-q", "review", reviewer, "--json")
    assert code == 0, out
    assert out["proposals"]["dropped"] == {vid: "labelled no"}
    assert vid not in {p["verdict"] for p in out["proposals"]["waiting"]} and out["proposals"]["proposed"] == []
