"""The model layer under faults, through the real SDK and the loopback of the API of 2026-12 (issue #44).

1. a Models API answer that is not a model (a proxy's HTML page, `{}`) is "did not answer": the session goes on;
2. a model that retires between two sessions stops the second before it changes anything, saying "retired";
3. a reply with no text (only a thinking block) is remembered like a cut reply: never bought again;
4. a model that thinks only when asked is given no room for thinking, and estimated so;
5. messages name where a setting came from, check retirement before price, give one cause, and name the newest
   active model of the line by created_at;
6. the dry run names every model it cannot price, warns of a first reader dearer than the judge model, and says
   its estimate is a lower bound.
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from helpers import SAME as YES
from helpers import alias, duplicates_corpus, fact_text, git, invoke, make_repo, write_config
from helpers import cli_review as review
from judges import demo_judge
from messages_server import Action, _json_reply, text, thinking_only, tool

from knomit_judge.cli import cli
from knomit_judge.store import Store

NO_LINES = "[describe]\nenabled = false\n"


def head(repo) -> str:
    return git(repo.root, "rev-parse", "HEAD").strip()


# -- 1. a Models API answer that is not a model ---------------------------------------------------------------
@pytest.mark.parametrize("fault", ["html", "{}"])
def test_a_models_api_answer_that_is_no_model_is_no_answer_and_the_session_goes_on(pair_repo, judge_env, fault):
    write_config(pair_repo, NO_LINES + "[judge]\nposition_swap = false\n")
    judge_env.model_faults.extend([fault] * 20)
    judge_env.responder = lambda req, n: tool(YES)
    result = alias(pair_repo, "--json")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    out = json.loads(result.stdout)
    assert any("the Models API did not answer (not a model" in n for n in out["notes"]), out["notes"]
    assert out["passes"]["alias"]["resolved"] == 1 and judge_env.calls == 1
    store = Store.for_corpus(pair_repo.root)
    # nothing kept of an answer that was no model
    assert store.db["models"].count == 0
    store.close()


# -- 2. a retirement between sessions -------------------------------------------------------------------------
def test_a_model_retired_since_the_last_session_stops_the_next_before_any_commit(tmp_path, judge_env):
    repo = make_repo(
        tmp_path / "c",
        {
            "facts/a.md": fact_text("Retries in waves overload the origin", ["waves"]),
            "facts/b.md": fact_text("Cache keys miss on tracking parameters", ["keys"]),
        },
    )
    write_config(repo, NO_LINES)
    judge_env.responder = demo_judge  # every pass's default answer
    first = review(repo)
    # the model read as active, and kept a day
    assert first.exit_code == 0, first.output
    assert judge_env.model_calls.count("claude-sonnet-5-5") == 1
    judge_env.retire("claude-sonnet-5-5")
    shutil.copy(repo.root / "facts/a.md", repo.root / "facts/a-copy.md")  # a new exact duplicate
    repo.commit("a copy")
    before, calls = head(repo), judge_env.calls
    second = review(repo)
    assert second.exit_code == 2, second.output
    assert "judge.model 'claude-sonnet-5-5' is retired" in second.output
    assert "the newest active sonnet model is 'claude-sonnet-4-6'" in second.output
    assert "Traceback" not in second.output
    assert head(repo) == before and git(repo.root, "status", "--porcelain") == ""  # no retraction, no journal
    # not a call paid to learn it
    assert judge_env.calls == calls
    status = json.loads(invoke("status", repo.root, "--json").stdout)
    [judge] = [m for m in status["models"] if m["key"] == "judge.model"]
    assert judge["lifecycle"] == "retired"


def test_a_404_naming_the_model_reads_the_models_api_at_once_and_says_retired(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES + "[judge]\nposition_swap = false\n")
    # reads the model as active; the judge says no
    assert alias(pair_repo).exit_code == 0
    pair_repo.fact(
        "facts/ops/f5.md", "A sanction that blocks self repair keeps the host fenced", motifs=["self-locking-sanction"]
    )
    pair_repo.commit("a new spelling: a question for the judge, and nothing to change before it")
    judge_env.retire("claude-sonnet-5-5")
    before = head(pair_repo)
    result = alias(pair_repo)
    assert result.exit_code == 2, result.output
    assert "judge.model 'claude-sonnet-5-5' is retired" in result.output
    assert "check ANTHROPIC_API_KEY" not in result.output  # one cause: the retirement
    # read again at once after the 404
    assert judge_env.model_calls.count("claude-sonnet-5-5") == 2
    assert head(pair_repo) == before
    calls = judge_env.calls
    # the row now says retired: the next session pays nothing to learn it
    again = alias(pair_repo)
    assert again.exit_code == 2 and "is retired" in again.output and judge_env.calls == calls


def test_a_kept_row_whose_retirement_day_has_passed_is_read_again_at_once(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-haiku-4-5"\n')
    assert alias(pair_repo).exit_code == 0
    store = Store.for_corpus(pair_repo.root)
    # kept an hour ago, deprecated with a retirement day already past
    with store.db.conn:
        store.db.execute("UPDATE models SET info = json_set(info, '$.retires_at', '2026-12-01T00:00:00+00:00')")
    store.close()
    judge_env.retire("claude-haiku-4-5")
    result = alias(pair_repo)
    assert result.exit_code == 2 and "judge.model 'claude-haiku-4-5' is retired" in result.output
    assert judge_env.model_calls.count("claude-haiku-4-5") == 2


def test_a_judge_that_is_down_still_gets_its_exact_duplicates_retracted(tmp_path, judge_env):
    repo = duplicates_corpus(tmp_path)
    write_config(repo, NO_LINES + "[judge]\nmax_attempts = 1\nbackoff_s = 0.0\n")
    # the Models API down too: nothing says the model is gone
    judge_env.model_faults.extend([503] * 20)
    judge_env.responder = lambda req, n: Action(
        "down", lambda r, s: _json_reply(500, {"type": "error", "error": {"type": "api_error", "message": "down"}})
    )
    before = head(repo)
    result = review(repo, "--json")
    assert result.exit_code in (0, 1), result.output
    assert any(s.startswith("exact:") for s in git(repo.root, "log", "--format=%s", f"{before}..").splitlines())


# -- 3. a reply with no text ----------------------------------------------------------------------------------
def test_a_reply_that_is_only_a_thinking_block_is_remembered_and_not_bought_again(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES + "[judge]\nposition_swap = false\n")
    judge_env.responder = lambda req, n: thinking_only()
    first = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    assert (first["unparsed"], first["judge_calls"], first["state"]) == (1, 1, "broken")
    assert "held no text to read" in first["first_error"] and "not asked again" in first["first_error"]
    # billed: which is why it must not be bought again
    assert first["cost_usd"] > 0
    calls = judge_env.calls
    second = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    assert judge_env.calls == calls and second["judge_calls"] == 0 and second["cost_usd"] == 0
    pair_repo.fact(
        "facts/ops/f1.md",
        "A penalty that blocks its own recovery latches the whole system off",
        motifs=["penalty-blocks-own-recovery"],
    )
    pair_repo.commit("the question changes")
    judge_env.responder = lambda req, n: tool(YES)
    third = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    # asked again once its facts changed
    assert third["judge_calls"] >= 1 and third["resolved"] == 1


# -- 4. thinking counted where it happens ---------------------------------------------------------------------
def measured(answer: dict):
    """A reply billed as the dry run estimates a call: the prompt's characters / 4 in, 60 tokens out."""

    def respond(req, n):
        return tool(answer, input_tokens=(len(req.system) + len(req.prompt)) // 4, output_tokens=60)

    return respond


# claude-opus-4-5 on purpose (a model that thinks only when asked): the SDK warns that it is deprecated
@pytest.mark.filterwarnings("ignore:The model 'claude-opus-4-5' is deprecated:DeprecationWarning")
def test_a_model_that_thinks_only_when_asked_gets_no_thinking_room_and_is_estimated_so(tmp_path, judge_env):
    from helpers import TEMPLATES

    repo = make_repo(tmp_path / "c", TEMPLATES["many"])
    write_config(
        repo,
        NO_LINES + '[judge]\nmodel = "claude-opus-4-5"\nposition_swap = false\n'
        # every offer is read: estimate vs spend
        "[budget]\nenabled = false\n",
    )
    judge_env.responder = measured({"same": False, "mechanism": ""})
    dry = json.loads(alias(repo, "--dry-run", "--json").stdout)
    estimate = dry["passes"]["alias"]["estimate_usd"]
    out = json.loads(alias(repo, "--json").stdout)["passes"]["alias"]
    assert judge_env.rejected == [] and out["judge_calls"] == dry["passes"]["alias"]["offered"] > 0
    # thinking is off unless asked, and we do not ask: no room for it
    for req in judge_env.requests:
        assert req.body["max_tokens"] == 400 and "thinking" not in req.body and req.thinking is None
    # not 7.9 times what the session spends
    assert estimate == pytest.approx(out["cost_usd"], rel=0.25)


# claude-opus-4-5 on purpose (a model that thinks only when asked): the SDK warns that it is deprecated
@pytest.mark.filterwarnings("ignore:The model 'claude-opus-4-5' is deprecated:DeprecationWarning")
def test_the_caps_bound_of_a_call_of_unknown_cost_counts_no_thinking_where_there_is_none(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-opus-4-5"\nposition_swap = false\n')
    judge_env.responder = lambda req, n: text(json.dumps({"same": False, "mechanism": ""}), usage=False)
    out = json.loads(alias(pair_repo, "--json").stdout)["passes"]["alias"]
    [req] = judge_env.requests
    # unknown: counted at its bound, a token a prompt byte in and max_tokens out
    assert out["cost_usd"] is None
    prompt_bytes = len(req.system.encode()) + len(req.prompt.encode())
    assert out["charged_usd"] == pytest.approx((prompt_bytes * 5.0 + 400 * 25.0) / 1e6, abs=1e-6)


def test_an_effort_the_model_does_not_list_is_not_counted_as_high():
    from knomit_judge.models import ModelInfo, dialect

    adaptive_no_levels = ModelInfo("m", "active", structured=True, thinking=["adaptive"], efforts=[])
    d = dialect(adaptive_no_levels, "low")
    assert d.effort is None and d.max_tokens(400) == 400 + 4_000 and d.expected_out(60) == 60 + 300
    # nothing known: the plain request, its thinking counted at judge.effort
    unknown = dialect(None, "medium")
    assert unknown.max_tokens(400) == 400 + 8_000


# -- 5. messages: where a setting came from, retirement before price, one cause, the newest of the line ---------
def test_a_retired_model_set_in_the_environment_is_said_to_be_set_there(pair_repo, judge_env, monkeypatch):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-sonnet-5-5"\n')  # a correct file
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-sonnet-4-5")
    result = alias(pair_repo)
    assert result.exit_code == 2 and "judge.model 'claude-sonnet-4-5' is retired" in result.output
    assert "set it in the environment (KNOMIT_JUDGE_MODEL" in result.output
    assert "knomit-judge.toml (docs" not in result.output and "set it in knomit-judge.toml" not in result.output


def test_calibrate_with_a_retired_model_says_retired_not_no_price(pair_repo, judge_env, tmp_path):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-sonnet-4-5"\n')  # retired, so unpriced too
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty", "label": True})
        + "\n"
    )
    result = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(pair_repo.root)])
    assert result.exit_code == 2 and "judge.model 'claude-sonnet-4-5' is retired" in result.output
    assert "no price" not in result.output and judge_env.calls == 0


