"""A prune retract retires the fact the judge names as redundant, never the one that contains it."""

from __future__ import annotations

import json

import pytest
from helpers import FAST, INCIDENT, fact_text, git, knomit_kb, make_repo, run, write_config
from helpers import KEEP as K_KEEP
from helpers import LOSE as K_LOSE
from judges import evidence_of, pass_of
from knomit_format import knomit_parse
from messages_server import text, tool

from knomit_judge.corpus import load_corpus, parse_fact
from knomit_judge.gitops import Decision, decision_trailers, message
from knomit_judge.inbox import inbox
from knomit_judge.passes.prune import retire
from knomit_judge.passes.registry import all_passes
from knomit_judge.recovery import recover_corpus
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store
from knomit_judge.verdicts import Journal, Verdict, pair_fingerprint

# The contained fact has the higher confidence and more sources: the fixed rules would keep it and
# retire its container, with every claim only the container makes.
NARROW_TITLE = "Two correlated event streams must be joined on one clock"
BROAD_TITLE = "Correlated event streams: collect both with eBPF and join them on one clock"
NARROW_BODY = "Two event streams that describe one incident can only be correlated when both carry one clock."
BROAD_BODY = (
    NARROW_BODY + " Both streams are collected in the kernel with eBPF probes, one on the socket layer"
    " and one on process exec, so neither depends on the application logging anything."
)
RATIONALE = "The narrow fact's single claim is restated word for word inside the broad one."
FILLER = {
    "facts/z/tides.md": fact_text(
        "Tide tables follow the moon's orbit",
        ["tides"],
        0.5,
        ["t1"],
        "High tide comes about 50 minutes later each day.",
    )
}


def contained_corpus(tmp_path, narrow: str, broad: str):
    repo = make_repo(
        tmp_path / "corpus",
        {
            narrow: fact_text(NARROW_TITLE, ["one-clock"], 0.95, ["n1", "n2", "n3"], NARROW_BODY),
            broad: fact_text(
                BROAD_TITLE,
                ["one-clock", "ebpf"],
                0.9,
                ["b1"],
                BROAD_BODY,
                links=["facts/z/tides.md"],
                extra='owner:   "sre"   # kept as written\n',
            ),
            **FILLER,
        },
    )
    write_config(repo, FAST)
    return repo


def names(titles: dict[str, str], as_tool: bool = False, decision: str = "retract"):
    """A loopback judge that reads the prompt and, on the pair, names the fact with the title `titles['redundant']`
    as it is shown: "A" when it is shown first. titles['redundant'] may be 'first' to always answer "A"."""

    def respond(request, n):
        if pass_of(request) != "prune":
            return text(json.dumps({"same": False, "mechanism": ""}))
        ev = evidence_of(request)
        shown = [ev["fact_a"]["title"], ev["fact_b"]["title"]]
        if set(shown) != {NARROW_TITLE, BROAD_TITLE}:
            return text(json.dumps({"decision": "distinct", "rationale": ""}))
        side = "A" if titles["redundant"] in (shown[0], "first") else "B"
        reply = {"decision": decision, "redundant": side, "rationale": RATIONALE}
        return tool(reply) if as_tool else text(json.dumps(reply))

    return respond


def prune_verdicts(root) -> list[Verdict]:
    store = Store.for_corpus(root)
    try:
        return store.verdicts("prune")
    finally:
        store.close()


def unchanged_but_provenance(before: str, after: str) -> None:
    """`after` is `before` with only its sources, refs and links lines rewritten: the body byte for byte."""
    head_b, body_b = before.split("\n---\n", 1)
    head_a, body_a = after.split("\n---\n", 1)
    assert body_a == body_b

    def rest(head: str) -> list[str]:
        return [line for line in head.splitlines() if not line.startswith(("sources:", "refs:", "links:"))]

    assert rest(head_a) == rest(head_b)


