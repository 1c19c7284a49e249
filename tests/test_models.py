"""The models of today through the real SDK: lifecycles from the Models API, the dialect each model accepts,
thinking, refusals, a reply cut at max_tokens, cost with thinking, and a move between models that re-buys nothing.

The loopback (messages_server.py) speaks the API of December 2026: a Models API with lifecycles and capabilities,
404 for a retired model, 400 for sampling parameters on a 5.5 model and for a forced tool while the model thinks,
thinking blocks before the answer, structured outputs and refusals. `era="2025"` keeps the API of then.
"""

from __future__ import annotations

import json
import re

import anthropic
import pytest
from helpers import DEMO, alias, demo_repo, duplicates_corpus, git, invoke, tree_digest, write_config
from helpers import cli_review as review
from judges import DEMO_REPLIES, demo_judge
from messages_server import MessagesServer, cut_off, refusal, tool

from knomit_judge.config import load_config
from knomit_judge.models import format_schema, nearest
from knomit_judge.prompts import load_prompt
from knomit_judge.store import Store

KEY = "sk-ant-test-FAKEKEY-0123456789"
PLANTED = [(e["a"], e["b"]) for e in DEMO_REPLIES if e["pass"] == "alias" and e["reply"]["same"]]


def test_a_fresh_corpus_with_no_model_named_runs_on_todays_api_and_merges_the_planted_aliases(
    tmp_path, judge_env, monkeypatch
):
    # the defaults, the first reader's included
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    repo = demo_repo(tmp_path / "demo")
    assert invoke("-q", "init", repo.root).exit_code == 0
    git(repo.root, "add", "-A")
    repo.commit("init")
    judge_env.responder = demo_judge
    result = review(repo, "--json")
    assert result.exit_code == 0, result.output
    # not one request the API of today refuses
    assert judge_env.rejected == []
    questions, lines = judge_env.requests, judge_env.describe_requests
    assert questions and lines
    # judge.first_reader's default reads every question; judge.model's decides the yeses and audits the top no's
    assert {r.body["model"] for r in questions} == {"claude-haiku-5-5", "claude-sonnet-5-5"}
    # describe.model's: the cheapest current one
    assert {r.body["model"] for r in lines} == {"claude-haiku-5-5"}
    for r in questions + lines:
        # structured outputs (they hold while the model thinks), at judge.effort; no forced tool, no sampling
        assert r.body["output_config"]["format"]["type"] == "json_schema"
        assert r.body["output_config"]["effort"] == "low"
        assert not {"tools", "tool_choice", "temperature", "top_p", "top_k", "thinking"} & set(r.body)
        # room for thinking over the answer's 400
        assert r.body["max_tokens"] > 400
    assert set(judge_env.model_calls) >= {"claude-sonnet-5-5", "claude-haiku-5-5"}  # each model's lifecycle read
    merged = git(repo.root, "log", "--grep=^alias: merge", "--format=%s").splitlines()
    assert len(merged) == len(PLANTED) == 3
    for a, b in PLANTED:
        assert any(a in s and b in s for s in merged), (a, b, merged)


def test_a_retired_model_exits_2_before_any_change_naming_its_day_and_replacement(tmp_path, judge_env):
    # holds exact duplicates: a session that started would retract them
    repo = duplicates_corpus(tmp_path)
    write_config(repo, '[judge]\nmodel = "claude-sonnet-4-5"\n')
    before = (tree_digest(repo.root / "facts"), git(repo.root, "rev-parse", "HEAD"))
    result = review(repo)
    assert result.exit_code == 2
    assert "judge.model 'claude-sonnet-4-5' is retired (since 2026-11-30)" in result.output
    assert "the newest active sonnet model is 'claude-sonnet-5-5'" in result.output
    assert "Traceback" not in result.output
    # no retraction, no commit, nothing to commit: only the db's derived row of what the Models API said
    assert (tree_digest(repo.root / "facts"), git(repo.root, "rev-parse", "HEAD")) == before
    assert git(repo.root, "status", "--porcelain") == ""
    assert judge_env.calls == 0 and judge_env.describe_requests == []
    store = Store.for_corpus(repo.root)
    assert store.db["verdicts"].count == 0 and store.db["sessions"].count == 0
    store.close()


def test_a_retired_describe_model_and_an_unknown_model_exit_2_too(tmp_path, judge_env):
    repo = duplicates_corpus(tmp_path)
    write_config(repo, '[describe]\nmodel = "claude-sonnet-4-5"\n')
    head = git(repo.root, "rev-parse", "HEAD").strip()
    result = review(repo)
    assert result.exit_code == 2 and "describe.model 'claude-sonnet-4-5' is retired" in result.output
    write_config(
        repo,
        '[judge]\nmodel = "claude-nonesuch-9"\n[prices."claude-nonesuch-9"]\n'
        "input_per_mtok = 1.0\noutput_per_mtok = 1.0\n",
    )
    result = review(repo)
    assert result.exit_code == 2 and "'claude-nonesuch-9' is unknown to the Models API" in result.output
    assert judge_env.calls == 0 and git(repo.root, "log", "--format=%s", f"{head}..").splitlines() == ["config"]


