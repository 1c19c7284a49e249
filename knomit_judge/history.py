"""Reading the record: the last session's status lines, throttle state per pass, verdict listings."""

from __future__ import annotations

from pathlib import Path

from .config import load_config
from .gitops import open_repo
from .passes import JUDGED_PASSES
from .status import PassResult
from .store import Store
from .throttle import assess


def status(root: Path | str, limit: int = 10) -> dict:
    """Everything `knomit-judge status` shows, from the db alone (read-only, no judge call)."""
    root = Path(root).resolve()
    open_repo(root)
    config = load_config(root)
    store = Store.read_only(root)
    sessions = store.sessions(limit)
    throttle = {}
    for name in JUDGED_PASSES:
        t = assess(store, name, config.budget)
        throttle[name] = {"state": t.state, "why": t.why, "next_probe_in": t.next_probe_in,
                          "probe_due": t.probe}
    text = []
    if sessions:
        last = sessions[0]
        text.append(f"last session {last['id']} ({last['started_at']} to {last['ended_at']}):")
        for name, counts in last["passes"].items():
            text.append("  " + PassResult(name, **counts).line())
    else:
        text.append("no sessions yet")
    text.append("throttle:")
    for name, t in throttle.items():
        text.append(f"  {name}: {t['state']} - {t['why']}")
    if sessions:
        text.append("recent sessions:")
        text.append(f"  {'session':<24} {'cost':>10} {'commits':>7}  " + "  ".join(f"{n:<18}" for n in ("exact", *JUDGED_PASSES)))
        for s in sessions:
            cost = "incomplete" if s["cost_usd"] is None else f"${s['cost_usd']:.4f}"
            states = "  ".join(f"{s['passes'].get(n, {}).get('state', '-'):<18}" for n in ("exact", *JUDGED_PASSES))
            text.append(f"  {s['id']:<24} {cost:>10} {len(s['commits']):>7}  {states}")
    return {"last_session": sessions[0] if sessions else None, "throttle": throttle, "sessions": sessions,
            "text": text}


def list_verdicts(root: Path | str, pass_name: str | None = None) -> list[dict]:
    root = Path(root).resolve()
    open_repo(root)
    store = Store.read_only(root)
    return [{"id": v.id, "pass": v.pass_name, "answer": v.answer, "subject": v.subject, "rationale": v.rationale,
             "model": v.model, "prompt": v.prompt, "attempts": v.attempts, "agreement": v.agreement,
             "cost_usd": v.cost_usd, "commit_sha": v.commit_sha, "reverted": v.reverted,
             "created_at": v.created_at} for v in store.verdicts(pass_name)]
