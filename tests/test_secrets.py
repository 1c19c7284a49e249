"""The API key goes to the judge and nowhere else: not logs, db, journal, commits or --json output."""

from __future__ import annotations

import json
import os
import subprocess

from click.testing import CliRunner
from helpers import FAST, SAME, fact_text, git, write_config
from messages_server import status, text

from knomit_judge.cli import cli

PAIR = ("penalty-blocks-own-recovery", "self-locking-penalty")


def alias_yes(request, n):
    hit = all(f'"spelling": "{m}"' in request.prompt for m in PAIR)
    return text(json.dumps(SAME if hit else {"same": False, "mechanism": ""}))


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_api_key_appears_in_no_output_file_or_commit(corpus_repo, judge_env, caplog):
    key = os.environ["ANTHROPIC_API_KEY"]
    root = str(corpus_repo.root)
    write_config(corpus_repo, FAST)
    judge_env.responder = alias_yes
    # a decision and a journal commit
    results = [run("review", root, "--json", "--pass", "alias")]
    out = json.loads(results[0].stdout)
    assert out["passes"]["alias"]["applied"] == 1
    # error paths log and print too: an overloaded judge, then a refused key
    corpus_repo.write("facts/ops/f5.md", fact_text("A latch holds the breaker open", ["latch"]))
    corpus_repo.commit()
    judge_env.responder = lambda request, n: status(529, message="overloaded")
    results.append(run("review", root, "--json", "--pass", "alias"))
    judge_env.responder = lambda request, n: status(401, message="invalid x-api-key")
    corpus_repo.write("facts/ops/f6.md", fact_text("A retry storm deepens an outage", ["retry-storm"]))
    corpus_repo.commit()
    results.append(run("review", root, "--json", "--pass", "alias"))
    assert results[-1].exit_code == 2 and "refused" in results[-1].stderr
    vid = next(v["id"] for v in json.loads(run("verdicts", root, "--json").stdout)["verdicts"] if v["commit_sha"])
    results += [
        run("status", root, "--json"),
        run("verdicts", root, "--json"),
        run("rebuild", root),
        run("revert", vid, root),
        run("review", root, "--dry-run", "--json"),
    ]

    # the key was really used, so its absence below means something
    sent = [r.headers.get("x-api-key") or r.headers.get("authorization", "") for r in judge_env.requests]
    # this SDK sends it as x-api-key or a bearer token
    assert sent and all(key in h for h in sent)
    for result in results:
        assert key not in result.stdout and key not in result.stderr
    assert not [r for r in caplog.records if key in r.getMessage()]
    needle = key.encode()
    # db, journal, .git, lock and intent files
    files = [p for p in corpus_repo.root.rglob("*") if p.is_file()]
    assert any(p.name == "judge.db" for p in files) and any(p.suffix == ".jsonl" for p in files)
    assert not [p for p in files if needle in p.read_bytes()]
    history = git(corpus_repo.root, "log", "-p", "--all")
    assert "Knomit-Verdict" in history and key not in history
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=root, capture_output=True, check=True
    ).stdout  # every object, uncompressed
    assert needle not in objects