YES = {"same": True, "mechanism": "A penalty removes the signal needed to lift it."}


def test_an_always_thinking_model_works_and_its_thinking_is_paid_as_output(pair_repo, judge_env):
    write_config(pair_repo, '[judge]\nmodel = "claude-opus-5-5"\nposition_swap = false\n[describe]\nenabled = false\n')
    judge_env.thinking_tokens = 250
    judge_env.responder = lambda req, n: tool(YES, input_tokens=1000, output_tokens=30)
    out = json.loads(alias(pair_repo, "--json").stdout)
    assert judge_env.rejected == []
    [req] = judge_env.requests
    # opus 5.5 always thinks: no forced tool
    assert "thinking" not in req.body and "tool_choice" not in req.body
    # the answer read past the thinking block that came first
    assert out["passes"]["alias"]["resolved"] == 1
    # $4 / $20 per million; the 30 output tokens of the answer and the 250 of thinking, as the API reports them
    assert out["passes"]["alias"]["cost_usd"] == pytest.approx((1000 * 4 + 280 * 20) / 1e6)
    store = Store.for_corpus(pair_repo.root)
    [v] = [v for v in store.verdicts("alias")]
    assert (v.tokens_in, v.tokens_out) == (1000, 280) and v.replies == [json.dumps(YES)]
    store.close()


def test_a_deprecated_model_is_asked_with_a_forced_tool_and_its_retirement_day_is_everywhere(
    pair_repo, judge_env, tmp_path
):
    prom = tmp_path / "judge.prom"
    write_config(pair_repo, '[judge]\nmodel = "claude-haiku-4-5"\n[describe]\nenabled = false\n')
    judge_env.responder = lambda req, n: tool(YES)
    result = alias(pair_repo, "--json", "--metrics-file", prom)
    assert result.exit_code == 0, result.output
    assert judge_env.rejected == []
    # no structured outputs on this model: the tool, forced, with thinking off
    for req in judge_env.requests:
        assert req.body["tool_choice"] == {"type": "tool", "name": "alias_reply"}
        assert req.body["thinking"] == {"type": "disabled"} and "output_config" not in req.body
        # no thinking, no room for it
        assert req.body["max_tokens"] == 400
    note = next(n for n in json.loads(result.stdout)["notes"] if "deprecated" in n)
    assert "judge.model 'claude-haiku-4-5' is deprecated: it retires on 2027-02-15" in note
    assert "the newest active haiku is 'claude-haiku-5-5'" in note
    status = json.loads(invoke("status", pair_repo.root, "--json").stdout)
    [judge] = [m for m in status["models"] if m["key"] == "judge.model"]
    assert (judge["model"], judge["lifecycle"], judge["retires_at"][:10]) == (
        "claude-haiku-4-5",
        "deprecated",
        "2027-02-15",
    )
    assert any(
        "judge.model claude-haiku-4-5: deprecated, retires on 2027-02-15" in line
        for line in invoke("status", pair_repo.root).stdout.splitlines()
    )
    metric = re.search(
        r'knomit_judge_model_retires_timestamp_seconds\{[^}]*key="judge.model",'
        r'model="claude-haiku-4-5"\} (\S+)',
        prom.read_text(),
    )
    assert metric and float(metric.group(1)) == 1802649600.0  # 2027-02-15T00:00:00Z


def test_a_refused_question_costs_one_call_a_session_and_does_nothing(tmp_path, judge_env):
    from helpers import fact_text, make_repo

    # ten pairs of look-alike spellings: some fall in the swap sample, which must not cost a second call
    repo = make_repo(
        tmp_path / "c",
        {
            f"facts/f{i}{s}.md": fact_text(f"Loop {i} kind {s}", [f"loop-{i}-{s}"])
            for i in range(10)
            for s in ("a", "b")
        },
    )
    write_config(repo, "[describe]\nenabled = false\n[budget]\noptimistic_cap = 100\n")
    judge_env.responder = lambda req, n: refusal()
    first = json.loads(review(repo, "--json").stdout)["passes"]["alias"]
    assert first["refused"] == first["offered"] > 0
    # one call each, swap sample or not
    assert first["judge_calls"] == first["offered"]
    assert first["resolved"] == 0 and "declined to answer" in first["first_error"]
    assert first["cost_usd"] == pytest.approx(first["offered"] * (100 * 2 + 5 * 10) / 1e6)  # a refusal is billed
    calls = judge_env.calls
    second = json.loads(review(repo, "--json").stdout)["passes"]["alias"]
    # not asked again while the question stands
    assert judge_env.calls == calls and second["judge_calls"] == 0
    assert git(repo.root, "log", "--format=%s").splitlines()[0] == "config"  # nothing acted


