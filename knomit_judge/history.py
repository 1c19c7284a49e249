"""Reading the record: the last session's status lines, throttle state per pass, verdict listings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import audits, precision
from .config import Config, load_config
from .corpus import CorpusReport
from .gitops import open_repo
from .metrics import figures
from .models import status_lines as model_lines
from .passes import JUDGED_PASSES
from .passes.base import DESCRIBE, Step
from .passes.registry import all_passes, steps
from .spend import summarise
from .status import LinesResult, PassResult
from .store import Store
from .sync import Remote
from .throttle import ThrottleState, assess, buys_text, shown, terms


def upcoming(t: ThrottleState) -> str:
    """What the next session's throttle will do, with why, as one phrase."""
    if t.probe:
        return f"{t.state} - {t.why}; the next session probes one candidate"
    return f"{state_text(t)} - {t.why}"


def state_text(t: ThrottleState) -> str:
    """The next session's throttle state, with when it probes: `defunded (next probe in 5 sessions)`."""
    if t.probe:
        return f"{t.state} (the next session probes one candidate)"
    if t.probe_in:
        return f"{t.state} (next probe in {t.probe_in} session{'s' if t.probe_in != 1 else ''})"
    return t.state


def pass_line(name: str, counts: dict[str, Any], every: Mapping[str, Step]) -> str:
    """A stored pass's status line (`every`: registry.steps()); keys this version does not know (or no longer has)
    are skipped."""
    known = {f.name for f in fields(PassResult)}
    lines = name in every and every[name].writes_lines
    return (LinesResult if lines else PassResult)(name, **{k: v for k, v in counts.items() if k in known}).line()


def corpus_line(stored: dict[str, Any]) -> str:
    """A stored session's corpus line; keys this version does not know are skipped."""
    known = {f.name for f in fields(CorpusReport)}
    return CorpusReport(**{k: v for k, v in stored.items() if k in known}).line()


def status(root: Path | str, limit: int = 10) -> dict[str, Any]:
    """Everything `knomit-judge status` shows, from the db alone (read-only, no judge call)."""
    root = Path(root).resolve()
    open_repo(root)
    config = load_config(root)
    with Store.read_only(root) as store:
        return status_of(root, store, config, limit)


def status_of(root: Path, store: Store, config: Config, limit: int = 10) -> dict[str, Any]:
    """status() of an open store: the one source of every figure `status` and the report show."""
    sessions = store.sessions(limit)
    # A session that started and never ended is running now, or was killed: say so, it is not "caught-up".
    unfinished = store.db.execute("SELECT count(*) FROM sessions WHERE ended_at IS NULL").fetchone()[0]
    throttle: dict[str, dict[str, Any]] = {}
    # Verdicts bind only their own kind of judge: show the throttle of the judge that answered last.
    judge = store.latest_judge() or "anthropic"
    passes = all_passes()
    money = terms(config, judge)
    for name in JUDGED_PASSES:
        t = assess(store, name, money, judge)
        flips, measured = store.flips(name, passes[name].default, judge)
        bought = buys_text(t, money)
        throttle[name] = {
            "state": t.state,
            "why": t.why,
            **shown(t, money),
            "probe_due": t.probe,
            "next_probe_in": t.probe_in,
            "text": upcoming(t) + (f"; {bought}" if bought else ""),
            # the same, in parts (the report's table): state and probe, balance, what it buys
            "state_text": state_text(t),
            "balance_text": "unlimited" if t.balance is None else money.amount(t.balance),
            "buys_text": bought,
            "flips": flips,
            "flip_measured": measured,
            "flip_rate": round(flips / measured, 4) if measured else None,
        }
    # after a scripted session (the demo, a test), a plain `review` still starts from the real judge's own
    plain = (
        {}
        if judge == "anthropic"
        else {name: upcoming(assess(store, name, terms(config, "anthropic"), "anthropic")) for name in JUDGED_PASSES}
    )
    spend = summarise(store, config)
    # what the metrics file holds, same figures
    metrics = figures(root, store, config, judge, spend=spend)
    lines = lines_figures(store, sessions)
    readers = metrics["first_reader"]
    # from the labels journal: no db needed
    precisions = precision.by_pass(root, config.calibration)
    last = dict(sessions[0]) if sessions else None
    # what the last session did with the remote, its overridden decisions named
    if last is not None:
        remote = Remote(open_repo(root), config) if config.git.remote else None
        last["sync"] = remote.last() if remote else None
    return {
        "last_session": last,
        "throttle": throttle,
        "judge": judge,
        "config_notes": config.ignored,
        **({"proposals": metrics["proposals"]} if "proposals" in metrics else {}),
        "sessions": sessions,
        "unfinished": unfinished,
        "precision": {n: p.json() for n, p in precisions.items()},
        "spend": spend.json(),
        "metrics": metrics,
        "lines": lines,
        "models": metrics["models"],
        "first_reader": readers,
        "text": render(
            sessions,
            throttle,
            unfinished,
            judge,
            [
                *config.ignored,
                *plain_lines(plain),
                *sync_lines(metrics.get("sync")),
                *proposal_lines(metrics.get("proposals")),
                *model_lines(metrics["models"]),
                *audits.status_lines(readers),
                *precision.precision_lines(precisions),
                *spend.text_lines(),
            ],
        ),
    }


def plain_lines(plain: dict[str, str]) -> list[str]:
    """The throttle a plain `review` (the anthropic judge) would start from, when the last judge was another."""
    if not plain:
        return []
    return [
        "throttle for the next plain review (anthropic judge; its own verdicts only):",
        *(f"  {name}: {text}" for name, text in plain.items()),
    ]


