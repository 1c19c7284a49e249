"""`knomit-judge revert`: undo an applied alias, merge or discovery with a new commit; never asked or applied again."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner
from helpers import THREE, decision, git
from judges import planted_reply

from knomit_judge.cli import cli
from knomit_judge.config import load_config
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import DB_PATH, Store


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_revert_round_trip_for_alias_merge_and_discovery(three, judge_env):
    repo = three
    for pass_name in ("discovery", "prune", "alias"):
        vid, sha = decision(repo, pass_name)
        changed = [
            p
            for p in git(repo.root, "show", "--name-only", "--format=", "-z", sha).split("\0")
            if p and not p.startswith(".knomit/")
        ]
        assert changed
        result = run("revert", vid, str(repo.root), "--reason", f"wrong {pass_name}")
        assert result.exit_code == 0, result.output
        new = git(repo.root, "rev-parse", "HEAD").strip()
        assert new in result.stdout
        # a new commit, not a rewrite of history, with the trailer naming the verdict
        assert git(repo.root, "merge-base", "--is-ancestor", sha, new) == ""
        trailers = git(repo.root, "log", "-1", "--format=%(trailers:key=Knomit-Reverts,valueonly)").strip()
        assert trailers == vid
        # restored byte for byte, or gone if the decision created it
        for path in changed:
            before = subprocess_bytes(repo.root, f"{sha}^:{path}")
            now = (repo.root / path).read_bytes() if (repo.root / path).exists() else None
            assert now == before, path
        listed = {v["id"]: v for v in json.loads(run("verdicts", str(repo.root), "--json").stdout)["verdicts"]}
        assert listed[vid]["reverted"] is True
        assert repo.status() == ""
    # the tree is the original corpus again (the journal aside)
    for path, body in THREE.items():
        assert repo.read(path) == body, path
    assert not list((repo.root / "facts").rglob("*metrics-cluster-cannot*"))

    # Same fingerprints: the reverted questions are not asked again and nothing is re-applied, though
    # the judge would still say yes. The budget is off so the throttle cannot hide a re-ask; what is
    # asked is only what was never asked (e.g. prune pairs with f3 as it was before the alias merge).
    config = load_config(repo.root)
    config.budget.enabled = False
    calls = judge_env.calls
    again = review(repo.root, ReviewOptions(), config)
    asked = [r.prompt for r in judge_env.requests[calls:]]
    assert not [p for p in asked if is_yes(planted_reply(p))]
    assert again.commits == [] or subjects(repo, again.commits) == ["journal"]
    assert sum(r.applied for r in again.passes.values()) == 0
    for path, body in THREE.items():
        assert repo.read(path) == body, path

    # A reverted yes stays a "no" with its reason after the db is lost, and still nothing is asked.
    for f in (repo.root / DB_PATH).parent.glob("judge.db*"):
        f.unlink()
    assert run("rebuild", str(repo.root)).exit_code == 0
    listed = {v["id"]: v for v in json.loads(run("verdicts", str(repo.root), "--json").stdout)["verdicts"]}
    for pass_name in ("discovery", "prune", "alias"):
        vid, _ = decision(repo, pass_name)
        assert listed[vid]["reverted"] is True and listed[vid]["commit_sha"]
    store = Store.for_corpus(repo.root)
    try:
        assert store.verdict(decision(repo, "prune")[0]).revert_reason == "wrong prune"
    finally:
        store.close()
    calls = judge_env.calls
    assert review(repo.root, ReviewOptions(), config).commits == [] and judge_env.calls == calls


def is_yes(reply: dict) -> bool:
    return bool(reply.get("same") or reply.get("entails") or reply.get("decision") in ("merge", "retract"))


def subjects(repo, shas: list[str]) -> list[str]:
    return [git(repo.root, "log", "-1", "--format=%s", sha).split(":")[0] for sha in shas]


def subprocess_bytes(root, rev: str) -> bytes | None:
    done = subprocess.run(["git", "cat-file", "blob", rev], cwd=root, capture_output=True)
    return done.stdout if done.returncode == 0 else None


def test_revert_refuses_what_it_cannot_undo_cleanly(three):
    repo = three
    vid, sha = decision(repo, "alias")
    no = next(
        v["id"] for v in json.loads(run("verdicts", str(repo.root), "--json").stdout)["verdicts"] if not v["commit_sha"]
    )
    bad = run("revert", "vnope", str(repo.root))
    assert bad.exit_code == 2 and "no verdict 'vnope'" in bad.stderr
    bad = run("revert", no, str(repo.root))
    assert bad.exit_code == 2 and "applied nothing" in bad.stderr
    # a later edit of a file the decision changed: restoring it would undo that edit too
    repo.write("facts/ops/f3.md", repo.read("facts/ops/f3.md") + "An edit made after the merge.\n")
    repo.commit("edit")
    head = git(repo.root, "rev-parse", "HEAD")
    bad = run("revert", vid, str(repo.root))
    assert bad.exit_code == 2 and "facts/ops/f3.md changed after" in bad.stderr
    assert git(repo.root, "rev-parse", "HEAD") == head and repo.status() == ""
    # a file the revert would write, changed and not committed, refuses it ...
    pvid, psha = decision(repo, "prune")
    written = next(
        p for p in git(repo.root, "show", "--name-only", "--format=", psha).split() if p.startswith("facts/")
    )
    repo.write("notes.txt", "work in progress\n")
    kept = repo.read(written)
    repo.write(written, kept + "Half an edit.\n")
    bad = run("revert", pvid, str(repo.root))
    assert bad.exit_code == 2 and f"{written} has uncommitted changes and the revert would write it" in bad.stderr
    repo.write(written, kept)
    # ... while someone's other work (an open vault's workspace file) is left as it is, never mixed into its commit
    assert run("revert", pvid, str(repo.root)).exit_code == 0
    assert git(repo.root, "show", "--name-only", "--format=", "HEAD").split().count("notes.txt") == 0
    assert repo.read("notes.txt") == "work in progress\n" and "?? notes.txt" in repo.status()
    (repo.root / "notes.txt").unlink()
    again = run("revert", pvid, str(repo.root))
    assert again.exit_code == 2 and "already reverted" in again.stderr
