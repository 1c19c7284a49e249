"""Money that holds when a reader fails (issue 51): every read charged to the model that made it, caps that hold
within one question's price, a reader judged by all it did, and re-trusted by the evidence of a shadow sample.

Through the real CLI and SDK against the loopback Messages API. Replies bill a typical question's tokens
(config.QUESTION_TOKENS), so a call costs exactly its model's nominal price and dollars compare with the balance.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from helpers import SMALL, THREE, fact_text, make_repo, motif_repo, write_config
from judges import FIRST, NO, OTHERS, PENALTY, RETRY, RETRY_FACTS, STRONG, YES, planted
from messages_server import status, tool

from knomit_judge.audits import LIFT_MIN, REJECT_MIN, REJECT_SHARE
from knomit_judge.cli import cli
from knomit_judge.config import QUESTION_TOKENS, Config
from knomit_judge.session.asking import DEAD_AFTER

TOKENS = {"input_tokens": QUESTION_TOKENS[0], "output_tokens": QUESTION_TOKENS[1]}


def config(judge: str = "", budget: str = "") -> str:
    """A quiet config: no backoff, no swap sample, no describe step; `judge` and `budget` keys added."""
    return f"[judge]\nbackoff_s = 0.0\nswap_sample = 0.0\n{judge}[describe]\nenabled = false\n[budget]\n{budget}"


# slow: sessions in a row, and a reader compared with the judge model alone on the same corpus
pytestmark = pytest.mark.slow


def price(model: str) -> float:
    """One call of `model` at a typical question's size: what the loopback bills here."""
    return Config().price(model).usd(*QUESTION_TOKENS)


class Loopback:
    """Both models of the loopback: `first` is how the first reader reads (truth, yes to all, down), `strong` the
    judge model (truth, or down); both know `true`, and the first reader answers the default on `missed`."""

    def __init__(self, first: str = "truth", strong: str = "truth", true=(PENALTY, RETRY), missed=()):
        self.first, self.strong, self.true, self.missed = first, strong, set(true), set(missed)
        self.asked: list[tuple[str, frozenset]] = []

    def __call__(self, req, n):
        e = json.loads(re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S).group(1))
        pair = frozenset((e["motif_a"]["spelling"], e["motif_b"]["spelling"]))
        model = req.body["model"]
        self.asked.append((model, pair))
        how = self.first if model == FIRST else self.strong
        if how == "down":
            return status(529, message="Overloaded")
        if how == "yes":
            return tool(YES, **TOKENS)
        if model == FIRST and pair in self.missed:
            return tool(NO, **TOKENS)
        return tool(YES if pair in self.true else NO, **TOKENS)

    def calls(self, model: str) -> int:
        return sum(m == model for m, _ in self.asked)


def corpus(root, config: str):
    repo = make_repo(root, {**SMALL, **RETRY_FACTS, **OTHERS})
    write_config(repo, config)
    return repo


