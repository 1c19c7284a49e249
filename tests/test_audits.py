"""The first reader measured (audits.py): the seeded draw with its inclusion probabilities, and the estimate and
bound it gives, on a simulated first reader whose recall is known."""

from __future__ import annotations

import random

import pytest

from knomit_judge.audits import BOUND_MIN, TOP, WINDOW, MissFit, budget, draw, estimate_from, floor_draw, upper_binomial

PASS = "prune"


# slow: the bound checked against the true recall over hundreds of seeded draws
pytestmark = pytest.mark.slow


def simulate(
    seed: int, recall: float, positives: int = 4, nos: int = 300, share: float = 0.05, target: float = 0.8
) -> tuple[float, object]:
    """WINDOW sessions of a first reader that says yes to each true pair with chance `recall`: its no's (misses
    among them, scored higher, as true pairs are) drawn and audited as a session does. Returns the reader's true
    recall over the window and the estimate."""
    rng = random.Random(seed)
    caught = missed = 0
    window_nos, floors, audits, fit_rows = [], {}, [], []
    for k in range(WINDOW):
        session = f"s{seed}-{k}"
        truth = {}
        for i in range(nos):
            truth[f"{session}-n{i}"] = (rng.betavariate(2, 5), False)
        for i in range(positives):
            if rng.random() < recall:
                caught += 1
            else:
                missed += 1
                truth[f"{session}-m{i}"] = (rng.betavariate(5, 2), True)
        d = draw(
            session,
            PASS,
            [(fp, s) for fp, (s, _) in truth.items()],
            [],
            reads=len(truth) + caught,
            share=share,
            target=target,
            confirmed=caught,
            fit=MissFit(list(fit_rows)),
        )
        floors[session] = d.floor
        window_nos += [(session, fp) for fp in truth]
        for fp in d.picked:
            score, miss = truth[fp]
            audits.append({"fingerprint": fp, "born": session, "stratum": d.stratum[fp], "pi": d.pi[fp], "miss": miss})
            fit_rows.append((score, miss, d.pi[fp]))
    return caught / (caught + missed), estimate_from(window_nos, floors, audits, caught, PASS)


def test_the_bound_sits_below_the_true_recall_in_at_least_95_percent_of_seeds():
    below = bounded = 0
    errors = []
    for seed in range(200):
        true, e = simulate(seed, recall=0.7)
        assert e.misses_estimated is not None and e.recall is not None
        errors.append(e.recall - true)
        if e.recall_low is not None:
            bounded += 1
            below += e.recall_low <= true
    # the floor's sample is large enough to bound nearly always
    assert bounded >= 190
    assert below >= 0.95 * bounded, (below, bounded)
    # the estimate is centred: inverse-probability weighting, not the top of the list
    assert abs(sum(errors) / len(errors)) < 0.08


def test_a_good_reader_is_bounded_near_its_recall_and_a_bad_one_far_below_the_target():
    good = [simulate(seed, recall=0.95) for seed in range(40)]
    bad = [simulate(seed, recall=0.3) for seed in range(40)]
    # a reader above the target mostly reads on
    assert sum(e.reason(0.8) == "" for _, e in good) >= 30
    # one far below it is suspended
    assert sum(e.reason(0.8) != "" for _, e in bad) >= 38
    assert all(e.recall_low is None or e.recall_low <= 0.95 for _, e in good)


def test_the_draw_is_fixed_by_the_session_and_gives_the_top_two_certainty():
    new = [(f"q{i}", i / 100) for i in range(100)]
    one = draw(
        "sess", PASS, new, [("old", 0.5, "earlier")], reads=100, share=0.05, target=0.8, confirmed=3, fit=MissFit()
    )
    again = draw(
        "sess", PASS, new, [("old", 0.5, "earlier")], reads=100, share=0.05, target=0.8, confirmed=3, fit=MissFit()
    )
    other = draw(
        "other", PASS, new, [("old", 0.5, "earlier")], reads=100, share=0.05, target=0.8, confirmed=3, fit=MissFit()
    )
    # seeded: a rerun draws the same audits
    assert one.picked == again.picked and one.pi == again.pi
    assert one.picked != other.picked
    assert [fp for fp, p in one.pi.items() if p == 1.0][:TOP] == ["q99", "q98"]
    # every no has a chance
    assert all(0 < p <= 1 for p in one.pi.values()) and len(one.pi) == 101
    # pi summed: the audits the budget buys (less the overlap of the floor and the targeted draws)
    assert one.expected == pytest.approx(budget(100, 0.05), rel=0.02)
    # the targeted share leans toward likely misses
    assert one.pi["q50"] > one.pi["q10"]
    # the floor: once, when read
    assert one.born["old"] == "earlier" and one.stratum.get("old") in (None, "pool")
    floor = [fp for fp, _ in new[:-TOP] if floor_draw("sess", PASS, fp) < one.floor]
    assert all(one.stratum[fp] == "floor" for fp in floor)


def test_too_few_audits_give_no_bound_and_the_binomial_bound_is_conservative():
    e = estimate_from([("s", "a"), ("s", "b")], {"s": 0.01}, [], 5, PASS)
    assert e.recall_low is None and e.floor_sample < BOUND_MIN
    assert "not enough audits to bound" in e.line(0.8)
    # the rule of three's exact form
    assert upper_binomial(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100), abs=1e-6)
    assert upper_binomial(3, 3) == 1.0 and upper_binomial(0, 0) == 1.0


def test_the_suspension_lifts_once_the_counted_misses_clear_the_evidence():
    # one miss drawn at 1 in 10: estimated as 10, a recall of 9 / 19 below the target
    e = estimate_from(
        [("s", f"n{i}") for i in range(200)],
        {"s": 0.05},
        [{"fingerprint": "n1", "born": "s", "stratum": "target", "pi": 0.1, "miss": True}],
        9,
        PASS,
    )
    assert e.recall == pytest.approx(9 / 19, abs=1e-4) and e.reason(0.8)
    # the unread no's may hide more
    assert e.reason(0.8, all_read=False) != ""
    # the judge model read them all: 9 of 10, the target met
    assert e.reason(0.8, all_read=True) == ""
    # ... and not a target of 0.95
    assert e.reason(0.95, all_read=True) != ""


def test_a_first_reader_whose_yeses_the_judge_model_rejects_is_named_with_what_they_cost_and_suspended():
    e = estimate_from([("s", f"n{i}") for i in range(50)], {"s": 0.05}, [], 1, PASS, rejected=6, rejected_usd=0.12)
    assert e.reason(0.8) == "the judge model rejected 6 of its 7 yeses, $0.1200 spent on them"
    fewer = estimate_from([("s", f"n{i}") for i in range(50)], {"s": 0.05}, [], 1, PASS, rejected=4, rejected_usd=0.08)
    # below the bound of 5 rejected: not yet named
    assert fewer.reason(0.8) == ""
