"""One pass's run in a session (session.context.PassRun), made and asked without a session around it.

A PassRun owns what one pass does in one session: its status line, its throttle state and live balance, its first
reader, what is fresh for it. Here one is opened on a real corpus, store and context, with the real SDK pointed at
the loopback Messages API, and asked directly: no review(), no rounds.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from messages_server import status, tool

from knomit_judge.candidate_lists import CandidateLists
from knomit_judge.config import load_config
from knomit_judge.gitops import open_repo
from knomit_judge.models import require_usable
from knomit_judge.passes.registry import all_passes
from knomit_judge.session.context import Context, FirstReader, PassRun, ReviewOptions, SessionResult
from knomit_judge.session.readers import read
from knomit_judge.session.review import Opening, new_session_id, open_context
from knomit_judge.store import Store

FIRST, STRONG = "claude-haiku-5-5", "claude-sonnet-5-5"
NO = {"same": False, "mechanism": ""}
# one order a question, one attempt a call, no waits: every reading below is exactly one call
QUIET = (
    "[judge]\nbackoff_s = 0.0\nswap_sample = 0.0\nposition_swap = false\nmax_attempts = 1\n"
    "[describe]\nenabled = false\n"
)


def by_model(first, strong):
    """A loopback responder answering the first reader with `first` and the judge model with `strong`."""
    return lambda req, n: first if req.body["model"] == FIRST else strong


@pytest.fixture
def pair(pair_repo, judge_env, monkeypatch):
    """The SMALL corpus, quiet, read by the default first reader (claude-haiku-5-5) and the judge model."""
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    pair_repo.write("knomit-judge.toml", QUIET)
    pair_repo.commit("config")
    return pair_repo


def alias_run(root: Path, check) -> None:
    """Open the alias pass's run on the corpus at `root` (an in-memory copy of its db, as a dry run reads it), take
    its best candidate, and hand both to `check` inside the event loop."""
    config = load_config(root)
    with Store.read_only(root) as store:
        models = require_usable(config, store)

        async def go() -> None:
            result = SessionResult(session=new_session_id(), dry_run=False)
            ctx = open_context(Opening(root, open_repo(root), config, store, ReviewOptions(), models), result)
            run = PassRun.open(ctx, all_passes()["alias"])
            candidates = CandidateLists(store).candidates(run.p, ctx)
            assert len(candidates), "the SMALL corpus has its alias pair"
            await check(run, candidates[0])

        asyncio.run(go())


def test_context_keeps_at_most_twenty_fields():
    """What is one pass's lives on its PassRun; the context keeps only what the session's passes share."""
    names = [f.name for f in dataclasses.fields(Context)]
    assert len(names) <= 20, names
    for per_pass in ("allowances", "readers", "seen", "fresh", "since", "new"):
        assert per_pass not in names


def test_a_pass_run_charges_each_read_to_its_balance_at_the_price_of_the_model_that_made_it(pair, judge_env):
    judge_env.responder = by_model(tool(NO), tool(NO))

    async def check(run: PassRun, c) -> None:
        t = run.allowance.t
        assert t.allowance is not None and t.allowance > 0, "a first session opens with a balance"
        first_price, strong_price = run.allowance.price(FIRST), run.allowance.price(STRONG)
        # the first reader is the cheaper model
        assert 0 < first_price < strong_price
        before = t.allowance
        # read outside any offer (as an audit or a shadow read is): withdrawn as it is made, at its model's price
        out = await run.ask(c, run.ctx.judge.reader(FIRST), one_order=True, offered=False)
        assert out.kind == "verdict" and out.made == 1
        assert t.allowance == pytest.approx(before - first_price)
        out = await run.ask(c, run.ctx.judge, offered=False)
        assert out.kind == "verdict" and out.made == 1
        assert t.allowance == pytest.approx(before - first_price - strong_price)
        assert run.ctx.in_flight.count == 0 and run.ctx.in_flight.usd == 0.0  # nothing left reserved

    alias_run(pair.root, check)
    assert [r.body["model"] for r in judge_env.requests] == [FIRST, STRONG]


def test_a_pass_runs_first_reader_hands_a_question_it_cannot_answer_to_the_judge_model(pair, judge_env):
    judge_env.responder = by_model(status(529, message="Overloaded"), tool(NO))

    async def check(run: PassRun, c) -> None:
        # as readers.first_reader decides it, with no window behind it
        run.decided_reader = FirstReader(FIRST)
        out, model, audit = await read(run, c)
        assert out.kind == "verdict" and out.answer == "different" and model == STRONG and audit is None
        reader, r = run.reader, run.result
        assert reader.handovers == {"unavailable": 1, "refused": 0}
        assert reader.unavailable_streak == 1 and reader.reads_first(c.fingerprint)  # down only after DOWN_AFTER
        # no first no: nothing to audit
        assert r.first_reads == 0 and reader.pending == []

    alias_run(pair.root, check)
    assert [r.body["model"] for r in judge_env.requests] == [FIRST, STRONG]
