"""The describe step: one line per motif spelling, written by the model from its carriers, bought once, journalled,
nominating alias candidates beside the embedding signals (session/lines.py, nominate.py's `line` signal)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from helpers import fact_text, git, make_repo, stored_lines, write_config
from judges import LINES, evidence_of
from messages_server import reply_name, tool
from messages_server import status as http_status

from knomit_judge.cli import cli
from knomit_judge.config import Config
from knomit_judge.corpus import load_corpus
from knomit_judge.embeddings import Embedder
from knomit_judge.errors import ConfigError
from knomit_judge.nominate import nominate
from knomit_judge.passes.registry import answered
from knomit_judge.rebuild import rebuild
from knomit_judge.scripted import ScriptedBackend
from knomit_judge.session.lines import batches, request, shown
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store


def lines_file(tmp_path, lines=LINES, extra=()):
    path = tmp_path / "replies.jsonl"
    entries = [{"pass": "describe", "spelling": s, "reply": {"mechanism": m}} for s, m in lines.items()]
    path.write_text("".join(json.dumps(e) + "\n" for e in [*entries, *extra]), encoding="utf-8")
    return f"scripted:{path}"


def describer(lines=LINES, usage=(1000, 200)):
    """A model that describes the spellings it knows, read from the request's evidence."""

    def respond(req, n):
        asked = [s["spelling"] for s in evidence_of(req)["spellings"]]
        return tool(
            {"lines": [{"spelling": s, "mechanism": lines[s]} for s in asked if s in lines]},
            input_tokens=usage[0],
            output_tokens=usage[1],
        )

    return respond


# -- the signal ------------------------------------------------------------------------------------------
# Twelve mechanisms. zombie-lease and split-brain are two faces of one failure (a stale leader keeps writing)
# that neither the names nor the carriers' embeddings put side by side at k = 1; their lines say the same.
WIDE = {
    f"facts/w/f{i}.md": fact_text(title, [motif], body=body)
    for i, (motif, title, body) in enumerate(
        [
            (
                "token-bucket-refill",
                "Tokens come back at a fixed rate",
                "A limiter adds a token every second up to a cap.",
            ),
            (
                "credits-trickle-back",
                "Spent allowance returns slowly",
                "The quota regains one unit per tick after use.",
            ),
            (
                "cache-stampede",
                "Many misses at once overload the origin",
                "An expired key sends every reader to the database.",
            ),
            ("split-brain", "Two leaders accept writes", "A network partition leaves both halves electing a primary."),
            (
                "clock-skew-ordering",
                "Clocks that drift reorder events",
                "Timestamps from two hosts disagree by seconds.",
            ),
            ("retry-storm", "Retries multiply load on a failing service", "Each client retries three times at once."),
            ("schema-drift", "Producers change fields consumers read", "A renamed column breaks the nightly report."),
            ("hot-partition", "One key takes most of the traffic", "A celebrity account sends all reads to one shard."),
            ("zombie-lease", "A paused holder keeps acting on a lost lease", "A GC pause outlives the lock's timeout."),
            ("silent-truncation", "Data cut without an error", "A column limit drops the end of long names quietly."),
            (
                "priority-inversion",
                "A low-priority task blocks a high one",
                "The holder of a mutex is starved by others.",
            ),
            (
                "backpressure-loss",
                "Dropping the signal to slow down",
                "A buffer that never fills hides an overloaded reader.",
            ),
        ]
    )
}
SAME_LINE = "A node that lost its leadership keeps acting as leader, so two writers change the same data."


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide") / "corpus"
    make_repo(root, WIDE)
    return root


def test_a_line_nominates_a_pair_no_embedding_of_names_or_carriers_reaches_and_drops_no_candidate(wide, tmp_path):
    corpus = load_corpus(wide)
    store = Store(tmp_path / "e.db")
    try:
        embedder = Embedder(store)
        motifs = list(corpus.carriers)
        before = nominate(motifs, corpus, embedder, 1)
        pair = {"zombie-lease", "split-brain"}
        # the embeddings alone do not offer it at k = 1
        assert pair not in [{n.a, n.b} for n in before]
        lines = {m: f"What {m.replace('-', ' ')} names, in general words." for m in motifs}
        lines.update({m: SAME_LINE for m in pair})
        after = nominate(motifs, corpus, embedder, 1, lines)
        found = next(n for n in after if {n.a, n.b} == pair)
        assert "line" in found.nominated_by and found.signals["line"] > 0.7
        # a spelling with a line never loses a candidate it had without one
        assert {frozenset((n.a, n.b)) for n in before} <= {frozenset((n.a, n.b)) for n in after}
        # a spelling without a line is neither nominated by the signal nor scored by it
        partial = nominate(motifs, corpus, embedder, 1, {m: lines[m] for m in pair})
        assert all("line" not in n.signals for n in partial if not {n.a, n.b} <= pair)
    finally:
        store.close()


