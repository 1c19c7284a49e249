"""knomit-judge.toml: every key validated by name (exit 2 before any work); the environment wins over the file."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from typing import get_args

import pytest
from click.testing import CliRunner
from helpers import SMALL, make_repo, write_config

from knomit_judge.cli import cli
from knomit_judge.config import (
    DEFAULT_TOML,
    RETIRED,
    ApplyMode,
    Config,
    Effort,
    FrontMatter,
    JudgeMode,
    RetractMode,
    load_config,
    parse_config,
    retired_model,
)
from knomit_judge.docgen import type_name
from knomit_judge.errors import ConfigError
from knomit_judge.throttle import terms


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory):
    """One corpus for all the bad-config cases: each rejected before it is read, so none changes it."""
    return make_repo(tmp_path_factory.mktemp("config") / "corpus", SMALL)


def review_cli(root):
    return CliRunner().invoke(cli, ["-q", "review", str(root), "--pass", "alias"], catch_exceptions=False)


@pytest.mark.parametrize(
    "toml, key, why",
    [
        ("[budget]\npatiance = 3\n", "budget.patiance", "unknown key"),
        ("[budgets]\npatience = 3\n", "budgets", "unknown section"),
        ('[budget]\npatience = "8"\n', "budget.patience", "expected int, got str"),
        ("[budget]\nenabled = 1\n", "budget.enabled", "expected bool, got int"),
        ("[budget]\npatience = true\n", "budget.patience", "expected int, got bool"),
        ("[judge]\nmodel = 4\n", "judge.model", "expected str"),
        ("[budget]\nprobe_every = 0\n", "budget.probe_every", "0 is out of range (must be at least 1)"),
        ("[budget]\nunproven_allowance = 0\n", "budget.unproven_allowance", "out of range"),  # would latch off
        ("[budget]\noptimistic_cap = -1\n", "budget.optimistic_cap", "out of range"),
        ("[judge]\nmin_agreement = 1.5\n", "judge.min_agreement", "1.5 is out of range (must be from 0 to 1)"),
        ('[prices."claude-x"]\ninput_per_mtok = 1.0\n', 'prices."claude-x".output_per_mtok', "required"),
        ('[schedule]\ncron = "0 3 * *"\n', "schedule.cron", "4 fields"),
        ('[schedule]\ncron = "0 25 * * *"\n', "schedule.cron", "higher than the maximum"),
        ("[budget\n", "knomit-judge.toml", "Expected ']'"),
        ('[judge]\nmode = "bulk"\n', "judge.mode", "not one of sync, batch"),
        ("[judge]\nmax_evidence_chars = 10\n", "judge.max_evidence_chars", "out of range"),
        (
            '[prices."claude-x"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\nbatch_discount = 1.0\n',
            'prices."claude-x".batch_discount',
            "out of range",
        ),
        # a negative price made the estimate negative, and the cost cap never stopped a session
        (
            '[prices."claude-sonnet-4-5"]\ninput_per_mtok = -3.0\noutput_per_mtok = 15.0\n',
            'prices."claude-sonnet-4-5".input_per_mtok',
            "must not be negative",
        ),
        (
            '[prices."claude-x"]\ninput_per_mtok = 1.0\noutput_per_mtok = -0.5\n',
            'prices."claude-x".output_per_mtok',
            "must not be negative",
        ),
        ('[judge]\nmodel = ""\n', "judge.model", "must name a model"),
        ('[judge]\nmodel = "  "\n', "judge.model", "must name a model"),
    ],
)
def test_bad_config_exits_2_naming_the_key_before_any_call(shared_repo, judge_env, toml, key, why):
    write_config(shared_repo, toml)
    head = shared_repo.log()
    result = review_cli(shared_repo.root)
    assert result.exit_code == 2
    assert key in result.stderr and why in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert judge_env.calls == 0 and shared_repo.log() == head


def test_environment_model_wins_over_the_file(corpus_repo, judge_env, monkeypatch):
    write_config(corpus_repo, '[judge]\nmodel = "claude-sonnet-4"\nbackoff_s = 0.0\n')
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-haiku-4-5")
    result = review_cli(corpus_repo.root)
    assert result.exit_code == 0, result.output
    assert judge_env.calls > 0
    assert {r.body["model"] for r in judge_env.requests} == {"claude-haiku-4-5"}
    out = CliRunner().invoke(cli, ["verdicts", str(corpus_repo.root), "--json"]).stdout
    assert '"model": "claude-haiku-4-5"' in out and "claude-sonnet-4" not in out


def test_the_written_config_is_the_defaults_and_documents_every_key():
    assert parse_config(tomllib.loads(DEFAULT_TOML)) == Config()
    for section in dataclasses.fields(Config):
        # the models' prices; what the file set that is ignored
        if section.name in ("prices", "ignored"):
            continue
        assert f"[{section.name}]" in DEFAULT_TOML
        for key in dataclasses.fields(section.default_factory()):
            # accepted so older files load; not written
            if f"{section.name}.{key.name}" in RETIRED:
                assert f"\n{key.name} = " not in DEFAULT_TOML
                continue
            assert f"\n{key.name} = " in DEFAULT_TOML, f"{section.name}.{key.name} missing from DEFAULT_TOML"


def test_a_retired_model_named_without_a_key_is_called_retired_not_unpriced(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-sonnet-4-5")
    repo = make_repo(tmp_path / "c", SMALL)
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--dry-run", "--pass", "alias"])
    assert result.exit_code == 0, result.output
    assert (
        "judge.model 'claude-sonnet-4-5' is retired (since 2026-11-30): no request naming it can succeed; its "
        "line's current model is 'claude-sonnet-5-5'; a real session exits 2 until a current model is named in "
        "the environment (KNOMIT_JUDGE_MODEL"
    ) in result.stdout
    assert "no price for judge.model 'claude-sonnet-4-5'" not in result.stdout
    # a dated id of it too; a current model whose name a retired one starts (claude-opus-4-5) is not retired
    assert retired_model("claude-sonnet-4-5-20250929") and retired_model("claude-opus-4-5") is None
    assert retired_model("claude-sonnet-5-5") is None
    with pytest.raises(ConfigError, match="judge.model 'claude-sonnet-4-5' is retired"):
        Config().require_price("claude-sonnet-4-5")


def strict(text: str):
    """JSON as a strict parser reads it (jq, JavaScript): NaN and Infinity are not JSON."""

    def refuse(constant: str):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# A NaN price turned off every dollar cap (NaN passes no comparison: a $0.002 cap, 215 calls, exit 0, `NaN` in
# --json); inf or 1e308 in the balance crashed status, the dry run and the metrics with an OverflowError.
@pytest.mark.parametrize(
    "toml, key, value",
    [
        (
            '[judge]\nmax_cost_usd = 0.002\n[prices."claude-sonnet-5-5"]\ninput_per_mtok = nan\noutput_per_mtok = 10.0\n',
            'prices."claude-sonnet-5-5".input_per_mtok',
            "nan",
        ),
        ("[judge]\nmax_cost_usd = nan\n", "judge.max_cost_usd", "nan"),
        ("[budget]\nopening_usd = inf\n", "budget.opening_usd", "inf"),
        ("[budget]\nopening_usd = 1e308\n", "budget.opening_usd", "1e+308"),
        ("[budget]\nusd_per_resolution = 1e308\n", "budget.usd_per_resolution", "1e+308"),
        ("[budget]\nmax_usd_per_month = -inf\n", "budget.max_usd_per_month", "-inf"),
        ("[budget]\noptimistic_cap = 9223372036854775807\n", "budget.optimistic_cap", "9223372036854775807"),
        # a price of nothing at all: the balance divided by it crashed status (ZeroDivisionError)
        (
            '[prices."claude-sonnet-5-5"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n',
            'prices."claude-sonnet-5-5"',
            "both 0",
        ),
    ],
)
def test_a_number_not_finite_or_out_of_range_exits_2_naming_the_key_the_file_and_the_value(
    shared_repo, judge_env, tmp_path, toml, key, value
):
    write_config(shared_repo, toml)
    head, root = shared_repo.log(), shared_repo.root
    for args in (
        ["review", str(root), "--json"],
        ["review", str(root), "--dry-run", "--json"],
        ["review", str(root), "--json", "--metrics-file", str(tmp_path / "k.prom")],
        ["status", str(root), "--json"],
    ):
        result = CliRunner().invoke(cli, ["-q", *args])
        assert result.exit_code == 2, (args, result.output)
        error = strict(result.stdout)["error"]
        assert key in error and value in error and str(root / "knomit-judge.toml") in error, error
        assert "Traceback" not in result.output
    assert judge_env.calls == 0 and shared_repo.log() == head and not (tmp_path / "k.prom").exists()


def numeric_keys() -> list[tuple[str, type]]:
    """Every numeric key of every section, and of a [prices."MODEL"] table."""
    from knomit_judge.config import Price
    from knomit_judge.docgen import config_sections

    sections = {**config_sections(), 'prices."claude-x"': Price}
    return [
        (f"{name}.{f.name}", {"int": int, "float": float}[f.type])
        for name, cls in sections.items()
        for f in dataclasses.fields(cls)
        if f.type in ("int", "float")
    ]


def test_every_numeric_key_has_a_finite_range_and_refuses_nan_infinity_and_the_largest_number():
    keys = numeric_keys()
    assert len(keys) > 40 and 'prices."claude-x".input_per_mtok' in keys[-6][0]
    for key, typ in keys:
        section, name = key.rsplit(".", 1)
        base = {'prices."claude-x"': {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}.get(section, {})
        bad = [float("nan"), float("inf"), -float("inf"), 1e308] if typ is float else [2**63 - 1, -(2**63)]
        for value in bad:
            data = (
                {section.strip('"'): {**base, name: value}}
                if "." not in section
                else {"prices": {"claude-x": {**base, name: value}}}
            )
            with pytest.raises(ConfigError) as e:
                parse_config(data)
            assert key in str(e.value) and repr(value) in str(e.value), (key, value, str(e.value))


def test_an_older_budget_key_beside_its_newer_one_is_ignored_and_said(shared_repo, judge_env):
    # what every init file held before the balance counted money, with the newer key added by a person
    write_config(shared_repo, "[budget]\noptimistic_cap = 20\nquestions_per_resolution = 8\nopening_usd = 1.0\n")
    status = CliRunner().invoke(cli, ["status", str(shared_repo.root), "--json"])
    assert status.exit_code == 0, status.output
    out = strict(status.stdout)
    # the newer key wins: $1.00, not 20 questions ($0.08)
    assert out["throttle"]["alias"]["balance_usd"] == 1.0
    [note] = out["config_notes"]
    assert "budget.optimistic_cap = 20 is ignored" in note and "budget.opening_usd = 1.0" in note
    assert note in out["text"]
    # the deposit: questions_per_resolution has no newer key beside it, so it still holds (8 judge-model questions)
    config = load_config(shared_repo.root)
    assert terms(config).deposit == pytest.approx(8 * config.question_usd())
    review = CliRunner().invoke(cli, ["review", str(shared_repo.root), "--dry-run", "--json"])
    assert review.exit_code == 0, review.output
    assert note in strict(review.stdout)["notes"] and f"knomit-judge: {note}" in review.stderr  # and a warning
    write_config(shared_repo, "[budget]\noptimistic_cap = 20\nquestions_per_resolution = 8\n")  # older keys alone
    out = strict(CliRunner().invoke(cli, ["status", str(shared_repo.root), "--json"]).stdout)
    assert out["config_notes"] == [] and out["throttle"]["alias"]["balance_usd"] == pytest.approx(20 * 0.004)


def test_json_out_the_journal_and_the_metrics_are_strict_json(corpus_repo, judge_env, tmp_path):
    from knomit_judge.jsonl import dumps

    with pytest.raises(ValueError):
        # a NaN is a bug, refused where it is made, never written as `NaN`
        dumps({"cost_usd": float("nan")})
    prom = tmp_path / "k.prom"
    write_config(corpus_repo, "[judge]\nbackoff_s = 0.0\n")
    root = str(corpus_repo.root)
    outputs = [
        CliRunner().invoke(cli, ["-q", *args])
        for args in (
            ["review", root, "--pass", "alias", "--json", "--metrics-file", str(prom)],
            ["review", root, "--dry-run", "--json"],
            ["status", root, "--json"],
            ["verdicts", root, "--json"],
        )
    ]
    assert [r.exit_code for r in outputs] == [0, 0, 0, 0], [r.output for r in outputs]
    figures = [strict(r.stdout) for r in outputs]
    assert figures[0]["passes"]["alias"]["judged"] > 0 and figures[3]["verdicts"]
    journal = list((corpus_repo.root / ".knomit" / "verdicts").glob("*.jsonl"))
    assert journal and all(strict(line) for path in journal for line in path.read_text().splitlines())
    assert "nan" not in prom.read_text().lower()


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("judge.mode", JudgeMode),
        ("judge.effort", Effort),
        ("corpus.retract", RetractMode),
        ("corpus.front_matter", FrontMatter),
        ("apply.mode", ApplyMode),
    ],
)
def test_a_key_of_a_few_words_takes_its_type_s_words_and_no_other(key, words):
    """A key typed by a Literal (#53) is checked against that type's words, and is a string in the file and the docs."""
    section, name = key.split(".")
    for word in get_args(words):
        assert getattr(getattr(parse_config({section: {name: word}}), section), name) == word
    with pytest.raises(ConfigError, match=f"^{key}: 'nope' is not one of "):
        parse_config({section: {name: "nope"}})
    field = next(f for f in dataclasses.fields(getattr(Config(), section)) if f.name == name)
    assert type_name(field) == "str"