@pytest.mark.parametrize(
    "narrow, broad",
    [("facts/a/narrow.md", "facts/b/broad.md"), ("facts/b/narrow.md", "facts/a/broad.md")],
    ids=["narrow-is-a", "narrow-is-b"],
)
@pytest.mark.parametrize("as_tool", [False, True], ids=["text", "tool"])
def test_the_contained_fact_is_retired_though_the_fixed_rules_would_keep_it(
    tmp_path, judge_env, narrow, broad, as_tool
):
    repo = contained_corpus(tmp_path, narrow, broad)
    # a model asked through the forced tool (no structured outputs, thinking off: models.py)
    if as_tool:
        repo.write("knomit-judge.toml", '[judge]\nmodel = "claude-haiku-4-5"\n')
        repo.commit("config")
    before = repo.read(broad)
    judge_env.responder = names({"redundant": NARROW_TITLE}, as_tool)

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    assert result.passes["prune"].applied == 1, result.text_lines()
    facts = load_corpus(repo.root).facts
    assert facts[broad].active and facts[narrow].status == "retracted"
    # the container keeps its whole body and every line but the provenance it takes in
    unchanged_but_provenance(before, repo.read(broad))
    assert parse_fact(broad, repo.read(broad)).sources == ("b1", "n1", "n2", "n3")
    assert f"survivor: {broad}\n" in repo.read(narrow)
    assert (
        git(repo.root, "log", "-1", "--format=%s", "--grep=^Knomit-Pass: prune$")
        == f"prune: retract {narrow} (contained in {broad})\n"
    )
    body = git(repo.root, "log", "-1", "--format=%B", "--grep=^Knomit-Pass: prune$")
    assert "fixed rules" not in body and f"The judge named {narrow} as redundant" in body
    # both orders were asked, and each named the narrow fact as it was shown to it
    [v] = [v for v in prune_verdicts(repo.root) if v.is_yes]
    assert v.prompt == "prune@2" and v.orders == 2
    assert v.by_position == [f"retract {narrow}"] * 2 and v.payload == {"redundant": narrow}
    assert f"redundant {narrow}" in run("verdicts", repo.root, "--pass", "prune").stdout
    sent = [json.loads(r) for r in v.replies]
    # "A" in one order is "B" in the other
    assert sorted(r["redundant"] for r in sent) == ["A", "B"]
    if as_tool:
        schema = judge_env.requests[0].body["tools"][0]["input_schema"]
        assert schema["then"] == {"required": ["redundant"]} and schema["else"] == {"not": {"required": ["redundant"]}}


def test_orders_that_retire_different_facts_are_a_split_recorded_distinct(tmp_path, judge_env):
    repo = contained_corpus(tmp_path, "facts/a/narrow.md", "facts/b/broad.md")
    before = {p: repo.read(p) for p in ("facts/a/narrow.md", "facts/b/broad.md")}
    # always "A": a different fact in each order
    judge_env.responder = names({"redundant": "first"})

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    r = result.passes["prune"]
    assert (r.applied, r.resolved, r.unparsed) == (0, 0, 0)
    assert {p: repo.read(p) for p in before} == before
    [v] = [v for v in prune_verdicts(repo.root) if "split" in v.rationale]
    assert v.answer == "distinct" and not v.is_yes and v.payload is None
    assert v.by_position == ["retract facts/a/narrow.md", "retract facts/b/broad.md"]
    assert v.rationale == "split by position: retract facts/a/narrow.md / retract facts/b/broad.md"
    # reported where a person looks: the inbox lists it as undecided
    [item] = [i for i in inbox(repo.root)["items"] if i.verdict.id == v.id]
    assert item.kind == "undecided"


def test_a_merge_in_one_order_and_a_retract_in_the_other_is_a_split(tmp_path, judge_env):
    repo = contained_corpus(tmp_path, "facts/a/narrow.md", "facts/b/broad.md")

    def respond(request, n):
        ev = evidence_of(request) if pass_of(request) == "prune" else {}
        if {ev.get("fact_a", {}).get("title"), ev.get("fact_b", {}).get("title")} != {NARROW_TITLE, BROAD_TITLE}:
            return text(json.dumps({"decision": "distinct", "rationale": ""}))
        if ev["fact_a"]["title"] == NARROW_TITLE:
            return text(json.dumps({"decision": "retract", "redundant": "A", "rationale": RATIONALE}))
        return text(json.dumps({"decision": "merge", "rationale": RATIONALE}))

    judge_env.responder = respond

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    assert result.passes["prune"].applied == 0
    [v] = [v for v in prune_verdicts(repo.root) if "split" in v.rationale]
    assert v.answer == "distinct" and v.rationale == "split by position: retract facts/a/narrow.md / merge"