# Standards by number and by name: no name embedding puts an RFC number beside what it defines.
STANDARDS = {
    f"facts/s/f{i}.md": fact_text(title, [spelling], body=body)
    for i, (spelling, title, body) in enumerate(
        [
            (
                "RFC 9421",
                "Agents sign requests per RFC 9421",
                "The gateway checks the signature base and its covered components.",
            ),
            (
                "HTTP Message Signatures",
                "Signed requests prove which agent sent them",
                "Each request carries a Signature header.",
            ),
            (
                "RFC 6585",
                "RFC 6585 gives clients a code for being throttled",
                "The server answers 429 with a Retry-After.",
            ),
            ("token bucket", "Refill at a fixed rate up to a cap", "Bursts drain the bucket and then wait."),
            ("circuit breaker", "Stop calling a failing dependency", "After five errors calls fail fast for a minute."),
            ("HTTP caching", "Responses carry their freshness", "Cache-Control max-age lets a proxy answer."),
        ]
    )
}
STANDARD_LINES = {
    "RFC 9421": "The internet standard defining HTTP message signatures, so a receiver can verify who sent a request.",
    "HTTP Message Signatures": "A standard for signing parts of an HTTP request so the receiver can verify its sender.",
    "RFC 6585": "The internet standard adding HTTP status codes, including one telling a client it is rate limited.",
    "token bucket": "A rate limiter that refills allowance at a fixed rate and lets bursts spend what has built up.",
    "circuit breaker": "After repeated failures calls to a dependency fail at once for a while, giving it time to recover.",
    "HTTP caching": "Responses say how long they stay fresh, so intermediaries answer repeated requests themselves.",
}


def test_a_line_that_names_another_spelling_ranks_the_pair_first(tmp_path):
    root = tmp_path / "standards"
    make_repo(root, STANDARDS)
    corpus = load_corpus(root)
    store = Store(tmp_path / "e.db")
    try:
        embedder = Embedder(store)
        motifs = sorted(corpus.carriers)
        pair = {"RFC 9421", "HTTP Message Signatures"}
        before = nominate(motifs, corpus, embedder, 1)
        rank = lambda ns: next((r for r, n in enumerate(ns) if {n.a, n.b} == pair), None)  # noqa: E731
        after = nominate(motifs, corpus, embedder, 1, STANDARD_LINES)
        assert rank(after) == 0, [(n.a, n.b, round(n.score, 2)) for n in after[:3]]
        found = after[0]
        assert "named" in found.nominated_by and found.signals["named"] == found.score == found.signals["line"]
        without = next((n.score for n in before if {n.a, n.b} == pair), 0.0)
        # standing alone, not averaged with what the names say
        assert found.score > without + 0.1
        # "HTTP caching" shares a word with nothing the RFC 6585 line names as a phrase: no named pair there
        assert all("named" not in n.signals for n in after if "RFC 6585" in (n.a, n.b))
        # a line that names a spelling its own name shares a word with adds nothing: the string signals see those
        lines = dict(STANDARD_LINES, **{"HTTP caching": "Like HTTP message signatures, but for caching."})
        assert not any(
            "named" in n.signals and "HTTP caching" in (n.a, n.b) for n in nominate(motifs, corpus, embedder, 1, lines)
        )
    finally:
        store.close()


