"""Probation: labels that show the alias judge leaning wrong stop its applying, prune goes on, labels end it."""

from __future__ import annotations

import json
import shutil
import threading

import pytest
from click.testing import CliRunner
from helpers import CorpusRepo, fact_text, make_repo

from knomit_judge.cli import cli
from knomit_judge.labels import label
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

# Eleven motif pairs, each one mechanism spelled twice (a judge saying "same" is right or wrong as the
# labels say); the first eight are in the corpus from the start, the last three arrive later.
PAIRS = [
    (
        "cache-stampede",
        "thundering-herd-on-miss",
        "When a hot cache key expires every request recomputes it at once and floods the database",
        "Simultaneous misses on one popular cache entry stampede the backing store",
    ),
    (
        "clock-skew-misordering",
        "wall-clock-drift-ordering",
        "Clock skew between servers makes timestamp ordering of events wrong",
        "Drifting wall clocks on different hosts misorder the events they log",
    ),
    (
        "priority-inversion",
        "low-priority-lock-holder",
        "A low-priority task holding a lock blocks the high-priority task waiting for it",
        "High-priority threads stall behind a low-priority thread that owns the mutex",
    ),
    (
        "survivorship-bias",
        "only-survivors-sampled",
        "Studying only the companies that survived overstates what success requires",
        "Sampling only the survivors hides the failures that shared their traits",
    ),
    (
        "metric-becomes-target",
        "gamed-measure",
        "When a metric becomes a target people game it and it stops measuring anything",
        "Turning a measure into a goal corrupts the measure",
    ),
    (
        "retry-storm",
        "retries-amplify-overload",
        "Clients retrying timed-out requests multiply the load on an overloaded server",
        "Automatic retries turn a brief overload into a lasting outage",
    ),
    (
        "bus-factor",
        "single-expert-dependency",
        "A project only one engineer understands stalls when that engineer leaves",
        "Knowledge held by a single person is lost when they depart",
    ),
    (
        "alert-fatigue",
        "ignored-noisy-pages",
        "On-call engineers who get too many false alarms start ignoring real ones",
        "A flood of noisy pages trains responders to dismiss every alert",
    ),
    (
        "head-of-line-blocking",
        "slow-first-request-blocks-queue",
        "One slow request at the front of a queue delays every request behind it",
        "A stalled first item in a FIFO holds up all the items queued after it",
    ),
    (
        "split-brain",
        "two-leaders-after-partition",
        "A network partition can leave a cluster with two nodes that both believe they lead",
        "After a partition heals, two elected leaders have accepted conflicting writes",
    ),
    (
        "bikeshedding",
        "trivial-topics-get-most-debate",
        "Committees spend the most time on the most trivial decisions",
        "Meetings argue longest over details everyone understands, like the colour of the shed",
    ),
]
FIRST, LATE = PAIRS[:8], PAIRS[8:]
# one fact written twice: the prune judge merges them
DUPLICATES = {
    "facts/ops/backup-a.md": fact_text(
        "Backups that are never test-restored cannot be trusted to work",
        ["untested-backup"],
        0.7,
        ["b1"],
        "A backup nobody has restored is a hope, not a backup.",
    ),
    "facts/ops/backup-b.md": fact_text(
        "An untested backup restore is not a working backup",
        ["untested-backup"],
        0.5,
        ["b2"],
        "Until a restore has been tried, nobody knows whether the backup works.",
    ),
}
MERGE = {"decision": "merge", "rationale": "Both say an untested backup cannot be trusted."}