@pytest.mark.parametrize(
    "reply",
    [
        # which fact? the fixed rules must not guess
        {"decision": "retract", "rationale": RATIONALE},
        {"decision": "retract", "redundant": "C", "rationale": RATIONALE},
        {"decision": "retract", "redundant": "facts/a/narrow.md", "rationale": RATIONALE},
        {"decision": "merge", "redundant": "A", "rationale": RATIONALE},  # absent otherwise
        {"decision": "distinct", "redundant": "A", "rationale": ""},
    ],
    ids=["retract-without", "not-a-side", "a-path", "with-merge", "with-distinct"],
)
def test_a_retract_without_its_redundant_side_is_unparsed(tmp_path, judge_env, reply):
    repo = contained_corpus(tmp_path, "facts/a/narrow.md", "facts/b/broad.md")
    before = {p: repo.read(p) for p in ("facts/a/narrow.md", "facts/b/broad.md")}
    judge_env.responder = lambda request, n: text(json.dumps(reply if pass_of(request) == "prune" else {}))

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    r = result.passes["prune"]
    assert r.unparsed >= 1 and r.applied == 0 and r.resolved == 0
    # never a verdict: asked again next session
    assert prune_verdicts(repo.root) == []
    assert {p: repo.read(p) for p in before} == before


def test_a_knomit_kb_deletes_the_named_fact_and_the_container_changes_only_by_what_it_takes_in(tmp_path):
    # In the fixture K_KEEP has the higher confidence (0.8 vs 0.6) and more sources (2 vs 1): the fixed rules
    # keep it. The judge names it redundant, so it is deleted and K_LOSE, which contains it, is kept.
    root = knomit_kb(tmp_path)
    assert run("init", root).exit_code == 0
    before = (root / K_LOSE).read_text(encoding="utf-8")
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps(
            {
                "pass": "prune",
                "a": K_LOSE,
                "b": K_KEEP,
                "reply": {
                    "decision": "retract",
                    "redundant": "B",
                    "rationale": "The first restates the second's pool starvation.",
                },
            }
        )
        + "\n"
    )

    out = run("review", root, "--pass", "prune", "--judge", f"scripted:{replies}", "--json")

    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["passes"]["prune"]["applied"] == 1
    assert not (root / K_KEEP).exists()
    after = (root / K_LOSE).read_text(encoding="utf-8")
    unchanged_but_provenance(before, after)
    container = knomit_parse(after)
    # 1 + the retired fact's 2
    assert container["sources"] == 3
    assert container["refs"] == [
        "https://example.org/notes/pgbouncer-transaction-mode",
        "https://www.postgresql.org/docs/current/runtime-config-connection.html",
        f"kb://3f2a9c1e7b40/{INCIDENT}",
    ]
    assert (
        git(root, "log", "-1", "--format=%s", "--grep=^Knomit-Pass: prune$")
        == f"prune: retract {K_KEEP} (contained in {K_LOSE})\n"
    )


def test_the_scripted_judge_names_the_redundant_fact_by_its_entry_in_either_order(tmp_path):
    narrow, broad = "facts/a/narrow.md", "facts/b/broad.md"
    for n, (a, b, side) in enumerate([(narrow, broad, "A"), (broad, narrow, "B")]):
        repo = contained_corpus(tmp_path / str(n), narrow, broad)
        replies = tmp_path / f"replies-{n}.jsonl"
        replies.write_text(
            json.dumps(
                {
                    "pass": "prune",
                    "a": a,
                    "b": b,
                    "reply": {"decision": "retract", "redundant": side, "rationale": RATIONALE},
                }
            )
            + "\n"
        )
        result = review(repo.root, ReviewOptions(passes=("prune",), judge=f"scripted:{replies}"))
        assert result.passes["prune"].applied == 1
        assert load_corpus(repo.root).facts[narrow].status == "retracted"


# --- verdicts of prune@1, which named no fact ---------------------------------------------------


def old_retract(repo, a: str, b: str) -> Verdict:
    """A prune@1 retract on a and b, as that version journalled it: no redundant fact named."""
    facts = load_corpus(repo.root).facts
    return Verdict(
        "prune",
        pair_fingerprint(facts[a].content_id, facts[b].content_id),
        {"a": a, "b": b},
        "retract",
        True,
        RATIONALE,
        "claude-sonnet-4-5",
        "prune@1",
        calls=2,
        orders=2,
        by_position=["retract", "retract"],
        judge="anthropic",
    )


