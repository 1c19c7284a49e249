"""The judge client left unattended: every fault kind, samples, position swap, cache, cost, concurrency.

All through the real anthropic SDK to the loopback Messages server; the sessions are real reviews.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import sqlite_utils
from click.testing import CliRunner
from helpers import SAME, CorpusRepo, copy_of, write_config
from messages_server import Action, Model, delay, garbage, hang, status, text, tool

from knomit_judge.cli import cli
from knomit_judge.history import status as get_status
from knomit_judge.judge import cache_key, swap_sampled
from knomit_judge.models import format_schema
from knomit_judge.prompts import load_prompt
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

DIFFERENT = json.dumps({"same": False, "mechanism": ""})
YES = json.dumps(SAME)
FIRST, SECOND = "penalty-blocks-own-recovery", "self-locking-penalty"


@pytest.fixture
def small_repo(templates, tmp_path) -> CorpusRepo:
    """The SMALL corpus: three motifs, three alias questions."""
    return copy_of(templates["small"], tmp_path)


def configure(repo, prices: str = "", **judge) -> None:
    """knomit-judge.toml with no backoff waits plus these [judge] keys."""
    values = {"backoff_s": 0.0, "timeout_s": 20, **judge}
    lines = ["[judge]", *(f"{k} = {json.dumps(v)}" for k, v in values.items()), prices]
    write_config(repo, "\n".join(lines) + "\n")


def session(repo, **judge):
    configure(repo, **judge)
    return review(repo.root, ReviewOptions(passes=("alias",)))


def stored(repo) -> list:
    store = Store.for_corpus(repo.root)
    try:
        return store.verdicts("alias")
    finally:
        store.close()


def cli_review(repo, *extra):
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "alias", *extra])
    out = json.loads(result.stdout) if result.stdout.startswith("{") else None
    return result, out


# -- faults that are retried, then succeed -------------------------------------------------------


@pytest.mark.parametrize(
    "first",
    [
        status(429, retry_after=0.3),
        status(529),
        status(500),
        garbage("this is not json"),  # the SDK raises json.JSONDecodeError
        garbage("[1, 2]"),  # JSON, but no Message
        # a text block without text
        garbage('{"type": "message", "content": [{"type": "text"}]}'),
    ],
    ids=["429", "529", "500", "non-json-body", "json-list-body", "block-without-text"],
)
def test_retried_fault_then_success_counts_attempts(pair_repo, judge_env, first):
    judge_env.script([first, text(YES)])
    started = time.monotonic()
    r = session(pair_repo, position_swap=False).passes["alias"]
    assert (r.state, r.judged, r.unavailable, r.judge_calls, r.attempts) == ("worked", 1, 0, 1, 2)
    assert judge_env.calls == 2
    [v] = stored(pair_repo)
    assert v.answer == "same" and v.attempts == 2 and v.calls == 1
    if "429" in first.name:
        # retry-after is honoured even with backoff_s = 0
        assert time.monotonic() - started >= 0.3


def test_a_200_text_reply_is_one_attempt_with_tokens_and_cost(pair_repo, judge_env):
    judge_env.responder = lambda req, n: text(YES, input_tokens=1000, output_tokens=100)
    r = session(pair_repo).passes["alias"]
    assert (r.judged, r.resolved, r.judge_calls, r.attempts) == (1, 1, 2, 2)
    [v] = stored(pair_repo)
    assert (v.tokens_in, v.tokens_out, v.attempts) == (2000, 200, 2)
    # claude-sonnet-5-5 ships at $2 / $10 per million tokens
    assert v.cost_usd == pytest.approx(2 * (1000 * 2 + 100 * 10) / 1e6)
    assert r.cost_usd == pytest.approx(v.cost_usd)


# -- faults that never make a verdict ------------------------------------------------------------


@pytest.mark.parametrize(
    "action, kind, error",
    [
        (status(429, retry_after=0), "unavailable", "HTTP 429"),
        (status(529), "unavailable", "HTTP 529"),
        (garbage("<html>bad gateway</html>", status=502, content_type="text/html"), "unavailable", "HTTP 502"),
        (garbage("not json at all"), "unavailable", "malformed response"),
        (text("I think they are the same."), "unparsed", "not a JSON object"),
        (text('{"same": true, "mechanism": "A penalty'), "unparsed", "not a JSON object"),
        (text('{"answer": "same"}'), "unparsed", "unexpected keys"),
        (text('{"same": "yes"}'), "unparsed", "wrong type"),
        (text('["same"]'), "unparsed", "not a JSON object but list"),
    ],
    ids=["429", "529", "502-html", "non-json-body", "prose", "truncated", "wrong-keys", "wrong-type", "list"],
)
def test_faults_are_counted_never_verdicts_and_the_pass_is_broken(pair_repo, judge_env, action, kind, error):
    judge_env.responder = lambda req, n: action
    configure(pair_repo, position_swap=False)
    result, out = cli_review(pair_repo, "--json")
    assert result.exit_code == 1, result.output
    alias = out["passes"]["alias"]
    assert alias["state"] == "broken" and alias["offered"] == 1 and alias["judged"] == 0
    assert alias[kind] == 1 and alias["unavailable" if kind == "unparsed" else "unparsed"] == 0
    retried = kind == "unavailable"
    assert judge_env.calls == alias["attempts"] == (3 if retried else 1) and alias["judge_calls"] == 1
    assert error in alias["first_error"]
    assert stored(pair_repo) == []
    [line] = [x for x in cli_review(pair_repo)[0].stdout.splitlines() if x.startswith("alias:")]
    assert line.startswith("alias: broken") and f"first error: {kind}: " in line and error in line


def test_hang_past_the_time_limit_is_unavailable_quickly(pair_repo, judge_env):
    judge_env.responder = lambda req, n: hang(30)
    started = time.monotonic()
    r = session(pair_repo, timeout_s=0.5).passes["alias"]
    assert time.monotonic() - started < 8
    assert (r.state, r.unavailable, r.judged) == ("broken", 1, 0)
    assert r.first_error == "unavailable: timed out after 0.5s"
    # a call cut off may still have been billed
    assert r.cost_usd is None
    assert stored(pair_repo) == []


def test_a_reply_without_usage_makes_the_cost_unknown_not_zero(pair_repo, judge_env):
    judge_env.responder = lambda req, n: text(YES, usage=False)
    configure(pair_repo)
    result, out = cli_review(pair_repo, "--json")
    assert result.exit_code == 0
    assert out["passes"]["alias"]["judged"] == 1 and out["passes"]["alias"]["cost_usd"] is None
    assert out["cost_usd"] is None
    for key in ("attempts", "unavailable", "unparsed", "cost_usd", "judge_calls"):
        assert key in out["passes"]["alias"]
    [v] = stored(pair_repo)
    assert v.cost_usd is None and v.tokens_in == 0
    shown = CliRunner().invoke(cli, ["-q", "status", str(pair_repo.root)]).stdout
    alias_line = shown.split("alias:")[1].split("\n")[0]
    assert "alias: worked" in shown and "cost incomplete" in shown and "$0.0000" not in alias_line


@pytest.mark.parametrize("code", [401, 404])
def test_refused_key_or_model_stops_the_session_with_exit_2(small_repo, judge_env, code):
    judge_env.responder = lambda req, n: status(code, message="no such thing")
    configure(small_repo, concurrency=1)
    result, out = cli_review(small_repo)
    assert result.exit_code == 2
    assert f"judge refused the request: HTTP {code}" in result.stderr and "ANTHROPIC_API_KEY" in result.stderr
    assert "sk-ant-test" not in result.output  # never the key
    # not retried, and the other questions are not asked
    assert judge_env.calls <= 2
    assert stored(small_repo) == []


def test_a_refusal_with_a_full_queue_ends_the_session_instead_of_hanging(templates, tmp_path, judge_env):
    repo = copy_of(templates["many"], tmp_path)
    # the queue fills up behind the first question meanwhile
    judge_env.script([delay(0.3, status(401))])
    configure(repo, concurrency=1, position_swap=False)
    raised = []
    worker = threading.Thread(target=lambda: raised.extend(_refusal(repo)), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the session hung after the judge refused"
    assert [type(e).__name__ for e in raised] == ["JudgeRefused"] and judge_env.calls == 1


def _refusal(repo) -> list:
    try:
        review(repo.root, ReviewOptions(passes=("alias",)))
    except Exception as e:  # noqa: BLE001 - the test asserts which
        return [e]
    return []


def test_no_api_key_is_a_configuration_error(pair_repo, judge_env, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    result, _ = cli_review(pair_repo)
    assert result.exit_code == 2 and "ANTHROPIC_API_KEY" in result.stderr
    assert judge_env.calls == 0


def test_one_order_failing_makes_the_question_unavailable(pair_repo, judge_env):
    judge_env.script([text(YES), status(500), status(500), status(500)])
    r = session(pair_repo).passes["alias"]
    assert (r.state, r.unavailable, r.judged, r.attempts, r.judge_calls) == ("broken", 1, 0, 4, 2)
    assert "HTTP 500 (request req_" in r.first_error and "after 3 attempts" in r.first_error


# -- samples and position swap -------------------------------------------------------------------


def test_three_samples_yes_no_yes_is_yes_with_agreement_067(pair_repo, judge_env):
    judge_env.script([text(YES), text(DIFFERENT), text(YES)])
    r = session(pair_repo, samples=3, position_swap=False).passes["alias"]
    assert (r.judged, r.resolved, r.judge_calls) == (1, 1, 3)
    [v] = stored(pair_repo)
    assert v.answer == "same" and v.agreement == 0.67 and v.rationale == SAME["mechanism"]
    assert sorted(v.replies) == sorted([YES, DIFFERENT, YES])


@pytest.mark.parametrize(
    "samples, replies, min_agreement, agreement",
    [
        (3, [YES, DIFFERENT, YES], 0.9, 0.67),
        # a tie is no majority even when min_agreement allows it
        (2, [YES, DIFFERENT], 0.5, 0.5),
    ],
)
def test_samples_below_agreement_record_the_default_undecided(
    pair_repo, judge_env, samples, replies, min_agreement, agreement
):
    judge_env.script([text(t) for t in replies])
    r = session(pair_repo, samples=samples, min_agreement=min_agreement, position_swap=False).passes["alias"]
    assert (r.judged, r.resolved, r.declined) == (1, 0, 1)
    [v] = stored(pair_repo)
    assert v.answer == "different" and v.agreement == agreement
    assert v.rationale.startswith("undecided")


def first_comes_first(req, n):
    """'same' only when FIRST's spelling is shown before SECOND's: a judge that answers by position."""
    same = req.prompt.index(f'"spelling": "{FIRST}"') < req.prompt.index(f'"spelling": "{SECOND}"')
    return text(YES if same else DIFFERENT)


def test_a_judge_answering_by_position_gets_the_default(pair_repo, judge_env):
    judge_env.responder = first_comes_first
    r = session(pair_repo).passes["alias"]
    assert (r.judged, r.resolved, r.judge_calls) == (1, 0, 2)
    orders = [req.prompt.index(FIRST) < req.prompt.index(SECOND) for req in judge_env.requests]
    assert sorted(orders) == [False, True]  # both orders were asked
    [v] = stored(pair_repo)
    assert v.answer == "different" and "split" in v.rationale
    assert FIRST in pair_repo.read("facts/ops/f1.md") and SECOND in pair_repo.read("facts/ops/f3.md")


def test_a_default_first_order_is_the_verdict_after_one_call(pair_repo, judge_env):
    """A split can only end in the default, so a first order that gave it is not asked the other way round."""
    judge_env.responder = lambda req, n: text(DIFFERENT)
    r = session(pair_repo, swap_sample=0.0).passes["alias"]
    assert (r.judged, r.declined, r.judge_calls) == (1, 1, 1)
    [v] = stored(pair_repo)
    assert (v.answer, v.orders, v.by_position, v.calls) == ("different", 1, ["different"], 1)


def test_a_first_order_that_is_not_the_default_is_asked_in_its_second(pair_repo, judge_env):
    judge_env.responder = lambda req, n: text(YES)
    r = session(pair_repo, swap_sample=0.0).passes["alias"]
    assert (r.judged, r.resolved, r.judge_calls) == (1, 1, 2)
    [v] = stored(pair_repo)
    assert (v.answer, v.orders, v.by_position) == ("same", 2, ["same", "same"])


def test_the_swap_sample_asks_default_first_questions_in_both_orders_and_measures_flips(templates, tmp_path, judge_env):
    # ten unrelated motifs: dozens of questions, all asked (no budget)
    repo = copy_of(templates["many"], tmp_path)
    configure(repo, "[budget]\nenabled = false", swap_sample=0.3)

    # a judge with a position bias: "same" only when the larger spelling is shown first
    def by_order(req, n):
        first, second = re.findall(r'"spelling": "([^"]+)"', req.prompt)[:2]
        return text(YES if first > second else DIFFERENT)

    judge_env.responder = by_order
    r = review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    verdicts = stored(repo)
    n = len(verdicts)
    # every "same" was split by the other order
    assert r.judged == r.candidates == n > 30 and r.resolved == 0
    sampled = {v.fingerprint for v in verdicts if swap_sampled(v.fingerprint, 0.3)}
    assert 0 < len(sampled) < n
    # the second order: for the sample (chosen by fingerprint), or after a first "same"
    for v in verdicts:
        assert v.orders == (2 if v.fingerprint in sampled or v.by_position[0] == "same" else 1), v
    assert r.judge_calls == judge_env.calls == sum(v.orders for v in verdicts) < 2 * n
    # the flip rate is over the sample's default-first questions: with this judge, every one of them flips
    measured = [v for v in verdicts if v.fingerprint in sampled and v.by_position[0] == "different"]
    flips = get_status(repo.root)["throttle"]["alias"]
    assert (flips["flips"], flips["flip_measured"], flips["flip_rate"]) == (len(measured), len(measured), 1.0)
    assert (
        f"position flips (swap sample): alias 1.000 ({len(measured)}/{len(measured)})" in get_status(repo.root)["text"]
    )
    # a rerun draws the same sample: nothing is asked again, and a fresh copy asks the same orders
    again = copy_of(templates["many"], tmp_path / "again")
    configure(again, "[budget]\nenabled = false", swap_sample=0.3)
    before = judge_env.calls
    review(again.root, ReviewOptions(passes=("alias",)))
    assert judge_env.calls - before == r.judge_calls
    orders = sorted((v.fingerprint, v.orders) for v in verdicts)
    assert sorted((v.fingerprint, v.orders) for v in stored(again)) == orders


# -- reply cache ---------------------------------------------------------------------------------


def forget_verdicts(repo) -> None:
    """Drop the answers (db and journal) but keep the reply cache: the question becomes askable again."""
    sqlite_utils.Database(repo.root / ".knomit" / "judge.db").execute("DELETE FROM verdicts").connection.commit()
    for journal in (repo.root / ".knomit" / "verdicts").glob("*.jsonl"):
        journal.unlink()
    repo.commit("forget verdicts")


def test_identical_prompts_are_served_from_the_reply_cache(pair_repo, judge_env):
    judge_env.responder = lambda req, n: text(DIFFERENT)
    # in the swap sample: both orders asked though the first gave the default, 2 samples each
    first = session(pair_repo, samples=2, swap_sample=1.0).passes["alias"]
    assert first.judge_calls == judge_env.calls == 4
    forget_verdicts(pair_repo)
    again = session(pair_repo, samples=2, swap_sample=1.0).passes["alias"]
    assert (again.judged, again.cached, again.judge_calls) == (1, 0, 0)
    assert judge_env.calls == 4
    [v] = stored(pair_repo)
    assert v.answer == "different" and v.replies == [DIFFERENT] * 4 and v.attempts == 0


def test_only_parsed_replies_are_cached(pair_repo, judge_env):
    judge_env.script([text(DIFFERENT), text("not json")])
    # both orders asked at once: the swap sample
    r = session(pair_repo, swap_sample=1.0).passes["alias"]
    assert (r.unparsed, r.judged, r.judge_calls) == (1, 0, 2)
    db = sqlite_utils.Database(pair_repo.root / ".knomit" / "judge.db")
    [row] = list(db["replies"].rows)
    assert row["text"] == DIFFERENT and row["prompt"] == "alias@2"
    parsed, garbled = judge_env.requests
    prompt = load_prompt("alias")
    # the reply contract in the model's dialect (structured outputs here) is part of the request, hence of the key
    shape = {"format": format_schema(prompt.reply_schema)}
    assert parsed.body["output_config"]["format"]["schema"] == shape["format"]
    assert row["key"] == cache_key("claude-sonnet-5-5", prompt.id, prompt.system, parsed.prompt, 0, tool=shape)
    assert row["key"] != cache_key("claude-sonnet-5-5", prompt.id, prompt.system, parsed.prompt, 0)
    assert row["key"] != cache_key("claude-sonnet-5-5", prompt.id, prompt.system, parsed.prompt, 0, tool=prompt.tool)
    judge_env.responder = lambda req, n: text(DIFFERENT)
    r = session(pair_repo, swap_sample=1.0).passes["alias"]
    assert (r.judged, r.judge_calls) == (1, 1)
    # only the unparsed order is asked again
    assert judge_env.requests[2].prompt == garbled.prompt


# -- concurrency and cost ------------------------------------------------------------------------


def test_concurrency_cap_holds_at_the_server(small_repo, judge_env):
    lock, now, peak = threading.Lock(), [0], [0]
    slow = delay(0.3, text(DIFFERENT))

    def run(req, stop):
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        try:
            return slow.run(req, stop)
        finally:
            with lock:
                now[0] -= 1

    judge_env.responder = lambda req, n: Action("counted", run)
    # two workers, each asking 2 samples x 2 orders at once (the swap sample): only the shared semaphore keeps this at 2
    r = session(small_repo, concurrency=2, samples=2, swap_sample=1.0).passes["alias"]
    assert r.judged == r.offered >= 2 and judge_env.calls == 4 * r.offered
    assert peak[0] == 2


def test_cost_cap_holds_the_rest_back_with_a_note(small_repo, judge_env, monkeypatch):
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-test")
    judge_env.models["claude-test"] = Model(
        "claude-test",
        "sonnet",
        structured=False,
        thinking=("disabled",),
        # a model the Models API lists
        efforts=(),
        thinks=False,
    )
    judge_env.responder = lambda req, n: text(DIFFERENT, input_tokens=100, output_tokens=0)
    configure(
        small_repo,
        '[prices."claude-test"]\ninput_per_mtok = 1000.0\noutput_per_mtok = 0.0',
        model="claude-sonnet-4-5",
        concurrency=1,
        max_cost_usd=0.05,
    )
    r = review(small_repo.root, ReviewOptions(passes=("alias",))).passes["alias"]
    assert r.candidates == 3 and (r.offered, r.judged, r.waiting) == (1, 1, 2)
    # 2 orders x 100 tokens x $1000 per million
    assert r.cost_usd == pytest.approx(0.2)
    assert judge_env.calls == 2 and all(req.body["model"] == "claude-test" for req in judge_env.requests)
    assert "session cost cap $0.05 reached: 2 candidate(s) wait" in r.line()


def test_dry_run_estimates_questions_calls_and_cost_and_calls_nothing(small_repo, judge_env):
    # one order each: the first order's answer is not known yet
    configure(small_repo, samples=3, swap_sample=0.0)
    result, out = cli_review(small_repo, "--dry-run", "--json")
    assert result.exit_code == 0
    alias = out["passes"]["alias"]
    assert alias["state"] == "would-offer" and len(out["plan"]["alias"]) == alias["offered"] == 3
    [note] = [n for n in alias["notes"] if n.startswith("would ask")]
    assert note.startswith("would ask 3 question(s) = 9 call(s), about $")
    assert float(note.rsplit("$", 1)[1]) > 0
    text_out = cli_review(small_repo, "--dry-run")[0].stdout
    assert "would ask 3 question(s) = 9 call(s)" in text_out
    assert judge_env.calls == 0


# -- forced tool use on the real API path --------------------------------------------------------


def test_the_verdict_is_asked_through_one_forced_tool_whose_schema_is_the_contract(pair_repo, judge_env):
    """On a model without structured outputs that can think with thinking off (claude-haiku-4-5): models.py."""
    judge_env.responder = lambda req, n: tool(SAME)
    r = session(pair_repo, model="claude-haiku-4-5").passes["alias"]
    assert (r.judged, r.resolved, r.unparsed) == (1, 1, 0)
    prompt = load_prompt("alias")
    for req in judge_env.requests:
        assert req.body["tools"] == [prompt.tool] and req.body["tool_choice"] == {"type": "tool", "name": "alias_reply"}
        schema = req.body["tools"][0]["input_schema"]
        assert schema["required"] == ["same"] and schema["additionalProperties"] is False
    [v] = stored(pair_repo)
    assert v.answer == "same" and v.rationale == SAME["mechanism"]
    # the raw reply: the tool input as JSON text
    assert [json.loads(x) for x in v.replies] == [SAME, SAME]


@pytest.mark.parametrize(
    "reply, kind",
    [
        # a tool input outside the contract
        (tool({"same": "yes"}), "unparsed"),
        (tool({"same": True, "mechanism": "m", "extra": 1}), "unparsed"),
        # not the forced tool, and no text: no verdict
        (tool(SAME, name="some_other_tool"), "unparsed"),
        # no tool block: the strict text parser reads it, as before
        (text(YES), "verdict"),
    ],
    ids=["wrong-type", "extra-key", "other-tool", "text-only"],
)
def test_tool_replies_are_parsed_as_strictly_as_text(pair_repo, judge_env, reply, kind):
    judge_env.responder = lambda req, n: reply
    r = session(pair_repo, position_swap=False, model="claude-haiku-4-5").passes["alias"]  # the forced-tool dialect
    assert (r.judged, r.unparsed) == ((1, 0) if kind == "verdict" else (0, 1))