def pair_facts(pairs) -> dict[str, str]:
    out = {}
    for a, b, ta, tb in pairs:
        out[f"facts/{a}.md"] = fact_text(ta, [a], 0.6, [f"src-{a}"], ta + ".")
        out[f"facts/{b}.md"] = fact_text(tb, [b], 0.5, [f"src-{b}"], tb + ".")
    return out


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A corpus after one session that applied the eight first alias decisions (built once, copied per test)."""
    base = tmp_path_factory.mktemp("probation")
    replies = base / "replies.jsonl"
    replies.write_text(
        "".join(
            json.dumps(
                {
                    "pass": "alias",
                    "a": a,
                    "b": b,
                    "reply": {"same": True, "mechanism": f"'{a}' and '{b}' name one mechanism."},
                }
            )
            + "\n"
            for a, b, _, _ in PAIRS
        )
        + json.dumps({"pass": "prune", "a": "facts/ops/backup-a.md", "b": "facts/ops/backup-b.md", "reply": MERGE})
        + "\n",
        encoding="utf-8",
    )
    repo = make_repo(base / "corpus", pair_facts(FIRST))
    repo.write("knomit-judge.toml", "[budget]\nenabled = false\n")
    repo.commit("config")
    result = review(repo.root, ReviewOptions(judge=f"scripted:{replies}", passes=("alias", "prune")))
    assert result.passes["alias"].applied == 8
    return repo.root, f"scripted:{replies}"


@pytest.fixture
def corpus(template, tmp_path):
    root, judge = template
    shutil.copytree(root, tmp_path / "corpus", symlinks=True)
    return CorpusRepo(tmp_path / "corpus"), judge


def applied_alias(root) -> list[str]:
    store = Store(root / ".knomit" / "judge.db")
    try:
        return [v.id for v in store.verdicts("alias") if v.commit_sha]
    finally:
        store.close()


def six_no_of_eight(repo, tmp_path) -> list[str]:
    ids = applied_alias(repo.root)
    assert len(ids) == 8
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "".join(
            json.dumps({"verdict": vid, "label": "no" if i < 6 else "yes", "note": "checked"}) + "\n"
            for i, vid in enumerate(ids)
        ),
        encoding="utf-8",
    )
    out = run("label", "--file", path, repo.root)
    assert out.exit_code == 0, out.output
    assert out.output.count("to undo it: knomit-judge revert ") == 6  # offered, not done
    return ids


def add_late_facts(repo) -> None:
    for path, text in {**pair_facts(LATE), **DUPLICATES}.items():
        repo.write(path, text)
    repo.commit("more facts")


def status(root) -> dict:
    out = run("status", root, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_six_no_of_eight_put_alias_on_probation_prune_goes_on_and_yes_labels_end_it(corpus, tmp_path):
    repo, judge = corpus
    six_no_of_eight(repo, tmp_path)
    alias = status(repo.root)["precision"]["alias"]
    assert (alias["labels"], alias["right"], alias["probation"]) == (8, 2, True)
    assert (alias["low"], alias["high"]) == (pytest.approx(0.0715, abs=1e-4), pytest.approx(0.5907, abs=1e-4))
    text = "\n".join(status(repo.root)["text"])
    assert "alias: precision 0.25 [0.07, 0.59] from 8 labels - probation (precision 0.25 [0.07, 0.59] < 0.70)" in text
    assert "prune: no labels yet" in text

    add_late_facts(repo)
    result = review(repo.root, ReviewOptions(judge=judge, passes=("alias", "prune")))
    alias, prune = result.passes["alias"], result.passes["prune"]
    # judged and stored, applied nothing
    assert alias.resolved == 3 and alias.applied == 0
    # prune is not on probation
    assert prune.applied == 1
    line = alias.line()
    assert "probation (precision 0.25 [0.07, 0.59] < 0.70): applying nothing, 3 yes verdict(s) held" in line
    assert "knomit-judge inbox" in line
    for path, text in pair_facts(LATE).items():
        # no alias commit touched them
        assert repo.read(path) == text
    assert "status: retracted" in repo.read("facts/ops/backup-b.md")
    assert repo.status() == ""

    inbox = json.loads(run("inbox", repo.root, "--json").stdout)
    held = [i for i in inbox["items"] if i["kind"] == "held"]
    assert inbox["probation"] == ["alias"] and len(held) == 3
    assert inbox["precision"]["alias"]["text"] == "precision 0.25 [0.07, 0.59] from 8 labels"
    # nothing undecided: held come first
    assert [i["kind"] for i in inbox["items"]][:3] == ["held"] * 3
    assert "alias on probation (precision 0.25 [0.07, 0.59] < 0.70)" in run("inbox", repo.root).stdout
    assert {frozenset(i["subject"].values()) for i in held} == {frozenset(p[:2]) for p in LATE}

    # Labelling the held yeses "yes" lifts the interval's top to 0.72 >= 0.70: probation ends.
    for item in held:
        assert run("label", item["verdict"], "yes", repo.root).exit_code == 0
    alias = status(repo.root)["precision"]["alias"]
    assert (alias["labels"], alias["right"], alias["probation"]) == (11, 5, False)
    assert alias["high"] == pytest.approx(0.7199, abs=1e-4)

    # The next session applies the stored yeses without asking again. A stopped session offers nothing
    # new, so this one can show it: every held decision applied, 0 judge calls.
    stop = threading.Event()
    stop.set()
    result = review(repo.root, ReviewOptions(judge=judge, passes=("alias", "prune"), stop=stop))
    assert result.passes["alias"].applied == 3
    assert sum(r.judge_calls for r in result.passes.values()) == 0
    assert not result.passes["alias"].probation
    assert set(applied_alias(repo.root)) >= {i["verdict"] for i in held}
    for a, b, _, _ in LATE:
        assert sum(f"'{a}'" in s and f"'{b}'" in s for s in repo.log()) == 1  # one merge commit each
    assert repo.status() == ""


def test_rebuild_after_deleting_the_db_restores_labels_and_probation(corpus, tmp_path):
    repo, judge = corpus
    six_no_of_eight(repo, tmp_path)
    before = status(repo.root)["precision"]
    for p in (repo.root / ".knomit").glob("judge.db*"):
        p.unlink()
    out = run("rebuild", repo.root)
    assert out.exit_code == 0, out.output
    after = status(repo.root)["precision"]
    assert after == before and after["alias"]["probation"]
    add_late_facts(repo)
    result = review(repo.root, ReviewOptions(judge=judge, passes=("alias", "prune")))
    assert result.passes["alias"].resolved == 3 and result.passes["alias"].applied == 0
    assert result.passes["alias"].probation.startswith("probation (precision 0.25 [0.07, 0.59] < 0.70)")
    assert result.passes["prune"].applied == 1


def test_a_yes_labelled_no_is_never_applied(corpus, tmp_path):
    repo, judge = corpus
    six_no_of_eight(repo, tmp_path)
    add_late_facts(repo)
    review(repo.root, ReviewOptions(judge=judge, passes=("alias",)))  # on probation: 3 held
    held = [i["verdict"] for i in json.loads(run("inbox", repo.root, "--json").stdout)["items"] if i["kind"] == "held"]
    label(repo.root, [(held[0], "no", "not one mechanism")], by="tester")
    label(
        repo.root,
        [(v, "yes", "") for v in held[1:]] + [(v, "yes", "") for v in applied_alias(repo.root)[:6]],
        # the six "no" relabelled yes: the interval clears the floor
        by="tester",
    )
    stop = threading.Event()
    stop.set()
    result = review(repo.root, ReviewOptions(judge=judge, passes=("alias",), stop=stop))
    assert result.passes["alias"].applied == 2
    assert "1 yes verdict(s) labelled no by a person, not applied" in result.passes["alias"].line()
    assert held[0] not in applied_alias(repo.root)