@pytest.mark.parametrize("again", ["retract", "distinct"])
def test_an_unapplied_prune1_retract_is_asked_again_never_applied_by_the_fixed_rules(tmp_path, judge_env, again):
    narrow, broad = "facts/a/narrow.md", "facts/b/broad.md"
    repo = contained_corpus(tmp_path, narrow, broad)
    old = old_retract(repo, narrow, broad)
    Journal(repo.root).append("prune", old.journal_line())
    repo.commit("a prune@1 session's journal, its retract not applied (a dirty tree)")
    before = {p: repo.read(p) for p in (narrow, broad)}
    judge_env.responder = (
        names({"redundant": NARROW_TITLE})
        if again == "retract"
        else (lambda request, n: text(json.dumps({"decision": "distinct", "rationale": ""})))
    )

    result = review(repo.root, ReviewOptions(passes=("prune",)))

    asked = [r for r in judge_env.requests if NARROW_TITLE in r.prompt and BROAD_TITLE in r.prompt]
    assert asked, "the question was not asked again"
    facts = load_corpus(repo.root).facts
    # never the container, which the fixed rules would have retired
    assert facts[broad].active
    if again == "retract":
        assert result.passes["prune"].applied == 1 and facts[narrow].status == "retracted"
    else:
        assert result.passes["prune"].applied == 0 and {p: repo.read(p) for p in before} == before
    store = Store.for_corpus(repo.root)
    try:
        assert store.verdict(old.id).commit_sha is None
    finally:
        store.close()
    calls = judge_env.calls
    again = review(repo.root, ReviewOptions(passes=("prune",))).passes["prune"]
    # nothing asked again: what waits scores below prune's floor (Pass.prior), hopeless, held by the worth rule
    assert judge_env.calls == calls and again.judged == 0
    assert again.state == ("defunded" if again.waiting else "caught-up")


def test_inbox_lists_applied_prune1_retracts_that_kept_the_shorter_body(tmp_path):
    narrow, broad = "facts/a/narrow.md", "facts/b/broad.md"
    repo = contained_corpus(tmp_path, narrow, broad)
    repo.write(
        "facts/c/other-narrow.md",
        fact_text("Tide tables need one clock", ["tides"], 0.5, ["o1"], "A tide table is read on local time."),
    )
    repo.write(
        "facts/c/other-broad.md",
        fact_text(
            "Tide tables need one clock, and a datum",
            ["tides"],
            0.9,
            ["o2"],
            "A tide table is read on local time, from a chart datum.",
        ),
    )
    repo.commit("two more")
    # What prune@1 did: the fixed rules kept the narrow fact (0.95) and retired the broad one, and, on the
    # other pair, kept the longer body (0.9); both are applied and journalled.
    corpus = load_corpus(repo.root)
    prune = all_passes()["prune"]
    for keep, lose in ((narrow, broad), ("facts/c/other-broad.md", "facts/c/other-narrow.md")):
        v = old_retract(repo, keep, lose)
        Journal(repo.root).append("prune", v.journal_line())
        for path, text_ in retire(corpus, corpus.facts[lose], corpus.facts[keep], v.id, absorb=False).items():
            repo.write(path, text_)
        git(repo.root, "add", "-A")
        msg = message(
            f"prune: retract {lose} (redundant with {keep})",
            "by the fixed rules",
            decision_trailers(Decision("prune", v.id, "claude-sonnet-4-5 / prune@1", v.rationale)),
        )
        git(repo.root, "commit", "-q", "-m", msg)
        corpus = load_corpus(repo.root)
    assert prune.outdated(v)
    # as every session starts: the journal and the commit trailers into the db
    recover_corpus(repo.root)

    items = [i for i in inbox(repo.root)["items"] if i.kind == "shorter-kept"]

    # not the one that kept the longer body
    [item] = items
    assert item.verdict.subject == {"a": narrow, "b": broad}
    assert item.verdict.commit_sha
    assert f"kept {narrow} ({len(NARROW_BODY)} characters) and retired {broad} ({len(BROAD_BODY)})" in item.why
    assert f"knomit-judge revert {item.verdict.id}" in item.why
    out = run("inbox", repo.root)
    assert out.exit_code == 0 and "[shorter-kept] prune" in out.stdout
