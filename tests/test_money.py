"""The balance counts money (issue 42): each read withdraws its model's price, a resolution deposits, `rebuild`
gives the same balance, and an older file's counts of questions mean the same judge-model spend.

Real store, real git, the real SDK against the loopback Messages server.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers import motif_repo, write_config
from messages_server import tool

from knomit_judge.cli import cli
from knomit_judge.config import QUESTION_TOKENS, Config, load_config
from knomit_judge.history import status as get_status
from knomit_judge.rebuild import rebuild
from knomit_judge.report import render
from knomit_judge.store import Store
from knomit_judge.throttle import terms

FIRST, STRONG = "claude-haiku-5-5", "claude-sonnet-5-5"
NO = {"same": False, "mechanism": ""}
YES = {"same": True, "mechanism": "Both name one mechanism."}
QUIET = "[judge]\nconcurrency = 1\nbackoff_s = 0.0\nswap_sample = 0.0\n[describe]\nenabled = false\n"


def price(model: str) -> float:
    """One call of `model` as the balance counts it: a typical question at its list price."""
    return Config().price(model).usd(*QUESTION_TOKENS)


def spent_by_model(root) -> dict:
    store = Store.for_corpus(root)
    try:
        out: dict = {}
        for v in store.verdicts("alias"):
            out[v.model] = out.get(v.model, 0) + v.calls
        return out
    finally:
        store.close()


def alias(root) -> dict:
    result = CliRunner().invoke(cli, ["review", str(root), "--pass", "alias", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["passes"]["alias"]


def test_a_balance_in_money_moves_with_each_readers_price_and_rebuild_gives_it_back(tmp_path, judge_env, monkeypatch):
    # the default: claude-haiku-5-5 reads first
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    repo = motif_repo(tmp_path, "")
    write_config(repo, QUIET + "[budget]\nopening_usd = 0.05\nusd_per_resolution = 0.2\n")
    judge_env.responder = lambda req, n: tool(NO)
    r = alias(repo.root)
    # every question the prior does not rule out (7 of the 28 score at or below alias's floor: Pass.prior)
    assert r["candidates"] == 28 and r["first_reads"] == 21 and r["waiting"] == 7 and r["audits"] >= 2
    calls = spent_by_model(repo.root)
    assert calls[FIRST] == 21 and calls[STRONG] == r["audits"]
    # a first-reader no costs a twentieth
    assert price(FIRST) * 20 == pytest.approx(price(STRONG))
    expected = 0.05 - calls[FIRST] * price(FIRST) - calls[STRONG] * price(STRONG)
    t = get_status(repo.root)["throttle"]["alias"]
    assert t["state"] == "unproven" and t["balance_usd"] == pytest.approx(expected)
    assert t["buys"] == {FIRST: int(expected / price(FIRST) + 1e-9), STRONG: int(expected / price(STRONG) + 1e-9)}
    assert f"buys {t['buys'][FIRST]} reads at {FIRST}, {t['buys'][STRONG]} at {STRONG}" in t["text"]
    # `balance` keeps counting judge-model questions
    assert t["balance"] == t["buys"][STRONG]
    # the report shows the same: the amount, and the reads it buys at each price
    page = render(repo.root)
    assert f"${expected:.4f}" in page and f"{t['buys'][FIRST]} at {FIRST}, {t['buys'][STRONG]} at {STRONG}" in page

    # a resolution deposits usd_per_resolution; the judge model's two agreeing orders withdraw at its price
    repo.fact("facts/t/new.md", "Retry storms multiply load", motifs=["retry-storm-amplified"], body="Retries.")
    repo.commit("a writer adds a spelling of retry-storm")
    judge_env.responder = lambda req, n: tool(
        YES if "retry-storm-amplified" in req.prompt and '"retry-storm"' in req.prompt else NO
    )
    r = alias(repo.root)
    assert r["resolved"] == 1
    after = spent_by_model(repo.root)
    expected += 0.2 - (after[FIRST] - calls[FIRST]) * price(FIRST) - (after[STRONG] - calls[STRONG]) * price(STRONG)
    t = get_status(repo.root)["throttle"]["alias"]
    assert t["state"] == "funded" and t["balance_usd"] == pytest.approx(expected)

    # nothing holds the balance but the verdicts: the db rebuilt from the journal gives the same amount
    (repo.root / ".knomit" / "judge.db").unlink()
    rebuild(repo.root)
    again = get_status(repo.root)["throttle"]["alias"]
    assert again["balance_usd"] == pytest.approx(expected) and again["state"] == "funded"


def test_an_old_config_counting_questions_loads_and_means_the_same_judge_model_spend(tmp_path, judge_env):
    # as init wrote them before
    repo = motif_repo(tmp_path, "optimistic_cap = 3\nquestions_per_resolution = 8\n")
    config = load_config(repo.root)
    money = terms(config)
    assert money.unit == "usd"
    assert money.opening == pytest.approx(3 * price(STRONG)) and money.deposit == pytest.approx(8 * price(STRONG))
    judge_env.responder = lambda req, n: tool(NO)
    # the judge model alone (tests/conftest.py): 3 questions, as the old balance allowed
    r = alias(repo.root)
    assert r["judged"] == 3 and spent_by_model(repo.root) == {STRONG: 3}
    t = get_status(repo.root)["throttle"]["alias"]
    assert (t["state"], t["balance"], t["balance_usd"]) == ("defunded", 0, 0.0)
    # the same file without the old keys: the USD keys, and the scripted judge still counts questions
    write_config(repo, "[budget]\nopening_usd = 0.1\nusd_per_resolution = 0.04\n")
    config = load_config(repo.root)
    assert (terms(config).opening, terms(config).deposit) == (0.1, 0.04)
    scripted = terms(config, "scripted")
    assert (scripted.unit, scripted.opening, scripted.deposit) == ("questions", 20, 8)  # as it always counted
    # no price: one question is one question
    assert scripted.price(STRONG) == scripted.price(FIRST) == 1.0


def test_reads_stop_when_they_are_not_worth_their_price_and_an_unchanged_corpus_then_costs_nothing(tmp_path, judge_env):
    # a resolution worth 8 judge-model questions: a read pays while 1 in 8 near its score resolves something
    repo = motif_repo(tmp_path, "optimistic_cap = 100\nquestions_per_resolution = 8\n")
    write_config(repo, QUIET + "[budget]\noptimistic_cap = 100\nquestions_per_resolution = 8\n")
    judge_env.responder = lambda req, n: tool(NO, input_tokens=1500, output_tokens=100)  # a typical question's size
    r = alias(repo.root)
    # the first 20 reads are asked whatever the curve says; after 20 no's the chance (1 in 30) is below 1 in 8.
    # Offers are decided as they are queued, so the few already queued (2 x concurrency, one with the judge) go on.
    assert 20 <= r["judged"] <= 23 and r["candidates"] == 28 and r["waiting"] == 28 - r["judged"]
    assert any(f"{r['waiting']} question(s) not worth their price" in n for n in r["notes"])
    t = get_status(repo.root)["throttle"]["alias"]
    # the balance is kept, not spent on reads that pay nothing
    assert t["state"] == "unproven" and t["balance"] == 100 - r["judged"]
    again = alias(repo.root)
    # nothing came back, so nothing became worth a read
    assert again["judge_calls"] == 0 and again["judged"] == 0