def review(repo, *extra: str, env: dict | None = None, code: int = 0) -> dict:
    result = CliRunner().invoke(cli, ["review", str(repo.root), "--pass", "alias", "--json", *extra], env=env)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def first_reader_status(repo) -> dict:
    out = CliRunner().invoke(cli, ["status", str(repo.root), "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.fixture
def with_first_reader(monkeypatch):
    # the default: claude-haiku-5-5 reads first
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")


# -- a reader judged by all it did (Why 1) --------------------------------------------------------------------


def test_a_first_reader_that_says_yes_to_everything_is_suspended_in_its_first_session_at_most_twice_the_cost(
    tmp_path, judge_env, with_first_reader
):
    keys = config("concurrency = 2\n", "opening_usd = 0.05\n")
    judge_env.responder = Loopback(first="yes")
    alone = review(corpus(tmp_path / "alone", keys), env={"KNOMIT_JUDGE_FIRST_READER": ""})["passes"]["alias"]
    repo = corpus(tmp_path / "first", keys)
    r = review(repo)["passes"]["alias"]
    assert r["first_reader_state"] == "suspended"
    assert any(n.startswith("first reader suspended: the judge model rejected") for n in r["notes"]), r["notes"]
    # suspended as soon as REJECT_MIN of its yeses, and REJECT_SHARE of them, were rejected; the one other read
    # in flight then (2 workers) comes back too
    confirmed = r["first_confirmed"]
    needed = max(REJECT_MIN, round(REJECT_SHARE / (1 - REJECT_SHARE) * confirmed))
    assert r["first_unconfirmed"] >= needed and r["first_reads"] <= confirmed + needed + 1, r
    assert r["cost_usd"] <= 2 * alone["cost_usd"], (r["cost_usd"], alone["cost_usd"])
    # the balance: its opening and what each resolution deposited, and at most the question that crossed it
    assert r["cost_usd"] <= 0.05 + r["resolved"] * 0.04 + 2 * price(STRONG), r

    # every question read: a shadow to draw
    write_config(repo, config("concurrency = 2\n", "enabled = false\n"))
    judge_env.responder = loop = Loopback(first="yes", true={PENALTY, RETRY, new_pair(repo, 1)})
    # suspended from its start: only the shadow sample is read first
    again = review(repo)["passes"]["alias"]
    assert again["first_reads"] == 0 and again["first_reader_state"] == "suspended"
    assert loop.calls(FIRST) == again["shadow_reads"] > 0
    published = first_reader_status(repo)["first_reader"]["alias"]
    assert published["state"] == "suspended" and "rejected" in published["suspended_because"]
    assert "lifts once" in published["lifts_when"]


def test_rebuild_from_nothing_gives_the_same_first_reader_state(tmp_path, judge_env, with_first_reader):
    repo = corpus(tmp_path / "c", config("concurrency = 1\n", "enabled = false\n"))
    judge_env.responder = Loopback(first="yes")
    review(repo)
    before = first_reader_status(repo)["first_reader"]["alias"]
    assert before["state"] == "suspended" and before["reads"] >= REJECT_MIN
    (repo.root / ".knomit" / "judge.db").unlink()
    assert CliRunner().invoke(cli, ["rebuild", str(repo.root)]).exit_code == 0
    after = first_reader_status(repo)["first_reader"]["alias"]
    assert after == before


# -- every read charged to the model that made it (Why 2) ------------------------------------------------------


def test_a_first_reader_down_all_session_spends_no_more_than_the_balance_holds(tmp_path, judge_env, with_first_reader):
    repo = corpus(tmp_path / "c", config("concurrency = 2\n", "opening_usd = 0.02\n"))
    # every question the judge model's no: no deposit
    judge_env.responder = Loopback(first="down", true=())
    r = review(repo)["passes"]["alias"]
    assert r["handed_over"] > 0 and r["judged"] > 0
    assert r["cost_usd"] <= 0.02 + 1e-9, r
    assert r["judged"] <= 0.02 / price(STRONG) + 1e-9 < r["candidates"]


def test_with_both_models_down_a_pass_stops_offering_after_a_bounded_number_and_is_broken(
    tmp_path, judge_env, with_first_reader
):
    repo = corpus(tmp_path / "c", config("concurrency = 4\n", "enabled = false\n"))
    judge_env.responder = Loopback(first="down", strong="down")
    r = review(repo, code=1)["passes"]["alias"]
    assert r["state"] == "broken" and r["judged"] == 0
    assert 0 < r["offered"] <= DEAD_AFTER + 4 - 1 < r["candidates"]
    assert any(f"none of the last {DEAD_AFTER} question(s)" in n for n in r["notes"]), r["notes"]


# -- caps hold within one question's price (Why 4) ----------------------------------------------------------------


def test_a_new_corpus_counts_questions_in_flight_at_the_models_nominal_price(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "")
    write_config(repo, config("concurrency = 8\nmax_cost_usd = 0.012\n", "enabled = false\n"))
    judge_env.responder = Loopback(true=())
    r = review(repo)["passes"]["alias"]
    assert 0 < r["judged"] < r["candidates"] and "session cost cap $0.012 reached" in " ".join(r["notes"])
    assert r["charged_usd"] <= 0.012 + 1e-9


@pytest.mark.parametrize("cap", ["judge.max_cost_usd", "budget.max_usd_per_day", "budget.max_usd_per_month"])
def test_the_judge_models_reads_of_first_yeses_are_checked_against_the_caps(
    tmp_path, judge_env, with_first_reader, cap
):
    section, key = cap.split(".")
    keys = {"judge": "concurrency = 4\n", "budget": "enabled = false\n"}
    keys[section] += f"{key} = 0.012\n"
    repo = motif_repo(tmp_path, "")
    write_config(repo, config(keys["judge"], keys["budget"]))
    judge_env.responder = Loopback(first="yes")
    r = review(repo)["passes"]["alias"]
    assert r["first_reads"] > 0 and r["charged_usd"] <= 0.012 + 1e-9, r
    assert "cap $0.012 reached" in " ".join(r["notes"])


def test_audits_are_checked_against_the_caps(tmp_path, judge_env, with_first_reader):
    repo = motif_repo(tmp_path, "")
    # every question read first, each a no: the audits come after them
    reads = 28 * price(FIRST)
    cap = round(reads + 1.5 * price(STRONG), 6)
    write_config(repo, config(f"concurrency = 4\naudit_share = 0.5\nmax_cost_usd = {cap}\n", "enabled = false\n"))
    judge_env.responder = Loopback(true=())
    r = review(repo)["passes"]["alias"]
    assert r["first_reads"] == 28 and r["charged_usd"] <= cap + 1e-9, r
    # half the first reads were due an audit (about 14): the cap held all but one at most
    assert r["audits"] <= 1


# -- a suspended reader re-trusted by evidence (Why 6) ----------------------------------------------------------


def new_pair(repo, i: int) -> frozenset:
    """A writer's two spellings of one new mechanism, each carried by a fact saying so: a true alias pair."""
    a, b = f"circuit-breaker-trips-{i}", f"breaker-trip-cascade-{i}"
    repo.write(
        f"facts/new/a{i}.md",
        fact_text(
            f"A circuit breaker that trips cascades the outage {i}",
            [a],
            body="Each breaker that opens moves load onto the next one.",
        ),
    )
    repo.write(
        f"facts/new/b{i}.md",
        fact_text(
            f"Breakers tripping in a row spread outage {i}",
            [b],
            body="An open breaker pushes its load to its neighbours.",
        ),
    )
    repo.commit(f"a writer adds mechanism {i}")
    return frozenset((a, b))


def test_a_suspended_reader_keeps_a_shadow_sample_and_is_re_trusted_once_it_clears_the_target(
    tmp_path, judge_env, with_first_reader
):
    repo = corpus(tmp_path / "c", config("concurrency = 1\n", "enabled = false\n"))
    # both true pairs missed: the audits find them
    judge_env.responder = Loopback(missed={PENALTY, RETRY})
    assert review(repo)["passes"]["alias"]["misses"] == 2

    true = {PENALTY, RETRY}
    # the reader now reads as well as the judge model; a writer adds true pairs
    for session in range(1, LIFT_MIN + 2):
        true.add(new_pair(repo, session))
        judge_env.responder = Loopback(true=true)
        out = review(repo)["passes"]["alias"]
        # each session's shadow sample reads the one yes of the judge model it has
        if session <= LIFT_MIN:
            assert out["first_reader_state"] == "suspended" and out["first_reads"] == 0 and out["shadow_reads"] > 0
            shown = first_reader_status(repo)
            published = shown["first_reader"]["alias"]
            assert published["shadow"]["positives"] == session and published["shadow"]["hits"] == session
            [line] = [t for t in shown["text"] if t.startswith("first reader on alias:")]
            assert line.endswith(published["lifts_when"]) and "suspended: estimated recall" in line
            assert published["lifts_when"].startswith("lifts once" if session < LIFT_MIN else "cleared"), published
    # LIFT_MIN of the judge model's yeses read alike, and its no's read alike: the next session reads first again
    assert out["first_reader_state"] == "reading" and out["first_reads"] > 0
    assert any(n.startswith("first reader re-trusted") for n in out["notes"]), out["notes"]


# -- a new duplicate is decided while it is new, past the balance -------------------------------------------------


def test_a_new_duplicate_is_read_by_the_judge_model_in_the_session_that_first_sees_it_past_the_balance(
    tmp_path, judge_env, with_first_reader
):
    """A question owed to a fresh fact is asked whatever the balance holds, and so is the judge model's reading of the
    first reader's yes on it: held for the balance, a duplicate found on the day it appeared waited for resolutions
    elsewhere to refill the pass (12 sessions on the aekb replay)."""
    judge_env.responder = planted
    repo = make_repo(tmp_path / "kb", {p: t for p, t in THREE.items() if p != "facts/perf/backup.md"})
    write_config(repo, config(budget="opening_usd = 1.0\n"))
    # every question of the corpus answered: distinct
    review(repo, "--pass", "prune")
    left = first_reader_status(repo)["throttle"]["prune"]["balance_usd"]
    # the next session opens with a balance that pays the new fact's first reads, not a judge-model reading of a yes
    write_config(repo, config(budget=f"opening_usd = {1.0 - left + price('claude-sonnet-5-5') * 0.75}\n"))
    repo.write("facts/perf/backup.md", THREE["facts/perf/backup.md"])  # the duplicate, new today
    repo.commit("a writer adds a note")
    prune = review(repo, "--pass", "prune")["passes"]["prune"]
    assert prune["first_confirmed"] == 1 and prune["resolved"] == 1 and prune["applied"] == 1, prune
    assert any(s.startswith("prune: merge") for s in repo.log()), repo.log()
