"""The scripted judge: its replies file is checked at load, a session it matched nothing in says so, and its
verdicts never bind the real (anthropic) judge, nor the real judge's bind it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import SAME, git, motif_repo
from judges import alias_responder

from knomit_judge.cli import cli
from knomit_judge.rebuild import rebuild
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

PAIR = {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty"}
GOOD = json.dumps({**PAIR, "reply": SAME})


def invoke(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def replies(tmp_path, *lines: str):
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def verdict_rows(repo) -> list[dict]:
    store = Store.for_corpus(repo.root)
    try:
        return [dict(r) for r in store.db["verdicts"].rows]
    finally:
        store.close()


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"pass": "alias", "a": "x", "b": ', "replies.jsonl:2: not JSON"),
        ('["alias", "x", "y"]', "replies.jsonl:2: expected a JSON object, got list"),
        (
            '{"pass": "alais", "a": "x", "b": "y", "reply": {}}',
            "replies.jsonl:2: 'pass' must be one of alias, prune, discovery",
        ),
        (
            '{"pass": "alias", "a": "x", "b": "y"}',
            "replies.jsonl:2: 'reply' (an object, or the raw reply text) is required",
        ),
        ('{"pass": "prune", "a": "facts/x.md", "reply": {}}', "replies.jsonl:2: a prune entry needs 'a' and 'b'"),
        (
            '{"pass": "discovery", "a": "x", "b": "y", "reply": {}}',
            "replies.jsonl:2: a discovery entry needs exactly one of 'group' or 'contains'",
        ),
    ],
)
def test_a_bad_replies_line_is_an_error_naming_file_and_line_before_anything_is_stored(
    corpus_repo, tmp_path, line, message
):
    path = replies(tmp_path, GOOD, line)
    head = git(corpus_repo.root, "rev-parse", "HEAD")
    result = invoke("review", corpus_repo.root, "--judge", f"scripted:{path}")
    assert result.exit_code == 2, result.output
    assert f"knomit-judge: {path.parent}/{message}" in result.stderr
    assert "Traceback" not in result.output
    # nothing judged, stored or committed: fixing the file and running again starts from scratch
    assert verdict_rows(corpus_repo) == [] and git(corpus_repo.root, "rev-parse", "HEAD") == head


def test_a_missing_replies_file_is_an_error_naming_it(corpus_repo, tmp_path):
    result = invoke("review", corpus_repo.root, "--judge", f"scripted:{tmp_path}/typo.jsonl")
    assert result.exit_code == 2
    assert f"--judge scripted:{tmp_path}/typo.jsonl: No such file or directory" in result.stderr
    assert verdict_rows(corpus_repo) == []


def test_a_session_the_scripted_judge_matched_nothing_in_says_so_on_stderr_and_in_notes(corpus_repo, tmp_path):
    stale = replies(tmp_path, json.dumps({**PAIR, "b": "no-such-spelling", "reply": SAME}))
    # without -q, which leaves errors alone on stderr (issue 54); the note is in the result either way
    result = CliRunner().invoke(
        cli, ["review", str(corpus_repo.root), "--pass", "alias", "--json", "--judge", f"scripted:{stale}"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    asked = out["passes"]["alias"]["judged"]
    assert asked > 0
    said = (
        f"the scripted judge answered none of the {asked} question(s) it was asked from {stale} "
        "(none of its 1 entries matched)"
    )
    assert said in result.stderr  # a warning
    assert [n for n in out["notes"] if n.startswith(said)]


def test_a_scripted_judge_that_matched_something_adds_no_note(corpus_repo, tmp_path):
    result = invoke(
        "review", corpus_repo.root, "--pass", "alias", "--json", "--judge", f"scripted:{replies(tmp_path, GOOD)}"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["passes"]["alias"]["applied"] == 1
    assert not [n for n in out["notes"] if "scripted judge answered none" in n] and "answered none" not in result.stderr


def test_scripted_noes_do_not_bind_the_real_judge(corpus_repo, tmp_path, judge_env):
    # every question gets the default "different"
    empty = f"scripted:{replies(tmp_path)}"
    first = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=empty)).passes["alias"]
    assert first.judged == first.candidates > 0 and first.resolved == 0
    again = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=empty)).passes["alias"]
    # they do bind the scripted judge
    assert again.state == "caught-up" and again.judge_calls == 0

    judge_env.responder = alias_responder()
    real = review(corpus_repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    assert real.cached == 0 and real.offered >= first.candidates  # asked afresh ...
    # ... with a budget the scripted noes did not spend
    assert real.throttle == "optimistic"
    assert real.applied == 1 and "motifs: [penalty-blocks-own-recovery]" in corpus_repo.read("facts/ops/f3.md")
    kinds = {(r["model"].split(":")[0], r["judge"]) for r in verdict_rows(corpus_repo)}
    assert kinds == {("scripted", "scripted"), ("claude-sonnet-5-5", "anthropic")}


def test_real_verdicts_do_not_bind_the_scripted_judge(corpus_repo, tmp_path, judge_env):
    real = review(corpus_repo.root, ReviewOptions(passes=("alias",))).passes["alias"]  # the server says "different"
    assert real.judged == real.candidates > 0 and real.applied == 0
    scripted = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies(tmp_path, GOOD)}"))
    alias = scripted.passes["alias"]
    assert alias.cached == 0 and alias.throttle == "optimistic" and alias.applied == 1
    calls = judge_env.calls
    assert review(corpus_repo.root, ReviewOptions(passes=("alias",))).passes["alias"].judged > 0  # fingerprints moved
    assert judge_env.calls > calls


def test_scripted_sessions_do_not_defund_the_real_judge(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "patience = 2\nprobe_every = 5\n")
    empty = f"scripted:{replies(tmp_path)}"
    review(repo.root, ReviewOptions(passes=("alias",), judge=empty))
    defunded = review(repo.root, ReviewOptions(passes=("alias",), judge=empty, dry_run=True)).passes["alias"]
    assert defunded.throttle == "defunded"
    real = review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    assert real.throttle == "optimistic" and real.judged > 0


def test_the_journal_carries_the_judge_kind_and_rebuild_keeps_it(corpus_repo, tmp_path, judge_env):
    review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies(tmp_path)}"))
    review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    before = {r["id"]: r["judge"] for r in verdict_rows(corpus_repo)}
    assert set(before.values()) == {"scripted", "anthropic"}
    journal = corpus_repo.root / ".knomit" / "verdicts" / "alias.jsonl"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert {line["id"]: line["judge"] for line in lines} == before

    (corpus_repo.root / ".knomit" / "judge.db").unlink()
    rebuild(corpus_repo.root)
    assert {r["id"]: r["judge"] for r in verdict_rows(corpus_repo)} == before

    # A journal written before verdicts carried their judge: the kind is read from the model they recorded.
    journal.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "judge"}) + "\n" for line in lines))
    corpus_repo.commit("an older journal")
    (corpus_repo.root / ".knomit" / "judge.db").unlink()
    rebuild(corpus_repo.root)
    assert {r["id"]: r["judge"] for r in verdict_rows(corpus_repo)} == before
    again = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies(tmp_path)}"))
    # still bound to their own kind only
    assert again.passes["alias"].state == "caught-up"


def test_status_shows_the_throttle_of_the_judge_that_answered_last(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "patience = 2\n")
    review(repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies(tmp_path)}"))
    shown = invoke("status", repo.root).stdout.splitlines()
    throttle = shown[shown.index("throttle for the next session (scripted judge):") + 1]
    assert throttle.startswith("  alias: defunded")
    # a plain review is not that session: it starts from the real judge's own verdicts (none yet: optimistic)
    plain = shown[shown.index("throttle for the next plain review (anthropic judge; its own verdicts only):") + 1]
    assert plain.startswith("  alias: optimistic")
    real = review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    data = json.loads(invoke("status", repo.root, "--json").stdout)
    assert data["judge"] == "anthropic" and "throttle for the next session:" in data["text"]
    assert not any(line.startswith("throttle for the next plain review") for line in data["text"])
    kinds = [r["judge"] for r in verdict_rows(repo)]
    assert kinds.count("scripted") > 0 and kinds.count("anthropic") == real.judged
    assert data["throttle"]["alias"]["why"].startswith(f"balance 0: {real.judged} asked for ")  # its own verdicts only