# -- the requests ----------------------------------------------------------------------------------------
def test_a_request_shows_each_spelling_with_at_most_three_carriers_each_carrier_once_and_cut(tmp_path):
    long_body = "word " * 400
    facts = {
        f"facts/c/f{i}.md": fact_text(f"Carrier {i}", ["broad-motif", f"own-{i}"], body=long_body) for i in range(5)
    }
    repo = make_repo(tmp_path / "c", facts)
    corpus = load_corpus(repo.root)
    config = Config()
    items = [shown(m, corpus, config.describe.carriers) for m in sorted(corpus.carriers)]
    assert [len(s.facts) for s in items if s.spelling == "broad-motif"] == [3]
    (only,) = batches(items, config.describe.batch)
    req = request(only, config.describe.body_chars)
    ev = json.loads(re.search(r"<evidence>\n(.*)\n</evidence>", req.user, re.S).group(1))
    assert tuple(s["spelling"] for s in ev["spellings"]) == req.spellings == tuple(s.spelling for s in only)
    # five carriers, each shown once however many spellings it carries
    assert len(ev["facts"]) == 5
    assert all(
        len(f["body"]) <= config.describe.body_chars and "characters not shown" in f["body"] for f in ev["facts"]
    )
    assert req.tool["name"] == "describe_reply" and "lines" in req.tool["input_schema"]["properties"]
    assert [len(b) for b in batches(items, 2)] == [2, 2, 2]


# -- the scripted judge ----------------------------------------------------------------------------------
def test_scripted_lines_are_written_once_journalled_and_an_unchanged_corpus_writes_none(corpus_repo, tmp_path):
    judge = lines_file(tmp_path, {k: v for k, v in LINES.items() if k != "queue-amplifies-latency"})
    first = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=judge))
    d = first.passes["describe"]
    assert d.written == 2 and d.state == "worked"
    assert any(
        "1 spelling(s) got no line (e.g. queue-amplifies-latency)" in n and "does not describe" in n for n in d.notes
    )
    line = next(x for x in first.text_lines() if x.startswith("describe:"))
    assert line.startswith("describe: worked - lines written 2, $0.0000")
    assert stored_lines(corpus_repo.root)["self-locking-penalty"] == LINES["self-locking-penalty"]
    journal = corpus_repo.root / ".knomit/verdicts/describe.jsonl"
    # two lines, and the spelling asked without one
    assert len(journal.read_text().splitlines()) == 3
    # committed with the session's journal
    assert corpus_repo.status() == ""
    again = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=judge))
    assert again.passes["describe"].written == 0 and again.passes["describe"].state == "caught-up"
    assert again.passes["describe"].judge_calls == 0
    # a carrier's front matter (here its confidence) is not what the model read: no line is bought again
    corpus_repo.fact(
        "facts/ops/f1.md",
        "A penalty that blocks its own recovery latches the system off",
        motifs=["penalty-blocks-own-recovery"],
        confidence=0.9,
        body="When the throttle defunds, it stops collecting the evidence it needs to refund.",
    )
    corpus_repo.commit()
    assert review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=judge)).passes["describe"].offered == 0
    # a changed carrier is a new key: that spelling alone is asked again
    corpus_repo.fact(
        "facts/ops/f3.md",
        "A sanction that prevents self repair keeps the node quarantined for good",
        motifs=["self-locking-penalty"],
    )
    corpus_repo.commit()
    third = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=judge))
    assert third.passes["describe"].written == 1 and third.passes["describe"].offered == 1


def test_a_scripted_file_without_describe_lines_skips_the_step(corpus_repo, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"pass": "alias", "a": "x", "b": "y", "reply": {"same": false}}\n')
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{path}"))
    assert out.passes["describe"].state == "skipped" and out.passes["alias"].candidates == 3
    assert not (corpus_repo.root / ".knomit/verdicts/describe.jsonl").exists()


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"pass": "describe", "reply": {"mechanism": "x"}}, "r.jsonl:1: a describe entry needs 'spelling'"),
        ({"pass": "describe", "spelling": "s", "reply": {"line": "x"}}, "r.jsonl:1: a describe entry needs"),
        ({"pass": "describe", "spelling": "s", "reply": {"mechanism": " "}}, "r.jsonl:1: a describe entry needs"),
    ],
)
def test_a_bad_describe_entry_is_an_error_naming_file_and_line(tmp_path, entry, message):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(entry) + "\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        ScriptedBackend(path, answered())