def test_calibrate_after_a_retirement_since_the_model_was_read_says_retired(pair_repo, judge_env, tmp_path):
    write_config(pair_repo, NO_LINES)
    # the model read as active, and kept a day
    assert alias(pair_repo).exit_code == 0
    judge_env.retire("claude-sonnet-5-5")
    # a prune question: never asked, so calibrate calls the model
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({"pass": "prune", "a": "facts/ops/f1.md", "b": "facts/ops/f3.md", "label": "distinct"}) + "\n"
    )
    result = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(pair_repo.root)])
    assert result.exit_code == 2 and "judge.model 'claude-sonnet-5-5' is retired" in result.output
    assert "check ANTHROPIC_API_KEY" not in result.output and "Traceback" not in result.output


def test_a_dry_run_with_a_retired_model_gives_one_cause(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-sonnet-4-5"\n')
    result = alias(pair_repo, "--dry-run")
    assert "a real session exits 2: judge.model 'claude-sonnet-4-5' is retired" in result.output
    assert "no price" not in result.output
    assert "unknown (a real session exits 2 before it asks" in result.stdout.splitlines()[0]


def test_the_replacement_named_is_the_newest_active_model_of_its_line_by_created_at(pair_repo, judge_env):
    # the listing in catalogue order, the older sonnet first
    judge_env.newest_first = False
    judge_env.models = {
        m: judge_env.models[m] for m in sorted(judge_env.models, key=lambda m: m != "claude-sonnet-4-6")
    }
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-sonnet-4-5"\n')
    result = alias(pair_repo)
    assert result.exit_code == 2 and "the newest active sonnet model is 'claude-sonnet-5-5'" in result.output


# -- 6. the dry run's money -----------------------------------------------------------------------------------
def test_a_dry_run_without_a_key_names_an_unpriced_first_reader_and_what_a_session_would_do(
    pair_repo, judge_env, monkeypatch
):
    write_config(pair_repo, NO_LINES)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("KNOMIT_JUDGE_FIRST_READER", "claude-unpriced-9")
    result = alias(pair_repo, "--dry-run")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert (
        "unknown (no price for the model): judge.first_reader 'claude-unpriced-9' has none, so a real session "
        "exits 2" in first
    )
    assert "note: no price for judge.first_reader 'claude-unpriced-9': a real session exits 2" in result.stdout
    assert "KNOMIT_JUDGE_FIRST_READER" in result.stdout  # where it was set
    assert judge_env.calls == 0


def test_a_first_reader_dearer_than_the_judge_model_is_warned_of_naming_both(pair_repo, judge_env, monkeypatch):
    write_config(pair_repo, NO_LINES + '[judge]\nmodel = "claude-haiku-5-5"\n')
    monkeypatch.setenv("KNOMIT_JUDGE_FIRST_READER", "claude-opus-5-5")
    out = json.loads(alias(pair_repo, "--dry-run", "--json").stdout)
    assert any(
        "judge.first_reader 'claude-opus-5-5' costs more than judge.model 'claude-haiku-5-5'" in n for n in out["notes"]
    ), out["notes"]


def test_the_dry_run_says_its_estimate_is_the_first_round_and_a_lower_bound(pair_repo, judge_env):
    write_config(pair_repo, NO_LINES)
    out = json.loads(alias(pair_repo, "--dry-run", "--json").stdout)
    assert out["estimate_usd"] > 0
    assert any("covers the first round only" in n and "lower bound" in n for n in out["notes"]), out["notes"]


def test_the_dry_run_gives_the_last_sessions_questions_over_all_rounds_per_first_round_question(tmp_path, judge_env):
    from helpers import SMALL

    repo = make_repo(tmp_path / "c", SMALL)
    write_config(repo, NO_LINES + "[judge]\nposition_swap = false\n")
    planted = lambda req: "self-locking-penalty" in req.prompt and "penalty-blocks-own-recovery" in req.prompt  # noqa
    judge_env.responder = lambda req, n: tool(YES) if planted(req) else demo_judge(req, n)
    first = json.loads(review(repo, "--pass", "alias", "--json").stdout)["passes"]["alias"]
    # a merge: its carriers changed, so a later round had new questions to ask
    assert first["resolved"] == 1
    store = Store.for_corpus(repo.root)
    [stored] = store.sessions(1)
    store.close()
    asked, in_round_one = stored["passes"]["alias"]["offered"], stored["passes"]["alias"]["first_round"]
    assert asked > in_round_one >= 1
    repo.fact(
        "facts/ops/f9.md",
        "Backpressure that stops the metrics feed keeps the breaker open",
        motifs=["signal-starving-breaker"],
    )
    repo.commit("a new spelling")
    dry = json.loads(review(repo, "--pass", "alias", "--dry-run", "--json").stdout)
    [note] = [n for n in dry["notes"] if "covers the first round only" in n]
    assert f"the last sessions asked {asked / in_round_one:.2f} question(s) over all rounds" in note
    assert f"({asked} for {in_round_one})" in note
