"""The describe step under bad replies (issue 39): a bad item loses only its own line, a spelling left without a
line is asked again within describe.max_tries requests and then waits for its key to change, the step's state is
one of every pass's, it counts what is missing in `status` and has its series in the metrics file.

Real sessions through the real SDK to the loopback Messages API, in real git repositories.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import parse, stored_lines, value, write_config
from judges import LINES, evidence_of
from messages_server import status, text, tool

from knomit_judge.cli import cli

ONE_ATTEMPT = "[judge]\nbackoff_s = 0.0\nmax_attempts = 1\n"


def review_cli(repo, *extra) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "alias", "--json", *extra])
    assert r.stdout.startswith("{"), r.output
    return r.exit_code, json.loads(r.stdout)


def status_json(repo) -> dict:
    return json.loads(CliRunner().invoke(cli, ["-q", "status", str(repo.root), "--json"]).stdout)


def asked(req) -> list[str]:
    return [s["spelling"] for s in evidence_of(req)["spellings"]]


def reply(items, usage=(1000, 200)):
    """A describer giving the same `lines` items to every request."""
    return lambda req, n: tool({"lines": items}, input_tokens=usage[0], output_tokens=usage[1])


def good(*names) -> list[dict]:
    return [{"spelling": s, "mechanism": LINES[s]} for s in names]


def test_a_reply_that_is_not_json_is_paid_at_most_max_tries_times_then_waits_for_its_key(
    corpus_repo, judge_env, tmp_path
):
    write_config(corpus_repo, ONE_ATTEMPT)
    judge_env.describer = lambda req, n: text("Here are your lines: all three name a penalty.", 1000, 200)
    prom = tmp_path / "k.prom"
    for session in (1, 2, 3):
        code, out = review_cli(corpus_repo, "--metrics-file", str(prom))
        d = out["passes"]["describe"]
        # paid, and nothing written: broken (exit 1), never "failed" nor "caught-up"
        assert code == 1 and d["state"] == "broken", d
        assert (d["unparsed"], d["judge_calls"], d["written"], d["missing"]) == (1, 1, 0, 3)
        assert d["first_error"].startswith("unparsed: not a JSON object")
        assert len(judge_env.describe_requests) == session
        # the pass works from the embeddings alone
        assert out["passes"]["alias"]["state"] != "broken"
    # an alert can fire: the step has its series, labelled as a pass
    samples = parse(prom)
    assert value(samples, "knomit_judge_pass_state", **{"pass": "describe", "state": "broken"}) == 1
    assert value(samples, "knomit_judge_pass_failed_sessions", **{"pass": "describe"}) == 3
    assert value(samples, "knomit_judge_describe_missing_lines") == 3
    st = status_json(corpus_repo)
    assert st["lines"]["missing"] == 3 and st["lines"]["stored"] == 0 and "missing 3" in st["lines"]["text"]
    assert st["metrics"]["describe"]["state"] == "broken"

    # the limit is reached: no request, and the spellings wait for their key to change, counted as missing
    code, out = review_cli(corpus_repo, "--metrics-file", str(prom))
    d = out["passes"]["describe"]
    assert code == 0 and len(judge_env.describe_requests) == 3
    assert (d["state"], d["judge_calls"], d["missing"], d["candidates"]) == ("caught-up", 0, 3, 3)
    assert any(
        n.startswith("3 spelling(s) have no line and are not asked again until their carriers")
        and "unparsed: not a JSON object" in n
        for n in d["notes"]
    ), d["notes"]
    assert value(parse(prom), "knomit_judge_describe_missing_lines") == 3
    assert status_json(corpus_repo)["lines"]["missing"] == 3

    # a lost db: the journal keeps the count of tries, so a fresh db pays nothing again
    (corpus_repo.root / ".knomit/judge.db").unlink()
    code, out = review_cli(corpus_repo)
    assert code == 0 and len(judge_env.describe_requests) == 3 and out["passes"]["describe"]["state"] == "caught-up"

    # a carrier's shown text changes: that spelling's key is new, and it is asked again, alone
    corpus_repo.fact(
        "facts/ops/f3.md",
        "A sanction that prevents self repair keeps the node quarantined for good",
        motifs=["self-locking-penalty"],
    )
    corpus_repo.commit()
    judge_env.describer = reply(good("self-locking-penalty"))
    code, out = review_cli(corpus_repo)
    assert code == 0 and asked(judge_env.describe_requests[3]) == ["self-locking-penalty"]
    d = out["passes"]["describe"]
    assert (d["state"], d["written"], d["missing"]) == ("worked", 1, 2)


def test_one_bad_item_loses_only_its_own_spellings_line(corpus_repo, judge_env):
    items = [
        {"spelling": "penalty-blocks-own-recovery", "mechanism": 5},
        *good("self-locking-penalty", "queue-amplifies-latency"),
    ]
    judge_env.describer = reply(items)
    code, out = review_cli(corpus_repo)
    d = out["passes"]["describe"]
    assert code == 0 and (d["state"], d["written"], d["missing"], d["unparsed"]) == ("worked", 2, 1, 0)
    assert stored_lines(corpus_repo.root) == {
        "penalty-blocks-own-recovery": "",
        "self-locking-penalty": LINES["self-locking-penalty"],
        "queue-amplifies-latency": LINES["queue-amplifies-latency"],
    }
    # the spelling that lost its line is asked again, and only it
    judge_env.describer = reply(good("penalty-blocks-own-recovery"))
    code, out = review_cli(corpus_repo)
    assert asked(judge_env.describe_requests[1]) == ["penalty-blocks-own-recovery"]
    d = out["passes"]["describe"]
    assert (d["state"], d["written"], d["missing"]) == ("worked", 1, 0)
    assert stored_lines(corpus_repo.root)["penalty-blocks-own-recovery"] == LINES["penalty-blocks-own-recovery"]


@pytest.mark.parametrize(
    "items, missing",
    [
        ([], 3),  # {"lines": []}
        (good("self-locking-penalty", "queue-amplifies-latency"), 1),  # one left out
        (
            [
                {"spelling": "penalty-blocks-own-recovery", "mechanism": "   "},
                *good("self-locking-penalty", "queue-amplifies-latency"),
            ],
            1,
        ),  # empty text
        (
            [
                {"spelling": "Penalty-Blocks-Own-Recovery ", "mechanism": "x"},
                {"spelling": "nobody-asked", "mechanism": "y"},
                # another case is the asked spelling's line; one not asked is ignored
                *good("self-locking-penalty"),
            ],
            1,
        ),
    ],
    ids=["empty-list", "left-out", "empty-text", "wrong-case"],
)
def test_a_spelling_given_no_line_is_counted_missing_and_asked_again(corpus_repo, judge_env, items, missing):
    judge_env.describer = reply(items)
    code, out = review_cli(corpus_repo)
    d = out["passes"]["describe"]
    # a paid call that left spellings without a line is never caught-up; they are counted, not dropped
    assert code == 0 and d["state"] == "worked" and d["judge_calls"] == 1, d
    assert (d["candidates"], d["written"], d["missing"]) == (3, 3 - missing, missing)
    assert any(f"{missing} spelling(s) got no line" in n and "asked again next session" in n for n in d["notes"])
    st = status_json(corpus_repo)
    assert st["lines"]["missing"] == missing and st["lines"]["stored"] == 3 - missing
    text_lines = CliRunner().invoke(cli, ["-q", "status", str(corpus_repo.root)]).stdout
    assert f"missing {missing}," in text_lines
    have = {s for s, line in stored_lines(corpus_repo.root).items() if line}
    if missing == 1 and "Penalty-Blocks-Own-Recovery " in json.dumps(items):
        assert "penalty-blocks-own-recovery" in have and "nobody-asked" not in stored_lines(corpus_repo.root)
    # the next session asks for the missing ones again, and only them
    judge_env.describer = reply(good(*LINES))
    code, out = review_cli(corpus_repo)
    assert sorted(asked(judge_env.describe_requests[1])) == sorted(set(LINES) - have)
    assert out["passes"]["describe"]["missing"] == 0 and out["passes"]["describe"]["state"] == "worked"
    assert status_json(corpus_repo)["lines"]["missing"] == 0


def test_a_refused_describe_request_counts_toward_the_limit(corpus_repo, judge_env):
    write_config(corpus_repo, ONE_ATTEMPT + "\n[describe]\nmax_tries = 1\n")
    judge_env.describer = lambda req, n: status(400, message="prompt is too long")
    code, out = review_cli(corpus_repo)
    d = out["passes"]["describe"]
    assert code == 1 and (d["state"], d["refused"], d["missing"]) == ("broken", 1, 3)
    # max_tries = 1: not asked again until the key changes
    code, out = review_cli(corpus_repo)
    assert code == 0 and len(judge_env.describe_requests) == 1
    assert out["passes"]["describe"]["state"] == "caught-up" and out["passes"]["describe"]["missing"] == 3