# -- the real SDK, against the loopback Messages API -----------------------------------------------------
def test_real_judge_lines_cost_is_counted_shown_and_restored_by_rebuild_without_a_call(corpus_repo, judge_env):
    judge_env.describer = describer()
    r = CliRunner().invoke(cli, ["-q", "review", str(corpus_repo.root), "--pass", "alias", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (req,) = judge_env.describe_requests
    # the lines' contract, as structured outputs on claude-haiku-5-5
    assert reply_name(req.body) == "describe_reply"
    # room for a line per spelling
    assert req.body["max_tokens"] > 400
    assert "Queue growth amplifies latency under load" in json.dumps(evidence_of(req))
    # describe.model: the lines' own, cheaper model
    assert req.body["model"] == "claude-haiku-5-5"
    d = out["passes"]["describe"]
    # claude-haiku-5-5's price, not the judge's
    usd = (1000 * 0.10 + 200 * 0.50) / 1e6
    assert d["written"] == 3 and d["judge_calls"] == 1 and d["cost_usd"] == pytest.approx(usd)
    # the session's cost holds it
    assert out["cost_usd"] == pytest.approx(out["passes"]["alias"]["cost_usd"] + usd)
    st = json.loads(CliRunner().invoke(cli, ["status", str(corpus_repo.root), "--json"]).stdout)
    assert st["lines"]["text"] == f"lines written 3, ${usd:.4f}" and st["lines"]["stored"] == 3
    # the day's cap counts the lines
    assert st["spend"]["today_usd"] == pytest.approx(out["cost_usd"])
    # a lost db: rebuild restores every line from the journal, and the next session buys none again
    before = stored_lines(corpus_repo.root)
    (corpus_repo.root / ".knomit/judge.db").unlink()
    rebuild(corpus_repo.root)
    assert stored_lines(corpus_repo.root) == before
    again = json.loads(
        CliRunner().invoke(cli, ["-q", "review", str(corpus_repo.root), "--pass", "alias", "--json"]).stdout
    )
    assert len(judge_env.describe_requests) == 1 and again["passes"]["describe"]["written"] == 0


def test_a_fresh_clone_has_the_lines_without_a_call(corpus_repo, judge_env, tmp_path):
    judge_env.describer = describer()
    review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(corpus_repo.root), str(clone))
    out = review(clone, ReviewOptions(passes=("alias",)))
    assert stored_lines(clone) == stored_lines(corpus_repo.root) and len(stored_lines(clone)) == 3
    assert len(judge_env.describe_requests) == 1 and out.passes["describe"].state == "caught-up"


def test_the_session_cap_holds_lines_back_and_says_so(corpus_repo, judge_env):
    write_config(corpus_repo, "[judge]\nmax_cost_usd = 0.001\n")
    judge_env.describer = describer()
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    d = out.passes["describe"]
    assert judge_env.describe_requests == [] and d.written == 0 and d.waiting == 3
    assert any("session cost cap $0.001 reached: 3 spelling(s) wait" in n for n in d.notes), d.notes


def test_a_failed_describe_request_leaves_the_alias_pass_working_from_embeddings(corpus_repo, judge_env):
    write_config(corpus_repo, "[judge]\nbackoff_s = 0.0\nmax_attempts = 1\n")
    judge_env.describer = lambda req, n: http_status(500)
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert out.passes["describe"].state == "broken" and out.passes["describe"].unavailable == 1
    assert out.passes["alias"].candidates == 3 and out.passes["alias"].judged == 3
    assert stored_lines(corpus_repo.root) == {}  # asked again next session


def test_a_scripted_file_without_lines_skips_the_step_and_the_pass_works_as_before(corpus_repo, judge_env, tmp_path):
    # (without a key a session stops with exit 2 before anything, issue 31: test_first_contact)
    replies = tmp_path / "no-lines.jsonl"
    replies.write_text("", encoding="utf-8")
    write_config(corpus_repo, "[describe]\nenabled = false\n")
    first = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies}"))
    write_config(corpus_repo, "")
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=f"scripted:{replies}"))
    assert out.passes["describe"].state == "skipped"
    assert out.passes["describe"].notes == ["the scripted replies file holds no describe lines"]
    assert first.passes["alias"].judged > 0 and out.passes["alias"].state == "caught-up"
    assert judge_env.describe_requests == []


def test_a_dry_run_says_what_the_lines_would_cost_and_writes_nothing(corpus_repo, judge_env):
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",), dry_run=True))
    d = out.passes["describe"]
    assert d.state == "would-offer" and d.offered == 3
    assert "would write lines for 3 spelling(s) in 1 request" in d.notes[0]
    assert out.estimates["describe"]["calls"] == 1 and out.estimates["describe"]["estimate_usd"] > 0
    assert judge_env.describe_requests == [] and not (corpus_repo.root / ".knomit/verdicts/describe.jsonl").exists()


