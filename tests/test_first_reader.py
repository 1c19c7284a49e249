"""The first reader through the real SDK: the cheapest model reads every question, the judge model decides the
yeses, audits the first reader's top no's, counts its misses, and reads alone while they are too many.

The loopback answers by model: the judge model (claude-sonnet-5-5) from the truth the test plants, the first
reader (claude-haiku-5-5) the same, except the default on chosen true pairs: a first reader that reads worse.
"""

from __future__ import annotations

import json
import re

import pytest
import sqlite_utils
from click.testing import CliRunner
from helpers import SMALL, demo_repo, git, make_repo, write_config
from judges import FIRST, NO, OTHERS, PENALTY, RETRY, RETRY_FACTS, STRONG, YES
from messages_server import refusal, status, tool

from knomit_judge.audits import FLOOR_MIN
from knomit_judge.cli import cli
from knomit_judge.session.readers import DOWN_AFTER
from knomit_judge.store import Store

# slow: many sessions in a row: first reads, audits, suspensions and batches collected later
pytestmark = pytest.mark.slow


class Readers:
    """The loopback's two models: both know `true`; the first reader answers the default on `missed`."""

    def __init__(self, true=(PENALTY, RETRY), missed=(PENALTY, RETRY)):
        self.true, self.missed = set(true), set(missed)
        self.asked: list[tuple[str, frozenset]] = []

    def __call__(self, req, n):
        e = json.loads(re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S).group(1))
        pair = frozenset((e["motif_a"]["spelling"], e["motif_b"]["spelling"]))
        model = req.body["model"]
        self.asked.append((model, pair))
        if model == FIRST and pair in self.missed:
            return tool(NO)
        return tool(YES if pair in self.true else NO)


@pytest.fixture
def corpus(tmp_path, judge_env, monkeypatch):
    # the default: claude-haiku-5-5 reads first
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    repo = make_repo(tmp_path / "c", {**SMALL, **RETRY_FACTS, **OTHERS})
    # one worker: questions come back in rank order, so the audits are the top no's, as with a quiet API
    write_config(
        repo,
        "[judge]\nconcurrency = 1\nbackoff_s = 0.0\nswap_sample = 0.0\n[budget]\nenabled = false\n"
        "[describe]\nenabled = false\n",
    )
    return repo