def sync_lines(sync: dict[str, Any] | None) -> list[str]:
    """The shared remote as `status` prints it ([git] remote; none when sessions stay local)."""
    if not sync:
        return []
    said = sync["state"] or "no sync yet"
    return [
        f"sync {sync['remote']}/{sync['branch']}: {said}"
        + (f" - {sync['error']}" if sync.get("error") else "")
        + f"; last push {sync['last_push_at'] or 'never from here'}; unpushed {sync['unpushed_commits']} "
        f"commit(s) over {sync['unpushed_sessions']} session(s); decisions a writer overrode "
        f"{sync['overridden_decisions']}"
    ]


def proposal_lines(proposals: dict[str, Any] | None) -> list[str]:
    """What waits on the proposals branch ([apply] mode = "propose"), and since when."""
    if not proposals:
        return []
    if not proposals["waiting"]:
        return [f"proposals {proposals['branch']} on {proposals['base']}: none waiting"]
    return [
        f"proposals {proposals['branch']} on {proposals['base']}: {proposals['waiting']} waiting, the oldest "
        f"since {proposals['oldest_at']} ({age_text(proposals['oldest_age_s'])}); `knomit-judge inbox` lists "
        "them, `approve` or `reject` each"
    ]


def age_text(seconds: int | None) -> str:
    """An age as a person reads it: 40 s, 12 min, 5 h, 3 d."""
    s = max(0, seconds or 0)
    return (
        f"{s} s" if s < 60 else f"{s // 60} min" if s < 3600 else f"{s // 3600} h" if s < 86400 else f"{s // 86400} d"
    )


def lines_figures(store: Store, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """The describe lines (session/lines.py): what the last session that ran the step wrote and paid, how
    many spellings it left without a line, and how many lines the db holds (a spelling asked and given none
    is not one of them)."""
    last = next((s["passes"][DESCRIBE] for s in sessions if DESCRIBE in s["passes"]), None)
    stored = store.db.execute("SELECT count(*), total(cost_usd) FROM lines WHERE line != ''").fetchone()
    out = {"stored": stored[0], "stored_cost_usd": round(stored[1], 6)}
    if last is None:
        return {
            **out,
            "written": None,
            "cost_usd": None,
            "missing": None,
            "text": "lines: no session has run the describe step",
        }
    cost = "incomplete" if last.get("cost_usd") is None else f"${last['cost_usd']:.4f}"
    missing = last.get("missing", 0)
    return {
        **out,
        "written": last.get("written", 0),
        "cost_usd": last.get("cost_usd"),
        "state": last.get("state"),
        "missing": missing,
        "text": f"lines written {last.get('written', 0)}, {cost}" + (f", missing {missing}" if missing else ""),
    }


def render(
    sessions: list[dict[str, Any]],
    throttle: dict[str, dict[str, Any]],
    unfinished: int = 0,
    judge: str = "anthropic",
    precision_lines: Iterable[str] = (),
) -> list[str]:
    """The text of `status`: the last session's lines, the throttle and precision per pass, recent sessions."""
    cost = lambda s: "incomplete" if s["cost_usd"] is None else f"${s['cost_usd']:.4f}"  # noqa: E731
    if not sessions:
        text = ["no sessions yet"]
    else:
        last = sessions[0]
        text = [
            f"last session {last['id']} ({last['started_at']} to {last['ended_at']}, cost {cost(last)}, "
            f"{len(last['commits'])} commit(s)):"
        ]
        if last.get("corpus"):
            text.append("  " + corpus_line(last["corpus"]))
        every = steps()
        text.extend("  " + pass_line(name, counts, every) for name, counts in last["passes"].items())
    text.append("throttle for the next session" + (f" ({judge} judge):" if judge != "anthropic" else ":"))
    text.extend(f"  {name}: {t['text']}" for name, t in throttle.items())
    flips = [
        f"{name} {t['flip_rate']:.3f} ({t['flips']}/{t['flip_measured']})"
        for name, t in throttle.items()
        if t.get("flip_measured")
    ]
    # from the swap sample: default-first questions asked in both orders anyway
    if flips:
        text.append("position flips (swap sample): " + ", ".join(flips))
    text.extend(precision_lines)
    if sessions:
        columns = ("exact", *JUDGED_PASSES)
        text.append(f"last {len(sessions)} session(s), newest first:")
        header = f"  {'session':<22} {'ended':<20} {'cost':>10} {'commits':>7}  " + "  ".join(
            f"{n:<17}" for n in columns
        )
        text.append(header.rstrip())
        for s in sessions:
            states = "  ".join(f"{s['passes'].get(n, {}).get('state', '-'):<17}" for n in columns)
            text.append(
                f"  {s['id']:<22} {s['ended_at'][:19]:<20} {cost(s):>10} {len(s['commits']):>7}  {states}".rstrip()
            )
    if unfinished:
        text.append(f"{unfinished} session(s) started and did not end (running now, or killed)")
    return text


def list_verdicts(root: Path | str, pass_name: str | None = None) -> list[dict[str, Any]]:
    """Every verdict (of one pass, given its name) as `knomit-judge verdicts` lists it, oldest first."""
    root = Path(root).resolve()
    open_repo(root)
    with Store.read_only(root) as store:
        verdicts = store.verdicts(pass_name)
    return [
        {
            "id": v.id,
            "pass": v.pass_name,
            "answer": v.answer,
            "subject": v.subject,
            "rationale": v.rationale,
            "model": v.model,
            "judge": v.judge,
            "prompt": v.prompt,
            "attempts": v.attempts,
            "agreement": v.agreement,
            "cost_usd": v.cost_usd,
            "commit_sha": v.commit_sha,
            "reverted": v.reverted,
            "created_at": v.created_at,
            "payload": v.payload,
        }
        for v in verdicts
    ]
