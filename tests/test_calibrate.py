"""Calibration: a judge of known error rate gives hand-computed numbers; nothing is applied; reruns are free."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner
from helpers import FAST, REPO, SAME, make_repo, scripted, write_config
from messages_server import text

from knomit_judge.calibrate import calibrate, kappa
from knomit_judge.cli import cli
from knomit_judge.corpus import load_corpus
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

CALIBRATION = REPO / "corpus-fixtures" / "calibration"
LABELS = CALIBRATION / "labels.jsonl"
# the server's usage at claude-sonnet-5-5's price
PRICE_PER_CALL = 100 * 2.0 / 1e6 + 20 * 10.0 / 1e6

# The known errors of the loopback judge below, by question (pairs in label order).
ALIAS_WRONG = {
    ("bullwhip-effect", "demand-amplification-upstream"),  # true, answered different
    ("cache-stampede", "cache-poisoning"),
}  # false, answered same
# Position-sensitive: 'same' only when the first spelling is shown first, so the judge records a split (the default).
ALIAS_BY_ORDER = {("alert-fatigue", "alarm-desensitisation"), ("cobra-effect", "unintended-consequences")}
PRUNE_WRONG = {
    ("facts/ops/homepage-cache-stampede.md", "facts/ops/homepage-recompute-herd.md"): "distinct",  # merge
    ("facts/org/hanoi-rat-bounty.md", "facts/org/vulnerability-bounty-for-maintainers.md"): "merge",  # distinct
    (
        "facts/distributed/lww-drops-newer-writes.md",
        # merge: a yes, but not the label
        "facts/distributed/lww-lost-updates-slow-clock.md",
    ): "retract",
}
PRUNE_BY_ORDER = {("facts/ops/db-rotation-slow-acks.md", "facts/ops/pages-mostly-non-actionable.md")}  # retract
# The fact each retract answer names as redundant: the narrow one, as the fixture's scripted replies say
# (and, for the lww merge answered retract, the second fact).
REDUNDANT = {
    frozenset((e["a"], e["b"])): e[e["reply"]["redundant"].lower()]
    for e in map(json.loads, (CALIBRATION / "judge-replies.jsonl").read_text().splitlines())
    if e["pass"] == "prune" and e["reply"]["decision"] == "retract"
}
for narrow, broad in (
    ("lww-lost-updates-slow-clock", "lww-drops-newer-writes"),
    ("http2-mobile-single-loss", "http2-loss-stalls-all-streams"),
):
    REDUNDANT[frozenset((f"facts/distributed/{narrow}.md", f"facts/distributed/{broad}.md"))] = (
        f"facts/distributed/{narrow}.md"
    )
DISCOVERY_WRONG = {
    frozenset(
        [
            "facts/supply/order-variance-grows-upstream.md",
            "facts/supply/distributor-orders-double-variance.md",
            "facts/supply/capacity-request-padding.md",
        ]
    )
}  # false, answered yes


def calibration_repo(tmp_path):
    repo = make_repo(tmp_path / "calibration")
    shutil.copytree(CALIBRATION / "facts", repo.root / "facts", dirs_exist_ok=True)
    repo.commit("calibration corpus")
    write_config(repo, FAST)
    return repo


def evidence_of(prompt: str) -> dict:
    return json.loads(prompt.split("<evidence>\n", 1)[1].split("\n</evidence>", 1)[0])


def known_error_responder(root):
    """Answers from the labels, except on the fixed subsets above; it decides from the prompt text alone."""
    labels = {}
    for line in LABELS.read_text().splitlines():
        e = json.loads(line)
        labels[frozenset(e["group"]) if e["pass"] == "discovery" else frozenset((e["a"], e["b"]))] = e["label"]
    by_title = {f.title: f.path for f in load_corpus(root).active()}

    def reply(request, n):
        ev = evidence_of(request.prompt)
        if "motif_a" in ev:
            first, second = ev["motif_a"]["spelling"], ev["motif_b"]["spelling"]
            pair = next((p for p in ((first, second), (second, first)) if p in ALIAS_WRONG | ALIAS_BY_ORDER), None)
            same = labels[frozenset(pair or (first, second))]
            if pair in ALIAS_WRONG:
                same = not same
            elif pair in ALIAS_BY_ORDER:
                same = (first, second) == pair
            return text(
                json.dumps({"same": True, "mechanism": "One mechanism."} if same else {"same": False, "mechanism": ""})
            )
        if "fact_a" in ev:
            first, second = by_title[ev["fact_a"]["title"]], by_title[ev["fact_b"]["title"]]
            decision = labels[frozenset((first, second))]
            for pair, wrong in PRUNE_WRONG.items():
                if set(pair) == {first, second}:
                    decision = wrong
            for pair in PRUNE_BY_ORDER:
                if set(pair) == {first, second}:
                    decision = "retract" if (first, second) == pair else "distinct"
            if decision == "retract":
                side = "A" if REDUNDANT[frozenset((first, second))] == first else "B"
                return text(json.dumps({"decision": "retract", "redundant": side, "rationale": "One claim."}))
            return text(json.dumps({"decision": decision, "rationale": "" if decision == "distinct" else "One claim."}))
        group = frozenset(by_title[f["title"]] for f in ev["facts"])
        yes = labels[group] != (group in DISCOVERY_WRONG)
        return text(
            json.dumps(
                {
                    "entails": True,
                    "fact": {"title": "T", "body": "B", "motifs": ["m"]},
                    "rationale": "The chain implies it.",
                }
                if yes
                else {"entails": False, "fact": None, "rationale": "Only repeats the theme."}
            )
        )

    return reply


def run_json(*args):
    result = CliRunner().invoke(cli, ["-q", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_known_error_judge_gives_hand_computed_numbers_and_rerun_is_free(tmp_path, judge_env):
    repo = calibration_repo(tmp_path)
    judge_env.responder = known_error_responder(repo.root)
    head = repo.log("%H")

    out = run_json("calibrate", str(LABELS), str(repo.root), "--json")
    alias, prune, discovery = (out["passes"][p] for p in ("alias", "prune", "discovery"))

    # alias, 19 questions, 10 labelled same: TP 10 - bullwhip - alert-fatigue (split) = 8, FP = cache-poisoning = 1,
    # the cobra-effect split records 'different', which its label agrees with.
    assert (alias["n"], alias["tp"], alias["fp"], alias["fn"], alias["tn"]) == (19, 8, 1, 2, 8)
    assert alias["precision"] == round(8 / 9, 4) and alias["recall"] == round(8 / 10, 4)
    assert alias["agreement"] == round(16 / 19, 4)
    # labels 10 yes / 9 no, answers 9 yes / 10 no
    chance = (10 * 9 + 9 * 10) / 19**2
    assert alias["kappa"] == round((16 / 19 - chance) / (1 - chance), 4)
    # two pairs answer by order: a flip where the first order gave the default, a split where it said yes
    assert alias["flips"] + alias["splits"] == 2 and alias["flip_measured"] + alias["yes_first"] == 19, alias
    # both by-order pairs say "same" when asked first (splits): none of the 8 default-first pairs flips
    assert (alias["flips"], alias["flip_measured"], alias["splits"], alias["yes_first"]) == (0, 8, 2, 11)
    assert alias["flip_rate"] == 0.0
    # prune, 16 questions, 7 labelled merge/retract: the stampede merge and the db-rotation split are missed,
    # the bounty pair is a false merge; lww answered retract is a yes (TP) but disagrees 3-way.
    assert (prune["n"], prune["tp"], prune["fp"], prune["fn"], prune["tn"]) == (16, 5, 1, 2, 8)
    assert prune["precision"] == round(5 / 6, 4) and prune["recall"] == round(5 / 7, 4)
    assert prune["agreement"] == round(12 / 16, 4)
    # merge 3/2, retract 4/4, distinct 9/10 (labels/answers)
    chance = (3 * 2 + 4 * 4 + 9 * 10) / 16**2
    assert prune["kappa"] == round((12 / 16 - chance) / (1 - chance), 4)
    assert prune["flips"] + prune["splits"] == 1 and prune["flip_measured"] + prune["yes_first"] == 16, prune
    assert (prune["flips"], prune["flip_measured"], prune["splits"], prune["yes_first"]) == (0, 9, 1, 7)
    # discovery, 8 groups, 3 true: one false yes; one order only, so no flips to measure
    assert (discovery["precision"], discovery["recall"], discovery["agreement"]) == (0.75, 1.0, 0.875)
    assert discovery["flip_rate"] is None
    # every pair in both orders, every group once; cost from the server's usage
    assert (alias["judge_calls"], prune["judge_calls"], discovery["judge_calls"]) == (38, 32, 8)
    assert judge_env.calls == 78
    assert alias["cost_usd"] == pytest.approx(38 * PRICE_PER_CALL)
    assert alias["sample_agreement"] == {"1.00": 19}

    # nothing decided: no commit, no verdict, no journal; the result is kept for the report
    assert repo.log("%H") == head and repo.status() == ""
    store = Store.for_corpus(repo.root)
    assert store.db["verdicts"].count == 0 and store.db["calibrations"].count == 1
    store.close()
    assert not (repo.root / ".knomit" / "verdicts").exists()

    # the rerun is answered from the reply cache: same numbers, 0 server calls
    result = CliRunner().invoke(cli, ["-q", "calibrate", str(LABELS), str(repo.root)], catch_exceptions=False)
    assert judge_env.calls == 78
    assert re.search(
        r"^alias\s+19\s+0\.889\s+0\.800\s+0\.842\s+\S+\s+0\.000 \(0/8\)\s+0\s+\$0\.0000$", result.stdout, re.M
    ), result.stdout
    assert "flips: line 3 alias alert-fatigue / alarm-desensitisation: yes / no by order" in result.stdout


def readme_table() -> dict[str, list[int]]:
    """The hand-computed rows of corpus-fixtures/calibration/README.md: questions, TP, FP, FN, TN per pass."""
    rows = {}
    for line in (CALIBRATION / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 10 and cells[0] in ("alias", "prune", "discovery") and cells[1].isdigit():
            rows[cells[0]] = [int(cells[i]) for i in (1, 4, 5, 6, 7)] + [cells[8], cells[9]]
    return rows


def test_scripted_calibration_judge_gives_the_readme_values(tmp_path):
    repo = calibration_repo(tmp_path)
    judge = f"scripted:{CALIBRATION / 'judge-replies.jsonl'}"
    out = run_json("calibrate", str(LABELS), str(repo.root), "--json", "--judge", judge)
    expected = readme_table()
    assert set(expected) == {"alias", "prune", "discovery"}
    for name, (n, tp, fp, fn, tn, precision, recall) in expected.items():
        got = out["passes"][name]
        assert [got[k] for k in ("n", "tp", "fp", "fn", "tn")] == [n, tp, fp, fn, tn], name
        assert f"{got['precision']:.3f}" == precision.split("= ")[1] and f"{got['recall']:.3f}" == recall.split("= ")[1]
        # no merge is answered as retract or back, so 3-way prune agreement is the accuracy too
        assert got["agreement"] == round((tp + tn) / n, 4)
    # it looks pairs up without regard to order
    assert out["passes"]["alias"]["flip_rate"] == 0.0
    assert out["overall"]["precision"] == 0.75 and out["overall"]["recall"] == 0.9
    assert (
        run_json("calibrate", str(LABELS), str(repo.root), "--json", "--judge", judge)["passes"]["alias"]["judge_calls"]
        == 0
    )


def test_lines_naming_missing_things_are_reported_and_skipped(corpus_repo, tmp_path):
    corpus_repo.write(
        "facts/ops/f4.md",
        corpus_repo.read("facts/ops/f4.md").replace("confidence: 0.8", "confidence: 0.8\nstatus: retracted"),
    )
    corpus_repo.commit("retract f4")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty", "label": True},
                {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "no-such-motif", "label": False},
                {"pass": "prune", "a": "facts/ops/f1.md", "b": "facts/ops/missing.md", "label": "distinct"},
                {
                    "pass": "discovery",
                    "group": ["facts/ops/f1.md", "facts/ops/f2.md", "facts/ops/f4.md"],
                    "label": False,
                },
            ]
        )
        + "\n"
    )
    judge = scripted(
        tmp_path, {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty", "reply": SAME}
    )
    result = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(corpus_repo.root), "--judge", judge])
    assert result.exit_code == 0, result.output
    assert "skipped: line 2 alias: spelling 'no-such-motif' has no active carrier in the corpus" in result.stdout
    assert "skipped: line 3 prune: fact facts/ops/missing.md is not in the corpus" in result.stdout
    assert "skipped: line 4 discovery: fact facts/ops/f4.md is retracted" in result.stdout
    out = run_json("calibrate", str(labels), str(corpus_repo.root), "--json", "--judge", judge)
    assert [s["missing"] for s in out["skipped"]] == ["no-such-motif", "facts/ops/missing.md", "facts/ops/f4.md"]
    assert out["passes"]["alias"]["n"] == 1 and out["passes"]["alias"]["precision"] == 1.0
    # empty denominators are null, not 0
    assert out["passes"]["prune"]["n"] == 0 and out["passes"]["prune"]["precision"] is None
    # one question: chance agreement is total
    assert out["passes"]["alias"]["kappa"] is None


def test_malformed_label_line_is_a_usage_error_naming_the_line(corpus_repo, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        '{"pass": "alias", "a": "x", "b": "y", "label": true}\n{"pass": "prune", "a": "p", "b": "q", '
        '"label": "maybe"}\n'
    )
    result = CliRunner().invoke(cli, ["calibrate", str(labels), str(corpus_repo.root), "--judge", "scripted:/dev/null"])
    assert result.exit_code == 2
    assert "labels.jsonl:2: 'label' must be one of distinct, merge, retract" in result.stderr


def test_a_retract_of_the_fact_a_label_says_contains_the_other_is_scored_a_disagreement(tmp_path):
    repo = calibration_repo(tmp_path)
    narrow, broad = "facts/ops/db-rotation-slow-acks.md", "facts/ops/pages-mostly-non-actionable.md"
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({"pass": "prune", "a": narrow, "b": broad, "label": "retract", "redundant": "A"}) + "\n"
    )
    # B retires the broad fact, which contains the narrow one
    for side, agrees in (("A", True), ("B", False)):
        # its own name: the reply cache is keyed by the judge's
        replies = tmp_path / f"replies-{side}.jsonl"
        replies.write_text(
            json.dumps(
                {
                    "pass": "prune",
                    "a": narrow,
                    "b": broad,
                    "reply": {
                        "decision": "retract",
                        "redundant": side,
                        "rationale": "One rotation is part of the three.",
                    },
                }
            )
            + "\n"
        )
        judge = f"scripted:{replies}"
        out = run_json("calibrate", str(labels), str(repo.root), "--json", "--judge", judge)
        prune = out["passes"]["prune"]
        # a yes on a yes label either way
        assert (prune["tp"], prune["precision"]) == (1, 1.0)
        assert prune["agreement"] == (1.0 if agrees else 0.0) and prune["wrong_side"] == (0 if agrees else 1)
        assert out["questions"][0]["answer"] == ("retract" if agrees else "retract (the other fact)")
    text_out = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(repo.root), "--judge", judge]).stdout
    assert f"disagrees: line 1 prune {narrow} / {broad}: label retract, judge retract (the other fact)" in text_out


@pytest.mark.parametrize("entry", [{"label": "merge", "redundant": "A"}, {"label": "retract", "redundant": "a"}])
def test_a_redundant_side_goes_with_a_retract_label_only(corpus_repo, tmp_path, entry):
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"pass": "prune", "a": "facts/ops/f1.md", "b": "facts/ops/f2.md", **entry}) + "\n")
    result = CliRunner().invoke(cli, ["calibrate", str(labels), str(corpus_repo.root), "--judge", "scripted:/dev/null"])
    assert result.exit_code == 2
    assert "labels.jsonl:1: 'redundant' goes with a retract label only" in result.stderr


def test_a_stored_verdict_answers_instead_of_the_judge(corpus_repo, tmp_path):
    pair = {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty"}
    judge = scripted(tmp_path, {**pair, "reply": SAME})
    # merges the pair: fingerprint moves on
    review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=judge))
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({**pair, "a": "penalty-blocks-own-recovery", "b": "queue-amplifies-latency", "label": False}) + "\n"
    )
    # the review judged this pair 'different'; a judge that now says 'same' is not asked
    judge = scripted(
        tmp_path, {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "queue-amplifies-latency", "reply": SAME}
    )
    out = calibrate(labels, corpus_repo.root, judge)
    q = out["questions"][0]
    assert q["source"] == "stored" and q["answer"] == "no" and q["by_position"] == ["no", "no"]
    assert out["passes"]["alias"]["judge_calls"] == 0 and out["passes"]["alias"]["agreement"] == 1.0


def test_kappa_is_null_without_disagreement_room():
    assert kappa([]) is None
    assert kappa([("yes", "yes"), ("yes", "yes")]) is None
    assert kappa([("yes", "yes"), ("no", "no")]) == 1.0
    assert kappa([("yes", "no"), ("no", "yes")]) == -1.0


def test_the_cost_cap_holds_and_unasked_questions_are_named(corpus_repo, tmp_path, judge_env):
    write_config(corpus_repo, FAST + "concurrency = 1\nmax_cost_usd = 0.0001\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"pass": "alias", "a": "penalty-blocks-own-recovery", "b": b, "label": False}) + "\n"
            for b in ("self-locking-penalty", "queue-amplifies-latency")
        )
    )
    result = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(corpus_repo.root)], catch_exceptions=False)
    # one question, both orders; then the spend passed the cap
    assert judge_env.calls == 2
    assert (
        "unanswered: line 2 alias penalty-blocks-own-recovery / queue-amplifies-latency: not asked - "
        "judge.max_cost_usd $0.0001 reached"
    ) in result.stdout
    assert re.search(r"^alias\s+1\s", result.stdout, re.M), result.stdout


def test_the_docs_transcript_is_what_the_command_prints_after_make_demo(tmp_path, monkeypatch):
    """docs/calibration.md shows the calibrate command a reader runs after `make demo`, which calibrated the same
    corpus once: every answer then comes from the reply cache (issue 54: the page showed the first run's calls)."""
    page = (REPO / "docs" / "calibration.md").read_text(encoding="utf-8")
    block = re.search(r"```console\n\$ knomit-judge calibrate (.*?)\n```", page, re.S).group(1).splitlines()
    # past the command's two lines, up to the cut
    shown = block[2 : block.index("…")]
    # as `make demo` makes it: init, the facts committed
    repo = make_repo(tmp_path / "knomit-calibration")
    shutil.copytree(CALIBRATION / "facts", repo.root / "facts", dirs_exist_ok=True)
    repo.commit("calibration corpus")
    # the page's paths are the clone's
    monkeypatch.chdir(REPO)
    args = [
        "calibrate",
        "corpus-fixtures/calibration/labels.jsonl",
        str(repo.root),
        "--judge",
        "scripted:corpus-fixtures/calibration/judge-replies.jsonl",
    ]
    made = CliRunner().invoke(cli, args)  # `make demo`'s run
    assert made.exit_code == 0 and " 38 " in made.stdout, made.output
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0
    assert again.stdout.splitlines()[: len(shown)] == shown