def alias(repo) -> dict:
    result = CliRunner().invoke(cli, ["review", str(repo.root), "--pass", "alias", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["passes"]["alias"]


def merged(repo) -> list[str]:
    return git(repo.root, "log", "--grep=^alias: merge", "--format=%s").splitlines()


def test_the_first_reader_reads_everything_once_and_the_judge_model_decides_every_yes(corpus, judge_env):
    # a first reader that reads as well as the judge model
    readers = Readers(missed=())
    judge_env.responder = readers
    r = alias(corpus)
    assert judge_env.rejected == []
    first = [p for m, p in readers.asked if m == FIRST]
    strong = [p for m, p in readers.asked if m == STRONG]
    # one order each (a pair whose carriers a merge changed is a new question)
    assert len(first) == r["first_reads"]
    assert r["first_confirmed"] == 2 and r["first_unconfirmed"] == 0  # both true pairs, confirmed
    # the judge model's two orders, agreeing
    assert strong.count(PENALTY) == 2 and strong.count(RETRY) == 2
    assert r["audits"] >= 2 and r["misses"] == 0
    # the judge model read only the yeses and the audits
    assert len(strong) == 4 + r["audits"]
    assert len(merged(corpus)) == 2
    store = Store.for_corpus(corpus.root)
    models = {v.model for v in store.verdicts("alias") if not v.is_yes}
    # a first no stands as a verdict of its model; an audited one, the judge's
    assert models == {FIRST, STRONG}
    # only the judge's yes acts
    assert all(v.model == STRONG for v in store.verdicts("alias") if v.is_yes)
    store.close()
    # both readers are paid for: the line's cost is every call's, at each model's price
    assert r["cost_usd"] == pytest.approx(
        len(first) * (100 * 0.10 + 20 * 0.50) / 1e6 + len(strong) * (100 * 2.0 + 20 * 10.0) / 1e6
    )
    again = alias(corpus)
    # a stable corpus costs nothing
    assert again["judge_calls"] == 0 and again["state"] == "caught-up"


def test_an_audit_finds_what_the_first_reader_missed_counts_it_and_the_pair_merges(corpus, judge_env):
    readers = Readers(missed=(PENALTY,))
    judge_env.responder = readers
    r = alias(corpus)
    assert r["misses"] == 1 and r["audits"] >= 2
    assert any("penalty-blocks-own-recovery" in s and "self-locking-penalty" in s for s in merged(corpus))
    assert (
        f"first reads {r['first_reads']} ({FIRST}): yes confirmed 1, not 0; audits {r['audits']}, misses 1"
        in " ".join(r["notes"])
    )
    status = json.loads(CliRunner().invoke(cli, ["status", str(corpus.root), "--json"]).stdout)
    assert status["last_session"]["passes"]["alias"]["misses"] == 1
    assert status["metrics"]["passes"]["alias"]["misses"] == 1
    cal = CliRunner().invoke(cli, ["calibrate", "--journal", str(corpus.root), "--json"])
    assert cal.exit_code == 0, (cal.output, cal.exception)
    # the first reader scored against the judge model
    scored = json.loads(cal.stdout)["first_reader"]["alias"]
    assert (scored["audits"], scored["misses"], scored["yeses"], scored["confirmed"]) == (r["audits"], 1, 1, 1)
    text = CliRunner().invoke(cli, ["calibrate", "--journal", str(corpus.root)]).stdout
    assert f"first reader on alias: {r['audits']} audits of its no's, 1 missed" in text


def test_a_recall_below_target_suspends_the_first_reader_while_the_evidence_stands(corpus, judge_env):
    # both true pairs missed: both found by the audits, two misses
    readers = Readers()
    judge_env.responder = readers
    first = alias(corpus)
    assert first["misses"] == 2 and len(merged(corpus)) == 2

    readers.asked.clear()
    # suspended: the judge model reads alone, the standing first no's again
    second = alias(corpus)
    assert any(
        n.startswith("first reader suspended: estimated recall 0.00 below the target 0.8 (2 miss(es)")
        for n in second["notes"]
    ), second["notes"]
    assert readers.asked and {m for m, _ in readers.asked} == {STRONG}
    assert second["audits"] == len(readers.asked) >= 19 and second["misses"] == 0
    status = json.loads(CliRunner().invoke(cli, ["status", str(corpus.root), "--json"]).stdout)
    published = status["first_reader"]["alias"]
    assert published["state"] == "suspended" and published["model"] == FIRST and published["target"] == 0.8
    assert published["misses"] == 2 and published["recall"] == 0.0
    # no confirmed yes: the bound is 0 whatever the audits
    assert published["recall_low"] == 0.0
    assert status["metrics"]["first_reader"] == status["first_reader"]
    assert any(t.startswith("first reader on alias: claude-haiku-5-5 suspended") for t in status["text"])

    # every no it gave has been read by the judge model: the misses are counted, 2 of 2 true pairs, and a
    # recall of 0 stays below the target, so the suspension stands (a window frozen while it reads nothing but its
    # shadow sample: the judge model reads every question, the first reader some of them again, never acted on)
    corpus.fact("facts/m/new.md", "Mechanism 99: a feedback loop of a new kind", motifs=["loop-kind-new"])
    corpus.commit("a new spelling")
    readers.asked.clear()
    third = alias(corpus)
    assert any("suspended" in n for n in third["notes"])
    strong = [p for m, p in readers.asked if m == STRONG]
    assert strong and third["first_reads"] == 0 and third["judged"] == len(strong)
    # each after the judge model's reading of it
    shadowed = [p for m, p in readers.asked if m == FIRST]
    assert len(shadowed) == third["shadow_reads"] and shadowed[:2] == strong[:2] and set(shadowed) <= set(strong)


def test_a_suspended_readers_standing_nos_are_read_though_no_read_is_worth_its_price(corpus, judge_env):
    """The worth rule prices what a read resolves; a suspended reader's standing no's are audits, the evidence its
    way back reads, so they are read by the judge model even when no question is worth its price."""
    write_config(
        corpus,
        "[judge]\nconcurrency = 1\nbackoff_s = 0.0\nswap_sample = 0.0\n[describe]\nenabled = false\n"
        "[budget]\nopening_usd = 100.0\nusd_per_resolution = 0.0001\n",
    )
    # both true pairs missed by the first reader: the audits find both
    readers = Readers()
    judge_env.responder = readers
    first = alias(corpus)
    assert first["misses"] == 2 and len(merged(corpus)) == 2
    # the rule turns reads down
    assert any("not worth their price" in n for n in first["notes"]), first["notes"]

    readers.asked.clear()
    second = alias(corpus)
    assert any(n.startswith("first reader suspended") for n in second["notes"]), second["notes"]
    assert readers.asked and {m for m, _ in readers.asked} == {STRONG}
    # every standing no: the first reads less the ones session 1 audited
    assert second["audits"] == len(readers.asked) == first["first_reads"] - first["audits"] and second["misses"] == 0


def test_the_dry_run_offers_only_what_the_worth_rule_would_read(corpus, judge_env):
    """A plan that agrees with the session: questions the worth rule turns down are not priced as asked."""
    write_config(
        corpus,
        "[judge]\nconcurrency = 1\nbackoff_s = 0.0\nswap_sample = 0.0\n[describe]\nenabled = false\n"
        "[budget]\nopening_usd = 100.0\nusd_per_resolution = 0.0001\n",
    )
    judge_env.responder = Readers(missed=())
    first = alias(corpus)
    assert any("not worth their price" in n for n in first["notes"]), first["notes"]  # some wait, turned down
    dry = json.loads(
        CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--dry-run", "--json"]).stdout
    )["passes"]["alias"]
    again = alias(corpus)
    assert dry["waiting"] > 0 and dry["offered"] == again["offered"] == again["judge_calls"] == 0


def test_the_dry_run_prices_both_readers(corpus, judge_env):
    out = json.loads(
        CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--dry-run", "--json"]).stdout
    )
    alias = out["passes"]["alias"]
    n = alias["offered"]
    # the audits its draw would expect were every question a no: pi summed, at least the top two
    expected = 2 + max(FLOOR_MIN * (n - 2), n * 0.03 - 2)
    note = next(x for x in alias["notes"] if x.startswith("would ask"))
    assert note.startswith(
        f"would ask {n} question(s) = {n + round(expected)} call(s) ({n} by {FIRST}, about {expected:.1f} audits drawn"
    ), note
    est = out["estimate_usd"] - out["passes"]["describe"]["estimate_usd"]
    cheap = (
        CliRunner()
        .invoke(
            cli,
            ["review", str(corpus.root), "--pass", "alias", "--dry-run", "--json"],
            env={"KNOMIT_JUDGE_FIRST_READER": ""},
        )
        .stdout
    )
    alone = json.loads(cheap)["passes"]["alias"]["estimate_usd"]
    # the first reader's reads cost a twentieth; the audits are a few judge-model reads
    assert 0 < est < alone / 3
    assert judge_env.calls == 0


def test_a_batch_keeps_the_readers_first_reads_then_yeses_and_audits_in_the_next_collection(corpus, judge_env):
    """--batch: the first reader reads every question in the batch at its batch price; once that is collected,
    its yes and the audits of its top no's go to the judge model in the next batch; no call is synchronous."""
    # the first reader reads as well: the yes is confirmed, the audits find no miss
    readers = Readers(missed=())
    judge_env.responder = readers

    def batch_run() -> dict:
        result = CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--batch", "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def models_of(batch_id: str) -> list[str]:
        return [r["params"]["model"] for r in judge_env.batches[batch_id].requests]

    first = batch_run()
    [submitted] = first["batches"]
    asked = models_of(submitted["id"])
    assert set(asked) == {FIRST} and len(asked) == first["passes"]["alias"]["batched"] > 4  # one order each
    db = sqlite_utils.Database(corpus.root / ".knomit" / "judge.db")
    assert {r[0] for r in db.execute("SELECT model FROM batch_requests")} == {FIRST}

    judge_env.end_batches()
    # the first reads come in: no's are verdicts, the yeses and 2 audits go to the judge model
    second = batch_run()
    alias = second["passes"]["alias"]
    assert alias["first_reads"] == len(asked) and alias["declined"] == len(asked) - 2
    # the session's seeded draw (audits.py): the top two no's at least, pi = 1
    due = alias["audits_batched"]
    # the two true pairs wait on the judge model
    assert due >= 2 and alias["batched"] == 2
    [new] = [b for b in second["batches"] if b["status"] == "submitted"]
    # the yeses and the audits, one order each
    assert models_of(new["id"]) == [STRONG] * (2 + due)
    # each first read billed at the first reader's batch price: 100 in, 20 out at claude-haiku-5-5's
    assert alias["cost_usd"] == pytest.approx(len(asked) * (100 * 0.10 + 20 * 0.50) / 1e6 / 2)

    # the judge model's first orders come in: a yes needs its second order, in the next batch; the audits read
    judge_env.end_batches()
    third = batch_run()["passes"]["alias"]
    assert (third["audits"], third["misses"], third["batched"]) == (due, 0, 2)
    judge_env.end_batches()
    fourth = batch_run()["passes"]["alias"]
    assert fourth["applied"] == 2 and len(merged(corpus)) == 2
    # every reading went through a batch
    assert judge_env.calls == 0
    kinds = [r[0] for r in db.execute("SELECT kind FROM audits ORDER BY kind")]
    assert kinds == ["audit"] * due + ["confirm"] * 2


def test_a_dry_run_batch_with_the_first_reader_is_at_most_half_the_synchronous_estimate(
    tmp_path, judge_env, monkeypatch
):
    # the default: claude-haiku-5-5 reads first
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    repo = demo_repo(tmp_path / "demo")

    def dry(*extra) -> tuple[float, str]:
        result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--dry-run", *extra])
        assert result.exit_code == 0, result.output
        summary = result.stdout.splitlines()[0]
        return float(summary.split("about $", 1)[1].split()[0].rstrip(";")), summary

    (sync, sync_line), (batch, batch_line) = dry(), dry("--batch")
    # half price for the questions; the describe step's lines are asked one by one in either mode
    assert sync > 0 and 0.4 * sync <= batch <= 0.6 * sync
    assert "at batch prices;" in batch_line and "at batch prices" not in sync_line
    assert f"by {FIRST}" in CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--dry-run", "--batch"]).stdout
    assert judge_env.calls == 0 and judge_env.batch_calls == []


def test_a_miss_an_audit_in_a_batch_finds_is_applied_in_a_later_collection(corpus, judge_env):
    """The first reader answers no on a true pair; the batched audit of its top no's reads it with the judge
    model, whose yes (both orders, each in its own batch) is a miss, applied as one read at once would be."""
    judge_env.responder = Readers(missed=(RETRY,))
    outs = []
    for _ in range(4):
        result = CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--batch", "--json"])
        assert result.exit_code == 0, result.output
        outs.append(json.loads(result.stdout)["passes"]["alias"])
        judge_env.end_batches()
    # the audits of the first reader's top no's, RETRY's among them
    assert outs[1]["audits_batched"] >= 2
    assert sum(o["misses"] for o in outs) == 1 and sum(o["resolved"] for o in outs) == 2
    assert len(merged(corpus)) == 2 and judge_env.calls == 0
    db = sqlite_utils.Database(corpus.root / ".knomit" / "judge.db")
    [miss] = list(db.execute("SELECT first_model, strong_model, strong_answer FROM audits WHERE miss = 1"))
    assert miss == (FIRST, STRONG, "same")


class Down(Readers):
    """The first reader answers every call 529 overloaded (or, with `refuse`, refuses the pairs named)."""

    def __init__(self, refuse=None, strong_down: bool = False, **kw):
        super().__init__(missed=(), **kw)
        self.refuse, self.strong_down = refuse, strong_down

    def __call__(self, req, n):
        model = req.body["model"]
        e = json.loads(re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S).group(1))
        pair = frozenset((e["motif_a"]["spelling"], e["motif_b"]["spelling"]))
        if model == FIRST and self.refuse is None:
            self.asked.append((model, pair))
            return status(529, message="Overloaded")
        if model == FIRST and pair in self.refuse:
            self.asked.append((model, pair))
            return refusal()
        if model == STRONG and self.strong_down:
            self.asked.append((model, pair))
            return status(529, message="Overloaded")
        return super().__call__(req, n)


def test_a_first_reader_answering_529_hands_every_question_to_the_judge_model_in_the_same_session(corpus, judge_env):
    readers = Down()
    judge_env.responder = readers
    result = CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)["passes"]["alias"]
    # both true pairs, read by the judge model
    assert len(merged(corpus)) == 2
    first = [p for m, p in readers.asked if m == FIRST]
    # 3 attempts a call (judge.max_attempts), one worker: after DOWN_AFTER questions the first reader is left alone
    assert len(first) == 3 * DOWN_AFTER
    assert r["handed_over"] == r["offered"] and r["first_reads"] == 0
    assert f"{r['offered']} question(s) handed to the judge model: {FIRST} unavailable {r['offered']}" in r["notes"]
    assert r["state"] == "worked" and r["unavailable"] == 0
    store = Store.for_corpus(corpus.root)
    # every verdict the judge model's
    assert {v.model for v in store.verdicts("alias")} == {STRONG}
    store.close()


