"""knomit-judge.toml: every key validated by name (exit 2 before any work); the environment wins over the file."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest
from click.testing import CliRunner
from conftest import SMALL, make_repo, write_config

from knomit_judge.cli import cli
from knomit_judge.config import DEFAULT_TOML, RETIRED, Config, parse_config, retired_model
from knomit_judge.errors import ConfigError


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory):
    """One corpus for all the bad-config cases: each rejected before it is read, so none changes it."""
    return make_repo(tmp_path_factory.mktemp("config") / "corpus", SMALL)


def review_cli(root):
    return CliRunner().invoke(cli, ["-q", "review", str(root), "--pass", "alias"], catch_exceptions=False)


@pytest.mark.parametrize("toml, key, why", [
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
    ('[prices."claude-x"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\nbatch_discount = 1.0\n',
     'prices."claude-x".batch_discount', "out of range"),
    # a negative price made the estimate negative, and the cost cap never stopped a session
    ('[prices."claude-sonnet-4-5"]\ninput_per_mtok = -3.0\noutput_per_mtok = 15.0\n',
     'prices."claude-sonnet-4-5".input_per_mtok', "must not be negative"),
    ('[prices."claude-x"]\ninput_per_mtok = 1.0\noutput_per_mtok = -0.5\n',
     'prices."claude-x".output_per_mtok', "must not be negative"),
    ('[judge]\nmodel = ""\n', "judge.model", "must name a model"),
    ('[judge]\nmodel = "  "\n', "judge.model", "must name a model"),
])
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
        if section.name == "prices":
            continue
        assert f"[{section.name}]" in DEFAULT_TOML
        for key in dataclasses.fields(section.default_factory()):
            if f"{section.name}.{key.name}" in RETIRED:  # accepted so older files load; not written
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
    assert ("judge.model 'claude-sonnet-4-5' is retired (since 2026-11-30): no request naming it can succeed; its "
            "line's current model is 'claude-sonnet-5-5'; a real session exits 2 until a current model is named in "
            "the environment (KNOMIT_JUDGE_MODEL") in result.stdout
    assert "no price for judge.model 'claude-sonnet-4-5'" not in result.stdout
    # a dated id of it too; a current model whose name a retired one starts (claude-opus-4-5) is not retired
    assert retired_model("claude-sonnet-4-5-20250929") and retired_model("claude-opus-4-5") is None
    assert retired_model("claude-sonnet-5-5") is None
    with pytest.raises(ConfigError, match="judge.model 'claude-sonnet-4-5' is retired"):
        Config().require_price("claude-sonnet-4-5")