def test_rebuild_check_names_a_line_the_journal_lacks(corpus_repo, tmp_path):
    review(corpus_repo.root, ReviewOptions(passes=("alias",), judge=lines_file(tmp_path)))
    runner = CliRunner()
    assert runner.invoke(cli, ["rebuild", "--check", str(corpus_repo.root)]).exit_code == 0
    store = Store.for_corpus(corpus_repo.root)
    try:
        store.db.execute("UPDATE lines SET line = 'edited by hand' WHERE spelling = 'self-locking-penalty'")
        store.db.conn.commit()
    finally:
        store.close()
    r = runner.invoke(cli, ["rebuild", "--check", str(corpus_repo.root)])
    assert r.exit_code == 1 and "differs: lines: 1 read differently from the journal: self-locking-penalty" in r.output


# -- what buys a line again ------------------------------------------------------------------------------
LONG = "The limiter blocks the probe that would lift the limit. " * 20  # longer than body_chars


def test_a_new_carrier_or_an_edit_below_the_shown_part_buys_no_line_and_a_lost_carrier_does(corpus_repo, judge_env):
    corpus_repo.fact(
        "facts/ops/f2.md",
        "Rate limiting that disables the health check keeps the service down",
        motifs=["penalty-blocks-own-recovery"],
        body=LONG,
    )
    corpus_repo.commit()
    judge_env.describer = describer({**LINES, "unrelated-now": "A spelling with nothing in common with the others."})
    review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    (first,) = judge_env.describe_requests
    assert {f["title"] for f in evidence_of(first)["facts"]} >= {
        "A penalty that blocks its own recovery latches the system off",
        "Rate limiting that disables the health check keeps the service down",
    }
    # a new carrier sorting first by path, and an edit past the part of f2's body the model was shown
    corpus_repo.fact(
        "facts/ops/f0.md",
        "A lockout that hides its own unlock signal never lifts",
        motifs=["penalty-blocks-own-recovery"],
        body="The ban silences the report that would end it.",
    )
    corpus_repo.fact(
        "facts/ops/f2.md",
        "Rate limiting that disables the health check keeps the service down",
        motifs=["penalty-blocks-own-recovery"],
        body=LONG + "A later note, far below the cut.",
    )
    corpus_repo.commit()
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert out.passes["describe"].state == "caught-up" and len(judge_env.describe_requests) == 1
    # a carrier it was written from stops carrying it: written again, from the one left and the next by path
    corpus_repo.fact(
        "facts/ops/f1.md",
        "A penalty that blocks its own recovery latches the system off",
        motifs=["unrelated-now"],
        body="When the throttle defunds, it stops collecting evidence.",
    )
    corpus_repo.commit()
    out = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    again = judge_env.describe_requests[1]
    asked = {s["spelling"]: s["facts"] for s in evidence_of(again)["spellings"]}
    titles = {f["id"]: f["title"] for f in evidence_of(again)["facts"]}
    assert [titles[i] for i in asked["penalty-blocks-own-recovery"]] == [
        "Rate limiting that disables the health check keeps the service down",
        "A lockout that hides its own unlock signal never lifts",
    ]
    assert out.passes["describe"].written >= 1
    # an edit inside the shown part of a carrier is a new key
    corpus_repo.fact(
        "facts/ops/f2.md",
        "Rate limiting that disables the health check keeps the service down",
        motifs=["penalty-blocks-own-recovery"],
        body="Now said first. " + LONG,
    )
    corpus_repo.commit()
    review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert [s["spelling"] for s in evidence_of(judge_env.describe_requests[2])["spellings"]] == [
        "penalty-blocks-own-recovery"
    ]


def test_describe_model_empty_is_the_judges_and_one_without_a_price_exits_2_before_anything(corpus_repo, judge_env):
    write_config(corpus_repo, '[describe]\nmodel = ""\n')
    judge_env.describer = describer()
    review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert judge_env.describe_requests[0].body["model"] == "claude-sonnet-5-5"
    write_config(corpus_repo, '[describe]\nmodel = "claude-unpriced-9"\n')
    head = corpus_repo.log("%H")[0]
    r = CliRunner().invoke(cli, ["-q", "review", str(corpus_repo.root), "--json"])
    assert r.exit_code == 2 and "describe.model 'claude-unpriced-9' has no price" in r.output
    assert corpus_repo.log("%H")[0] == head and len(judge_env.describe_requests) == 1
