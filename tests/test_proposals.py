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
from conftest import ONE_CALL, SYNC, THREE, git, make_repo, planted
from messages_server import tool

from knomit_judge.cli import cli
from knomit_judge.corpus import parse_fact

PROPOSALS = "knomit-judge/proposals"
PROPOSE = '\n[apply]\nmode = "propose"\n'
# every question asked at once, and every pair a candidate whatever the neighbours: a caught-up session asks none
UNTHROTTLED = "\n[budget]\nenabled = false\n\n[shortlist]\nk = 20\n"
COPY = {"facts/ops/f5.md": THREE["facts/ops/f4.md"]}  # an exact duplicate: retracted without a judge call


def run(*args) -> tuple[int, dict | str]:
    out = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    if "--json" in args:
        return out.exit_code, json.loads(out.stdout) if out.stdout.strip() else out.output
    return out.exit_code, out.output


def lines_for_every_spelling(req, n):
    """The describe step: a line for every spelling asked, so no spelling is asked again in a later session."""
    return tool({"lines": [{"spelling": s, "mechanism": f"What {s} names."}
                           for s in re.findall(r'"spelling": "([^"]+)"', req.prompt)]})


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
    assert rev(shared, "main") == written  # reject moves no reviewed branch

    code, approved = run("approve", "--all", reviewer, "--json")
    assert code == 0, approved
    others = ["alias", "exact", "prune"]
    landed = {by_pass[n]["verdict"] for n in others}
    assert set(approved["approved"]) == landed and approved["left"] == {}
    main = rev(shared, "main")
    git(shared, "merge-base", "--is-ancestor", written, main)  # with the writer's commit
    assert sorted(trailers(shared, f"{written}..main", "Knomit-Verdict")) == sorted(landed)
    assert sorted(trailers(shared, f"{written}..main", "Knomit-Pass")) == others
    for name in others:  # the same decision commits: subject and trailers intact
        sha = approved["approved"][by_pass[name]["verdict"]]
        assert git(shared, "log", "-1", "--format=%B", sha) == git(shared, "log", "-1", "--format=%B",
                                                                    by_pass[name]["commit"])
    labels = [json.loads(line) for line in git(shared, "show", "main:.knomit/labels.jsonl").splitlines()]
    assert {(lab["verdict"], lab["label"]) for lab in labels} == {*((v, "yes") for v in landed), (rejected, "no")}
    f2, f3, f5 = (parse_fact(f"facts/ops/{n}.md", git(shared, "show", f"main:facts/ops/{n}.md"))
                  for n in ("f2", "f3", "f5"))
    fast_forwards_only(shared, "refs/heads/main")
    fast_forwards_only(shared, f"refs/heads/{PROPOSALS}")

    # a third session: no judge call, and the rejected decision is not proposed again
    calls = judge.calls
    code, third = run("-q", "review", reviewer, "--json")
    assert code == 0, third
    assert judge.calls == calls, [r.prompt[:80] for r in judge.requests[calls:]]
    assert third["proposals"]["proposed"] == [] and third["proposals"]["waiting"] == []
    assert rev(shared, "main") == main
    assert rejected not in trailers(shared, f"main..{PROPOSALS}", "Knomit-Verdict") or \
        rejected in trailers(shared, f"main..{PROPOSALS}", "Knomit-Dropped")
