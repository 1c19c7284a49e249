"""The prune judge: merge and retract, survivors by fixed rules, trailers, and retracted facts left alone."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from helpers import FAST, assert_four_trailers, decision_commits, fact_text, git, make_repo, scripted, write_config
from judges import responder

from knomit_judge.cli import cli
from knomit_judge.corpus import load_corpus, parse_fact
from knomit_judge.session.review import ReviewOptions, review


def front_of(text: str) -> str:
    """The front matter of a fact file without its closing '---'."""
    return text.split("\n---\n", 1)[0]


# --- merge and retract ------------------------------------------------------------------------

KEEP, LOSE, X, Y, Z = ("facts/a/pool.md", "facts/b/pool-copy.md", "facts/a/x.md", "facts/a/y.md", "facts/c/z.md")
KEEP_TITLE = "Connection pools without read timeouts exhaust when a dependency slows"
LOSE_TITLE = "A pool with no read timeout runs dry when one dependency hangs"


def pool_corpus(tmp_path):
    return make_repo(
        tmp_path / "corpus",
        {
            KEEP: fact_text(
                KEEP_TITLE,
                ["missing-timeout"],
                0.8,
                ["inc-1", "shared-doc"],
                "When a downstream call hangs, each request holds its pooled connection until none is left.",
                links=[X],
                extra='reviewed_by:   "Ana"   # odd spacing, kept\nnotes:\n  - keep me\n',
            ),
            LOSE: fact_text(
                LOSE_TITLE,
                ["pool-exhaustion", "missing-timeout"],
                0.6,
                ["shared-doc", "inc-2"],
                "Without a read timeout a hung dependency pins every connection of the pool.",
                links=[Y, KEEP],
                extra="origin: {team: sre, id: 7}\n",
            ),
            X: fact_text(
                "Bulkheads isolate one tenant's overload from the rest",
                ["bulkhead"],
                0.5,
                ["s-x"],
                "Separate pools per tenant stop one noisy tenant from starving others.",
                links=[LOSE],
            ),
            Y: fact_text(
                "Timeouts should be shorter than the caller's own deadline",
                ["deadline-budget"],
                0.5,
                ["s-y"],
                "A callee timeout longer than the caller deadline only wastes work.",
                links=[LOSE, KEEP],
            ),
            Z: fact_text(
                "Sourdough rises faster in a warm kitchen",
                ["yeast-temperature"],
                0.5,
                ["s-z"],
                "Yeast metabolism speeds up with temperature.",
                links=[X],
            ),
        },
    )


MERGE = {"decision": "merge", "rationale": "Both say a pool with no read timeout is exhausted by a hung dependency."}


def test_merge_absorbs_relinks_and_keeps_unknown_keys(tmp_path, judge_env):
    repo = pool_corpus(tmp_path)
    write_config(repo, FAST)
    before = {p: repo.read(p) for p in (KEEP, LOSE, Z)}
    judge_env.responder = responder(prune={frozenset({KEEP_TITLE, LOSE_TITLE}): MERGE})

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    prune = result.passes["prune"]
    assert prune.state == "worked" and prune.applied == 1 and prune.judge_calls == judge_env.calls > 0
    [t] = assert_four_trailers(repo.root, "prune")
    vid = t["Knomit-Verdict"]
    assert t["Knomit-Judge"] == "claude-sonnet-5-5 / prune@2" and t["Knomit-Rationale"] == MERGE["rationale"]
    assert git(repo.root, "log", "-1", "--format=%s", f"--grep={vid}") == f"prune: merge {LOSE} into {KEEP}\n"

    keep, lose = (parse_fact(p, repo.read(p)) for p in (KEEP, LOSE))
    assert keep.active and keep.sources == ("inc-1", "shared-doc", "inc-2")
    assert keep.motifs == ("missing-timeout", "pool-exhaustion")
    # the loser's own link to the survivor is dropped, not self-linked
    assert keep.links == (X, Y)
    assert lose.status == "retracted"
    assert re.search(rf"^retracted_by: {vid}$", repo.read(LOSE), re.M)
    assert re.search(rf"^survivor: {KEEP}$", repo.read(LOSE), re.M)
    # unknown keys (and every line not rewritten) byte-for-byte, in both files
    assert 'reviewed_by:   "Ana"   # odd spacing, kept\nnotes:\n  - keep me\n' in repo.read(KEEP)
    assert repo.read(LOSE).startswith(front_of(before[LOSE]) + "\n")
    assert repo.read(LOSE).endswith(before[LOSE].split("\n---\n", 1)[1])
    # facts that linked to the loser now link to the survivor, deduplicated, order kept
    assert parse_fact(X, repo.read(X)).links == (KEEP,)
    assert parse_fact(Y, repo.read(Y)).links == (KEEP,)
    assert repo.read(Z) == before[Z]
    assert repo.status() == ""

    # unchanged pairs (including those the merge changed, asked in round 2) are not asked again
    calls = judge_env.calls
    assert review(repo.root, ReviewOptions(passes=("prune",))).passes["prune"].state == "caught-up"
    assert judge_env.calls == calls


def test_retract_points_at_survivor_and_carries_over_provenance_but_no_motif(tmp_path):
    repo = pool_corpus(tmp_path)
    before = {p: repo.read(p) for p in (KEEP, LOSE, X)}
    judge = scripted(
        tmp_path,
        {
            "pass": "prune",
            "a": LOSE,
            "b": KEEP,
            "reply": {"decision": "retract", "redundant": "A", "rationale": "The copy adds nothing to the pool fact."},
        },
    )

    result = review(repo.root, ReviewOptions(passes=("prune",), judge=judge))

    assert result.passes["prune"].applied == 1
    [t] = assert_four_trailers(repo.root, "prune")
    assert repo.log()[1] == f"prune: retract {LOSE} (contained in {KEEP})"
    # The survivor takes in the source and the link it lacked, so no citation lives only in git history,
    # but not the retired fact's motif: a retraction says the fact added no claim.
    keep = parse_fact(KEEP, repo.read(KEEP))
    assert keep.sources == ("inc-1", "shared-doc", "inc-2")
    # the loser's link to the survivor itself is not taken in
    assert keep.links == (X, Y)
    assert keep.motifs == ("missing-timeout",)
    assert 'reviewed_by:   "Ana"   # odd spacing, kept\nnotes:\n  - keep me\n' in repo.read(KEEP)
    body = git(repo.root, "log", "-1", "--format=%B", "--grep", f"^Knomit-Verdict: {t['Knomit-Verdict']}$")
    assert f"Carried over into {KEEP}:\n- from {LOSE}: sources: + inc-2\n- from {LOSE}: links: + {Y}\n" in body
    lose = repo.read(LOSE)
    assert "status: retracted\n" in lose and f"retracted_by: {t['Knomit-Verdict']}\n" in lose
    assert f"survivor: {KEEP}\n" in lose and "origin: {team: sre, id: 7}\n" in lose
    assert parse_fact(X, repo.read(X)).links == (KEEP,)

    # revert gives both files (and the relinked one) back byte for byte
    out = CliRunner().invoke(cli, ["revert", t["Knomit-Verdict"], str(repo.root)])
    assert out.exit_code == 0, out.output
    assert {p: repo.read(p) for p in (KEEP, LOSE, X)} == before


def test_merge_without_rationale_is_recorded_distinct(tmp_path):
    repo = pool_corpus(tmp_path)
    judge = scripted(
        tmp_path, {"pass": "prune", "a": KEEP, "b": LOSE, "reply": {"decision": "merge", "rationale": " "}}
    )
    result = review(repo.root, ReviewOptions(passes=("prune",), judge=judge))
    assert result.passes["prune"].applied == 0 and result.passes["prune"].resolved == 0
    assert parse_fact(LOSE, repo.read(LOSE)).active
    out = CliRunner().invoke(cli, ["verdicts", str(repo.root), "--pass", "prune", "--json"]).stdout
    planted = [v for v in json.loads(out)["verdicts"] if {v["subject"]["a"], v["subject"]["b"]} == {KEEP, LOSE}]
    assert planted[0]["answer"] == "distinct" and "without a rationale" in planted[0]["rationale"]


# --- survivor rules: each key decides on its own when every earlier key ties --------------------

FILLER = {
    "facts/fill/one.md": ("Tide tables follow the moon's orbit", 0.5, ["t1"]),
    "facts/fill/two.md": ("Glaciers carve U-shaped valleys", 0.5, ["t2"]),
}
PAIR_BODY = "A cache entry that is never invalidated serves stale data after the source changes."


WHY = {
    "confidence": "higher confidence (0.7 vs 0.6)",
    "sources": "more sources (2 vs 1)",
    "carriers": "more carriers of its motifs (3 vs 1)",
    "older path": "the older path",
}


@pytest.mark.parametrize(
    "rule, winner, loser",
    [
        # the winner is better on exactly one key; the loser is better on every later key
        (
            "confidence",
            dict(confidence=0.7, sources=["w1"], motifs=["rare-w"]),
            dict(confidence=0.6, sources=["l1", "l2", "l3"], motifs=["common"]),
        ),
        (
            "sources",
            dict(confidence=0.6, sources=["w1", "w2"], motifs=["rare-w"]),
            dict(confidence=0.6, sources=["l1"], motifs=["common"]),
        ),
        (
            "carriers",
            dict(confidence=0.6, sources=["w1"], motifs=["common"]),
            dict(confidence=0.6, sources=["l1"], motifs=["rare-l"]),
        ),
        (
            "older path",
            dict(confidence=0.6, sources=["w1"], motifs=["shared"]),
            dict(confidence=0.6, sources=["l1"], motifs=["shared"]),
        ),
    ],
)
def test_survivor_rules(tmp_path, rule, winner, loser):
    # The loser is added first (older) and sorts first, except in the age rule, where the winner is older.
    win_path, lose_path = "facts/z-winner.md", "facts/a-loser.md"
    fillers = {p: fact_text(t, ["common"], c, s) for p, (t, c, s) in FILLER.items()}
    first, second = (
        ((win_path, winner), (lose_path, loser)) if rule == "older path" else ((lose_path, loser), (win_path, winner))
    )
    repo = make_repo(
        tmp_path / "corpus",
        {**fillers, first[0]: fact_text("Stale cache entry " + first[0], body=PAIR_BODY, **first[1])},
    )
    repo.write(second[0], fact_text("Stale cache entry " + second[0], body=PAIR_BODY, **second[1]))
    # usually within the same second as the first: age is commit order, not time
    repo.commit("second fact")
    judge = scripted(tmp_path, {"pass": "prune", "a": win_path, "b": lose_path, "reply": MERGE})

    result = review(repo.root, ReviewOptions(passes=("prune",), judge=judge))

    assert result.passes["prune"].applied == 1, result.text_lines()
    facts = load_corpus(repo.root).facts
    assert facts[win_path].active, f"{rule}: the winner was retracted"
    assert facts[lose_path].status == "retracted"
    assert f"survivor: {win_path}\n" in repo.read(lose_path)
    assert f"survives by the fixed rules: {WHY[rule]}" in git(
        repo.root, "log", "-1", "--format=%b", decision_commits(repo.root, "prune")[0]
    )


# --- selection, memory, and retracted facts ---------------------------------------------------


def test_pass_prune_selects_prune_and_exact_only(tmp_path):
    repo = pool_corpus(tmp_path)
    judge = scripted(
        tmp_path,
        {"pass": "alias", "a": "missing-timeout", "b": "pool-exhaustion", "reply": {"same": True, "mechanism": "x"}},
    )
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--pass", "prune", "--json", "--judge", judge])
    out = json.loads(result.stdout)
    assert list(out["passes"]) == ["exact", "prune"]
    assert out["passes"]["prune"]["judged"] > 0
    assert not (repo.root / ".knomit/verdicts/alias.jsonl").exists()
    assert not (repo.root / ".knomit/verdicts/discovery.jsonl").exists()


GHOST = "facts/old/ghost.md"
GHOST_TITLE = "Stale retracted claim about connection pools and read timeouts"


def test_retracted_facts_are_ignored_by_every_pass(tmp_path, judge_env):
    repo = pool_corpus(tmp_path)
    # a retracted near-copy of the pool fact, an exact duplicate of another, carrying a motif of its own
    repo.write(
        GHOST,
        fact_text(
            GHOST_TITLE,
            ["ghost-motif", "missing-timeout"],
            0.9,
            ["g"],
            "When a downstream call hangs, each request holds its pooled connection until none is left.",
            extra="status: retracted\nretracted_by: v000000000000\nsurvivor: facts/a/pool.md\n",
        ),
    )
    repo.write(
        "facts/old/ghost-of-z.md",
        fact_text(
            "Sourdough rises faster in a warm kitchen",
            ["yeast-temperature"],
            0.5,
            ["s-z"],
            "Yeast metabolism speeds up with temperature.",
            extra="status: retracted\n",
        ),
    )
    repo.commit("retracted facts")
    write_config(repo, FAST)
    ghost_before = repo.read(GHOST)
    judge_env.responder = responder()

    result = review(repo.root, ReviewOptions())

    assert judge_env.calls > 0
    for request in judge_env.requests:
        assert GHOST_TITLE not in request.prompt and "ghost-motif" not in request.prompt
    assert result.passes["exact"].state == "nothing-qualified"
    assert repo.read(GHOST) == ghost_before