def test_a_reply_cut_at_max_tokens_is_unparsed_named_and_never_asked_in_a_loop(pair_repo, judge_env):
    write_config(pair_repo, "[describe]\nenabled = false\n")
    judge_env.responder = lambda req, n: cut_off()
    first = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    assert (first["unparsed"], first["judge_calls"], first["state"]) == (1, 1, "broken")
    assert "stopped at max_tokens" in first["first_error"]
    calls = judge_env.calls
    second = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    assert judge_env.calls == calls and second["judge_calls"] == 0


def test_a_models_api_that_does_not_answer_never_stops_a_session(pair_repo, judge_env):
    write_config(pair_repo, "[describe]\nenabled = false\n[judge]\nposition_swap = false\n")
    judge_env.model_faults.extend([500] * 20)
    judge_env.responder = lambda req, n: tool(YES)
    result = alias(pair_repo, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert any("the Models API did not answer (HTTP 500)" in n and "plain dialect" in n for n in out["notes"])
    assert judge_env.rejected == [] and out["passes"]["alias"]["resolved"] == 1
    # nothing known of the model: the plain request every model accepts
    [req] = judge_env.requests
    assert not {"output_config", "tools", "tool_choice", "thinking"} & set(req.body)


def test_what_was_read_is_kept_a_day_and_used_when_the_api_is_down(pair_repo, judge_env):
    write_config(pair_repo, "[describe]\nenabled = false\n[judge]\nposition_swap = false\n")
    assert alias(pair_repo).exit_code == 0
    assert judge_env.model_calls.count("claude-sonnet-5-5") == 1
    alias(pair_repo)
    # read within the day: not asked again
    assert judge_env.model_calls.count("claude-sonnet-5-5") == 1
    store = Store.for_corpus(pair_repo.root)
    # read a year ago: the next session reads it again
    with store.db.conn:
        store.db.execute(
            "UPDATE models SET fetched_at = '2026-01-01T00:00:00+00:00', "
            "info = json_set(info, '$.fetched_at', '2026-01-01T00:00:00+00:00')"
        )
    store.close()
    judge_env.model_faults.extend([503] * 20)
    pair_repo.fact(
        "facts/ops/f5.md", "A sanction that blocks self repair keeps the host fenced", motifs=["self-locking-sanction"]
    )
    pair_repo.commit("new spelling")
    out = json.loads(alias(pair_repo, "--json").stdout)
    assert any(
        "did not answer (HTTP 503): going on with what was known of claude-sonnet-5-5" in n for n in out["notes"]
    ), out["notes"]
    asked = [r for r in judge_env.requests if "self-locking-sanction" in r.prompt]
    assert asked and all("format" in r.body["output_config"] for r in asked)  # the dialect it knew


def test_moving_from_a_retiring_model_to_a_current_one_rebuys_no_verdict(pair_repo, judge_env):
    # the lines stay bound to describe.model, which does not move here
    lines = "[describe]\nenabled = false\n"
    write_config(pair_repo, '[judge]\nmodel = "claude-haiku-4-5"\n' + lines)
    judge_env.responder = lambda req, n: tool({"same": False, "mechanism": ""})
    first = json.loads(alias(pair_repo, "--json").stdout)
    assert first["passes"]["alias"]["judged"] == 1
    calls = judge_env.calls
    # the one-line move of docs/real-api.md
    write_config(pair_repo, '[judge]\nmodel = "claude-sonnet-5-5"\n' + lines)
    dry = json.loads(alias(pair_repo, "--dry-run", "--json").stdout)
    assert dry["passes"]["alias"]["estimate_usd"] == 0.0 and dry["passes"]["alias"]["state"] == "caught-up"
    second = json.loads(alias(pair_repo, "--json").stdout)
    assert second["passes"]["alias"]["state"] == "caught-up" and second["passes"]["alias"]["cached"] == 1
    assert judge_env.calls == calls  # no verdict bought again


def test_effort_is_sent_only_at_a_level_the_model_takes():
    # sonnet 4.6 lists no xhigh
    assert nearest("xhigh", ["low", "medium", "high", "max"]) == "high"
    assert nearest("low", ["medium", "high"]) == "medium"
    assert nearest("low", []) is None


def test_effort_setting_reaches_the_request_and_a_wrong_one_is_named(pair_repo, judge_env):
    write_config(pair_repo, '[judge]\neffort = "xhigh"\nmodel = "claude-sonnet-4-6"\n[describe]\nenabled = false\n')
    assert alias(pair_repo).exit_code == 0
    assert {r.body["output_config"]["effort"] for r in judge_env.requests} == {"high"}
    assert judge_env.rejected == []
    write_config(pair_repo, '[judge]\neffort = "extreme"\n')
    result = alias(pair_repo)
    assert result.exit_code == 2 and "judge.effort: 'extreme' is not one of" in result.output


def test_the_prune_contract_as_structured_outputs_take_it_and_the_parser_still_enforces_if_then_else():
    schema = load_prompt("prune").reply_schema
    sent = format_schema(schema)
    assert not {"if", "then", "else"} & set(sent) and sent["additionalProperties"] is False
    from knomit_judge.errors import Unparsed
    from knomit_judge.passes.prune import PrunePass

    # what `then` said: a retract names the redundant fact
    with pytest.raises(Unparsed):
        PrunePass().parse(json.dumps({"decision": "retract", "rationale": "B is in A."}))


def test_the_loopback_refuses_what_the_api_of_today_refuses():
    """The loopback is what makes the tests above able to fail: it says no where the API says no."""
    with MessagesServer() as server:
        client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=10)
        msg = [{"role": "user", "content": "hi"}]
        forced = {
            "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "t"},
        }
        cases = [
            (dict(model="claude-sonnet-5-5", temperature=0.0), 400, "temperature"),
            (dict(model="claude-haiku-5-5", **forced), 400, "Thinking may not be enabled"),
            (dict(model="claude-sonnet-5-5", thinking={"type": "disabled"}), 400, "thinking.type"),
            (dict(model="claude-sonnet-5-5", thinking={"type": "between_tools"}, **forced), 400, "forced tool"),
            (dict(model="claude-sonnet-4-5"), 404, "model"),
            (
                dict(
                    model="claude-opus-5-5",
                    output_config={"format": {"type": "json_schema", "schema": {"type": "object", "if": {}}}},
                ),
                400,
                "'if'",
            ),
        ]
        for kwargs, code, why in cases:
            # the SDK no longer takes it
            sampling = {k: kwargs.pop(k) for k in ("temperature",) if k in kwargs}
            with pytest.raises(anthropic.APIStatusError) as e:
                client.messages.create(max_tokens=10, messages=msg, extra_body=sampling, **kwargs)
            assert e.value.status_code == code and why in str(e.value), kwargs
        ok = client.messages.create(
            model="claude-haiku-5-5",
            max_tokens=10,
            messages=msg,
            # thinking off: a tool can be forced
            thinking={"type": "disabled"},
            **forced,
        )
        assert ok.content[0].type == "text" or ok.content[0].type == "tool_use"
        info = client.models.retrieve("claude-sonnet-4-5")
        assert (info.lifecycle, info.line, info.retires_at.date().isoformat()) == ("retired", "sonnet", "2026-11-30")
        assert info.capabilities.structured_outputs.supported is False
        assert [m.id for m in client.models.list() if m.line == "sonnet"][0] == "claude-sonnet-5-5"


