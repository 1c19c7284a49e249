"""One rate limiter for every worker: a 429 with retry-after pauses them all, once, and logs once;
the anthropic-ratelimit-* headers pace calls; waiting on the limiter does not eat a question's time limit.

Real sessions through the real SDK to the loopback server, which records when each request arrived.
"""

from __future__ import annotations

import json
import logging

import pytest
from helpers import CorpusRepo, copy_of, write_config
from messages_server import delay, ratelimit, status, text

from knomit_judge.session.review import ReviewOptions, review

DIFFERENT = json.dumps({"same": False, "mechanism": ""})


@pytest.fixture
def many_repo(templates, tmp_path) -> CorpusRepo:
    return copy_of(templates["many"], tmp_path)


def session(repo, **judge):
    values = {"backoff_s": 0.0, "timeout_s": 20, **judge}
    write_config(repo, "[judge]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items()))
    return review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]


def pauses(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("rate limit:")]


@pytest.mark.parametrize("hit", [1, 4], ids=["one-worker", "every-worker"])
def test_a_429_with_retry_after_pauses_every_worker_once(many_repo, judge_env, caplog, hit):
    caplog.set_level(logging.DEBUG, logger="knomit_judge")
    judge_env.script([status(429, retry_after=1)] * hit)
    judge_env.responder = lambda req, n: delay(0.2, text(DIFFERENT))
    r = session(many_repo, concurrency=4)
    assert r.judged == r.offered >= 6 and r.unavailable == 0
    requests = judge_env.requests
    t429 = requests[0].at
    in_flight = [q for q in requests if q.at < t429 + 0.1]
    later = [q.at - t429 for q in requests if q.at >= t429 + 0.1]
    # only the calls already sent when the 429 came back
    assert len(in_flight) <= 4
    assert later and min(later) >= 0.95, f"a worker called during the pause: {min(later):.2f}s after the 429"
    assert len(pauses(caplog)) == 1 and "retry-after 1" in pauses(caplog)[0]
    assert not [m for m in caplog.records if m.levelno >= logging.WARNING and "attempt" in m.getMessage()]


def test_retry_after_zero_means_zero(pair_repo, judge_env, caplog):
    caplog.set_level(logging.DEBUG, logger="knomit_judge")
    judge_env.script([status(429, retry_after=0)])
    judge_env.responder = lambda req, n: text(DIFFERENT)
    # our own backoff would wait seconds
    r = session(pair_repo, position_swap=False, backoff_s=5.0)
    assert (r.judged, r.attempts) == (1, 2)
    first, second = judge_env.requests
    assert second.at - first.at < 1.0 and pauses(caplog) == []


def test_waiting_on_the_limiter_does_not_count_against_the_time_limit(pair_repo, judge_env):
    judge_env.script([status(429, retry_after=1.5)])
    judge_env.responder = lambda req, n: text(DIFFERENT)
    r = session(pair_repo, position_swap=False, timeout_s=0.8)
    assert (r.judged, r.unavailable) == (1, 0), r.first_error
    first, second = judge_env.requests
    assert second.at - first.at >= 1.45


def test_a_time_limit_still_holds_outside_the_limiter(pair_repo, judge_env):
    judge_env.script([status(429, retry_after=1.0), delay(5, text(DIFFERENT))])
    r = session(pair_repo, position_swap=False, timeout_s=0.8)
    assert (r.judged, r.unavailable) == (0, 1) and "timed out after 0.8s" in r.first_error


def test_ratelimit_headers_pace_calls_before_the_limit_is_hit(pair_repo, judge_env, caplog):
    caplog.set_level(logging.INFO, logger="knomit_judge")
    # the reset time is fixed when the script is made, a moment before the session starts
    judge_env.script([text(DIFFERENT, headers=ratelimit("requests", remaining=0, reset_in=1.5))])
    judge_env.responder = lambda req, n: text(DIFFERENT, headers=ratelimit("requests", remaining=40, reset_in=1.0))
    # both orders: a second call for the pacing to hold
    r = session(pair_repo, concurrency=1, swap_sample=1.0)
    assert (r.judged, r.attempts) == (1, 2)  # no 429 was needed
    first, second = judge_env.requests
    assert second.at - first.at >= 0.7
    [line] = pauses(caplog)
    assert "requests remaining 0" in line
