"""Spend the way users budget it: daily and monthly dollar caps, spend reports, and no unknown price as $0.

Real reviews through the real SDK to the loopback Messages server, against real sqlite; the one thing
set by hand is when earlier sessions ran (their timestamps), which is what a day or a month turns on.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from helpers import JUDGE as THROTTLE_JUDGE
from helpers import copy_of, write_config
from messages_server import DEFAULT_REPLY, text

from knomit_judge.cli import cli
from knomit_judge.config import load_config, parse_config
from knomit_judge.daemon import run_daemon
from knomit_judge.errors import ConfigError
from knomit_judge.history import status
from knomit_judge.rebuild import rebuild
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.spend import Caps, summarise
from knomit_judge.store import Store

# One call per question, one at a time, no throttle: every question offered is one call of known cost.
# claude-sonnet-4-6: a current model that does not think unless asked, so a call's cost is the server's usage
JUDGE = THROTTLE_JUDGE + 'concurrency = 1\nmodel = "claude-sonnet-4-6"\n'
# the server's default usage at claude-sonnet-4-6's price
CALL_USD = (100 * 3.0 + 20 * 15.0) / 1e6


@pytest.fixture
def many(templates, tmp_path):
    """Ten unrelated motifs: more alias questions than any cap below lets through."""
    return copy_of(templates["many"], tmp_path)


def configure(repo, budget: str = "", judge: str = "", extra: str = "") -> None:
    write_config(repo, JUDGE + judge + "\n[budget]\nenabled = false\n" + budget + "\n" + extra)


def alias(repo):
    return review(repo.root, ReviewOptions(passes=("alias",))).passes["alias"]


def shift(repo, days: float) -> None:
    """Move every session and verdict recorded so far `days` into the past, as if they ran then."""
    store = Store.for_corpus(repo.root)
    try:

        def back(ts):
            return (
                None
                if ts is None
                else (datetime.fromisoformat(ts) - timedelta(days=days)).isoformat(timespec="milliseconds")
            )

        with store.db.atomic():
            for sid, started, ended in store.db.execute("SELECT id, started_at, ended_at FROM sessions").fetchall():
                store.db.execute(
                    "UPDATE sessions SET started_at = ?, ended_at = ? WHERE id = ?", [back(started), back(ended), sid]
                )
            for vid, created in store.db.execute("SELECT id, created_at FROM verdicts").fetchall():
                store.db.execute("UPDATE verdicts SET created_at = ? WHERE id = ?", [back(created), vid])
    finally:
        store.close()


def test_the_daily_cap_stops_asking_and_the_rest_waits_for_the_next_day(many, judge_env):
    configure(many, "max_usd_per_day = 0.0025")
    first = alias(many)
    # 4 calls spend $0.0024, and a 5th would cross $0.0025: it is not asked, and the rest waits
    assert (first.offered, first.judged, judge_env.calls) == (4, 4, 4)
    assert first.candidates > 4 and first.waiting == first.candidates - 4
    assert (
        f"daily cost cap $0.0025 reached (budget.max_usd_per_day; ${4 * CALL_USD:.4f} today): "
        f"{first.waiting} candidate(s) wait" in first.line()
    )
    assert first.charged_usd == pytest.approx(4 * CALL_USD) == first.cost_usd

    # the same day: the day's spend, read from the recorded sessions, holds it
    second = alias(many)
    assert (second.offered, judge_env.calls) == (0, 4)
    assert "daily cost cap $0.0025 reached" in second.line()

    shift(many, 1)  # those sessions were yesterday
    third = alias(many)
    assert (third.offered, judge_env.calls) == (4, 8)
    spend = status(many.root)["spend"]
    assert spend["today_usd"] == pytest.approx(4 * CALL_USD)
    assert spend["last_7_days_usd"] == pytest.approx(8 * CALL_USD)
    assert spend["left_today_usd"] == pytest.approx(0.0025 - 4 * CALL_USD)
    assert spend["caps"] == {"session_usd": 5.0, "day_usd": 0.0025, "month_usd": 50.0}


def test_the_monthly_cap_counts_every_session_of_the_calendar_month(many, judge_env):
    configure(many, "max_usd_per_day = 1.0\nmax_usd_per_month = 0.0025")
    assert alias(many).judged == 4
    held = alias(many)
    assert held.offered == 0 and "monthly cost cap $0.0025 reached (budget.max_usd_per_month; " in held.line()
    now = datetime.now(UTC)
    # into the month before: this month has spent nothing
    shift(many, now.day + 1)
    assert alias(many).judged == 4
    assert judge_env.calls == 8


def test_review_and_status_json_show_spend_and_cost_per_resolution(many, judge_env):
    configure(many)
    asked = [0]

    # the first question is one mechanism, every other one is not
    def yes_once(req, n):
        asked[0] += 1
        return text(json.dumps({"same": True, "mechanism": "One loop."}) if asked[0] == 1 else DEFAULT_REPLY)

    judge_env.responder = yes_once
    result = CliRunner().invoke(cli, ["-q", "review", str(many.root), "--pass", "alias", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    calls = out["passes"]["alias"]["judge_calls"]
    assert out["passes"]["alias"]["resolved"] == 1 and calls == judge_env.calls
    spend = out["spend"]
    assert (
        spend["today_usd"] == spend["last_7_days_usd"] == spend["last_30_days_usd"] == pytest.approx(calls * CALL_USD)
    )
    assert spend["per_pass"]["alias"] == {
        "today_usd": pytest.approx(calls * CALL_USD),
        "last_30_days_usd": pytest.approx(calls * CALL_USD),
        "resolved": 1,
        "usd_per_resolution": pytest.approx(calls * CALL_USD),
    }
    assert spend["per_pass"]["prune"]["usd_per_resolution"] is None
    # the first day of a corpus: its rate is that one day's, to the end of the month
    assert spend["month_projection_usd"] > spend["month_to_date_usd"] > 0
    assert spend["complete"] is True and spend["usd_per_question"] == pytest.approx(CALL_USD)

    data = json.loads(CliRunner().invoke(cli, ["-q", "status", str(many.root), "--json"]).stdout)
    assert data["spend"]["today_usd"] == spend["today_usd"]
    text_out = CliRunner().invoke(cli, ["-q", "status", str(many.root)]).stdout.splitlines()
    [line] = [s for s in text_out if s.startswith("spend: today ")]
    assert f"today ${calls * CALL_USD:.4f} (cap $5), last 7 days " in line and "projected $" in line
    [line] = [s for s in text_out if s.startswith("cost per resolution, last 30 days: ")]
    assert f"alias ${calls * CALL_USD:.4f} (1 resolved)" in line and "prune $0.0000 for 0 resolved" in line


def test_spend_windows_projection_and_per_pass_figures(tmp_path):
    """The arithmetic of summarise over sessions recorded at known times."""
    store = Store(tmp_path / "judge.db")
    now = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
    runs = [
        (now.replace(hour=1), "alias", 1.0, 2),
        (now - timedelta(days=3), "prune", 2.0, 0),
        (now - timedelta(days=10), "alias", 4.0, 2),
        (now - timedelta(days=20), "discovery", 8.0, 1),
        (now - timedelta(days=40), "alias", 16.0, 9),
    ]
    for i, (at, name, usd, resolved) in enumerate(runs):
        sid = f"s{i}"
        store.start_session(sid)
        store.end_session(
            sid, {name: {"state": "worked", "resolved": resolved, "cost_usd": usd, "charged_usd": usd}}, usd, []
        )
        store.db.execute(
            "UPDATE sessions SET started_at = ?, ended_at = ? WHERE id = ?",
            [at.isoformat(timespec="milliseconds"), at.isoformat(timespec="milliseconds"), sid],
        )
    s = summarise(store, parse_config({}), now)
    assert (s.today_usd, s.last_7_days_usd, s.last_30_days_usd) == (1.0, 3.0, 15.0)
    # March 10, 17 and 20; February 28 is last month
    assert s.month_to_date_usd == 7.0
    # 7 dollars so far, and 3 a week for the 11.5 days left of March
    assert s.month_projection_usd == pytest.approx(7.0 + 3.0 / 7 * 11.5)
    # $5 for 4 resolved in 30 days
    assert s.per_pass["alias"]["usd_per_resolution"] == 1.25
    assert s.per_pass["prune"]["usd_per_resolution"] is None
    assert s.per_pass["discovery"]["usd_per_resolution"] == 8.0
    caps = Caps.for_session(store, parse_config({"budget": {"max_usd_per_day": 1.5, "max_usd_per_month": 9.0}}), now)
    assert (caps.today_before, caps.month_before) == (1.0, 7.0)
    assert caps.reached(0.4) is None
    # the next one would cross it
    assert caps.reached(0.4, next_usd=0.2).startswith("daily cost cap $1.5 reached")
    assert caps.reached(0.5).startswith("daily cost cap $1.5 reached")
    caps.day_usd = 100.0
    assert caps.reached(2.0).startswith("monthly cost cap $9 reached")
    assert caps.reached(5.0) == "session cost cap $5 reached"
    store.close()


def test_deleting_the_db_does_not_reset_the_days_spend(many, judge_env):
    configure(many, "max_usd_per_day = 0.0025")
    assert alias(many).judged == 4
    (many.root / ".knomit" / "judge.db").unlink()
    # the sessions table is gone; the journalled verdicts carry what they cost
    rebuild(many.root)
    spend = status(many.root)["spend"]
    assert spend["today_usd"] == pytest.approx(4 * CALL_USD) and spend["complete"] is False
    assert alias(many).offered == 0 and judge_env.calls == 4


def test_a_session_killed_mid_way_counts_what_its_verdicts_cost(many, judge_env):
    configure(many, "max_usd_per_day = 0.0025")
    assert alias(many).judged == 4
    store = Store.for_corpus(many.root)
    # what a kill before end_session leaves
    store.db.execute("UPDATE sessions SET ended_at = NULL")
    store.db.conn.commit()
    store.close()
    assert status(many.root)["spend"]["today_usd"] == pytest.approx(4 * CALL_USD)
    assert alias(many).offered == 0


# -- unknown prices and unknown costs --------------------------------------------------------------


def test_a_model_without_a_price_exits_2_naming_the_key_and_asks_nothing(many, judge_env, monkeypatch):
    configure(many)
    monkeypatch.setenv("KNOMIT_JUDGE_MODEL", "claude-unpriced-9")
    result = CliRunner().invoke(cli, ["-q", "review", str(many.root)])
    assert result.exit_code == 2
    assert '[prices."claude-unpriced-9"]' in result.stderr and "Traceback" not in result.output
    assert judge_env.calls == 0 and not Store.for_corpus(many.root).sessions()
    with pytest.raises(ConfigError, match=r'\[prices\."claude-unpriced-9"\]'):
        # at start, not once a day
        run_daemon(many.root)
    # a dry run spends nothing: it lists the plan and says what a real session needs
    dry = CliRunner().invoke(cli, ["-q", "review", str(many.root), "--dry-run"])
    assert dry.exit_code == 0 and 'a real session exits 2 until [prices."claude-unpriced-9"]' in dry.stdout
    # recorded replies cost nothing and need no price
    replies = many.root.parent / "replies.jsonl"
    replies.write_text("", encoding="utf-8")
    assert CliRunner().invoke(cli, ["-q", "review", str(many.root), "--judge", f"scripted:{replies}"]).exit_code == 0

    configure(many, extra='[prices."claude-unpriced-9"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n')
    r = alias(many)
    assert r.judged > 0 and r.cost_usd == pytest.approx(r.judge_calls * CALL_USD)


def test_a_call_of_unknown_cost_counts_against_the_caps_at_its_upper_bound(many, judge_env):
    judge_env.responder = lambda req, n: text(DEFAULT_REPLY, usage=False)
    configure(many, judge="max_cost_usd = 0.02\n")
    r = alias(many)
    # the bound: every prompt byte a token, and max_tokens (400) out, at $3 / $15 per million
    least = 400 * 15.0 / 1e6 + 1000 * 3.0 / 1e6
    assert r.cost_usd is None and r.charged_usd >= r.judged * least
    assert 0 < r.judged < r.candidates and "session cost cap $0.02 reached" in r.line()
    spend = status(many.root)["spend"]
    assert spend["today_usd"] == pytest.approx(r.charged_usd) and spend["complete"] is False
    assert any("incomplete" in line for line in status(many.root)["text"])

    configure(many, f"max_usd_per_day = {r.charged_usd}", judge="max_cost_usd = 5.0\n")
    # the bound spent the day
    assert alias(many).offered == 0


def test_caps_are_validated_config_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"budget.max_usd_per_day: -1.0 is out of range"):
        parse_config({"budget": {"max_usd_per_day": -1.0}})
    with pytest.raises(ConfigError, match=r"budget.max_usd_per_month: expected float, got str"):
        parse_config({"budget": {"max_usd_per_month": "50"}})
    config = parse_config({"budget": {"max_usd_per_day": 2, "max_usd_per_month": 20.5}})
    assert (config.budget.max_usd_per_day, config.budget.max_usd_per_month) == (2.0, 20.5)
    defaults = load_config(tmp_path)
    assert (defaults.budget.max_usd_per_day, defaults.budget.max_usd_per_month) == (5.0, 50.0)
    # a daily session is never cut short
    assert defaults.budget.max_usd_per_day >= defaults.judge.max_cost_usd