def test_the_2025_api_is_one_mode_of_the_loopback(tmp_path, monkeypatch):
    """An API with no lifecycle nor capabilities in its Models API: the plain request, and it works."""
    from helpers import SMALL, make_repo

    with MessagesServer(era="2025") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.delenv("KNOMIT_JUDGE_MODEL", raising=False)
        # claude-haiku-5-5 did not exist in 2025
        monkeypatch.setenv("KNOMIT_JUDGE_FIRST_READER", "")
        repo = make_repo(tmp_path / "c", {p: SMALL[p] for p in ("facts/ops/f1.md", "facts/ops/f3.md")})
        write_config(
            repo,
            '[judge]\nmodel = "claude-sonnet-4-5"\n[prices."claude-sonnet-4-5"]\n'
            "input_per_mtok = 3.0\noutput_per_mtok = 15.0\n[describe]\nenabled = false\n",
        )
        server.responder = lambda req, n: tool(YES)
        result = alias(repo, "--json")
        assert result.exit_code == 0, result.output
        assert server.rejected == [] and json.loads(result.stdout)["passes"]["alias"]["resolved"] == 1
        assert not {"output_config", "tool_choice", "thinking"} & set(server.requests[0].body)


def test_the_config_names_no_retired_model_and_prices_only_current_ones():
    config = load_config(DEMO)
    assert config.judge.model == "claude-sonnet-5-5" and config.describe.model == "claude-haiku-5-5"
    # retired: not priced as if it could be called
    assert config.price("claude-sonnet-4-5") is None
    haiku = config.price("claude-haiku-5-5")
    assert haiku.usd(100_000, 1000) == pytest.approx((100_000 * 0.10 + 1000 * 0.50) / 1e6)
    assert haiku.usd(100_001, 1000) == pytest.approx((100_001 * 0.50 + 1000 * 2.50) / 1e6)  # the tier above 100k