def test_a_refusal_is_kept_per_model_and_never_stops_another_model(corpus, judge_env):
    # the judge model down: nothing is decided this session
    readers = Down(refuse={PENALTY}, strong_down=True)
    judge_env.responder = readers
    result = CliRunner().invoke(cli, ["review", str(corpus.root), "--pass", "alias", "--json"])
    r = json.loads(result.stdout)["passes"]["alias"]
    assert r["handed_over"] >= 1 and merged(corpus) == []
    db = Store.for_corpus(corpus.root)
    refusals = [(row["model"], row["fingerprint"]) for row in db.db["refusals"].rows]
    db.close()
    # the first reader's refusal, under its own name
    assert [m for m, _ in refusals] == [FIRST]

    # the judge model back; the first reader still refuses the pair
    readers = Down(refuse={PENALTY})
    judge_env.responder = readers
    again = alias(corpus)
    # not asked again of the model that refused
    assert not any(m == FIRST and p == PENALTY for m, p in readers.asked)
    # the judge model reads it
    assert any(m == STRONG and p == PENALTY for m, p in readers.asked)
    assert any("penalty-blocks-own-recovery" in s for s in merged(corpus))
    assert again["handed_over"] >= 1 and any(
        "handed to the judge model" in n and "refused" in n for n in again["notes"]
    )


def test_rebuild_makes_the_same_audit_rows_with_their_inclusion_probabilities(corpus, judge_env):
    judge_env.responder = Readers(missed=(PENALTY,))
    alias(corpus)
    cols = "pass, fingerprint, session, kind, first_model, strong_model, miss, score, verdict, pi, stratum, born"
    store = Store.for_corpus(corpus.root)
    before = sorted(map(tuple, store.db.execute(f"SELECT {cols} FROM audits")))
    store.close()
    # every audit kept with its pi
    assert before and all(row[9] is not None for row in before)
    assert any(row[10] == "top" and row[9] == 1.0 for row in before)
    assert CliRunner().invoke(cli, ["rebuild", str(corpus.root)]).exit_code == 0
    store = Store.for_corpus(corpus.root)
    after = sorted(map(tuple, store.db.execute(f"SELECT {cols} FROM audits")))
    store.close()
    assert after == before
