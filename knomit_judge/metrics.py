"""The metrics file: a Prometheus textfile-collector file written after every session.

A healthy unattended judge converges to zero work, which looks the same as a dead one; these figures let
an alerting system tell them apart (the pass's state, when it last succeeded, how many sessions in a row
it was broken). `status --json` carries the same figures under "metrics", so a script needs only one.
Every series is a gauge (a value as of the last session): no `_total`, since nothing here is a counter.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import git

from . import audits
from .config import Config
from .errors import ConfigError
from .files import atomic_write
from .gitops import open_repo
from .models import kept_lifecycles
from .passes import JUDGED_PASSES
from .passes.base import DESCRIBE
from .proposals import Board
from .spend import Spend, summarise
from .status import STATES
from .store import Store
from .sync import STATES as SYNC_STATES
from .sync import Remote
from .throttle import STANDINGS, assess, shown, terms

log = logging.getLogger(__name__)

# what a pass's recorded session may end as: a dry run (would-offer) records none, and only the describe step skips
# (its series say its own state)
PASS_STATES = tuple(s for s in STATES if s not in ("would-offer", "skipped"))
CORPUS_STATES = ("read", "broken")
LIFECYCLES = ("active", "deprecated", "retired")
# a pass that did not do its work this session
FAILED = ("broken", "aborted")
# sessions read back to find a pass's last success; older than that counts as none
SCAN_SESSIONS = 1000


def textfile(root: Path, repo: git.Repo, config: Config, override: Path | None = None) -> Path | None:
    """Where this session's metrics go (review --metrics-file wins over [metrics] textfile), checked now.

    A relative [metrics] textfile is relative to the corpus. A file in the corpus's work tree that git
    does not ignore would make the tree dirty, and a dirty tree applies nothing: refused.
    """
    key = "--metrics-file" if override else "metrics.textfile"
    raw = override or (Path(config.metrics.textfile) if config.metrics.textfile else None)
    if raw is None:
        return None
    path = raw if raw.is_absolute() else (Path.cwd() if override else root) / raw
    path = path.parent.resolve() / path.name
    if not path.parent.is_dir():
        raise ConfigError(f"{key} {str(raw)!r}: directory {path.parent} does not exist")
    if path.is_dir():
        raise ConfigError(f"{key} {str(raw)!r}: is a directory")
    if path.is_relative_to(root) and not repo.ignored(str(path.relative_to(root))):
        raise ConfigError(
            f"{key} {str(raw)!r}: inside the corpus and not ignored by git, it would leave the "
            "work tree dirty and no decision would be applied; write it outside the corpus "
            "(e.g. node_exporter's textfile directory) or git-ignore it"
        )
    # a real write, as the session's will be (access() says yes to root on any disk that is not read-only)
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as e:
        raise ConfigError(f"{key} {str(raw)!r}: cannot write in {path.parent}: {e.strerror or e}") from None
    return path


def reader_states(history: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """Each judged pass's first-reader state as its last session had it (`reading` or `suspended`): what status,
    the metrics and the report publish, so they never disagree with the session."""
    return {n: h["counts"].get("first_reader_state") for n, h in history.items() if n in JUDGED_PASSES}


def pass_history(store: Store, limit: int = SCAN_SESSIONS) -> dict[str, dict[str, Any]]:
    """Per judged pass and the describe step: its last session's counts and end, its last success, and its
    run of failed sessions."""
    out: dict[str, dict[str, Any]] = {}
    names = (*JUDGED_PASSES, DESCRIBE)
    # passes whose run of failures (newest first) is still unbroken
    open_runs = set(names)
    cur = store.db.execute(
        "SELECT id, ended_at, passes FROM sessions WHERE ended_at IS NOT NULL "
        "ORDER BY started_at DESC, rowid DESC LIMIT ?",
        [limit],
    )
    try:
        for sid, ended, passes in cur:
            for name, counts in json.loads(passes).items():
                if name not in names:
                    continue
                h = out.setdefault(
                    name,
                    {
                        "session": sid,
                        "counts": counts,
                        "ended_at": ended,
                        "last_success_at": None,
                        "failed_sessions": 0,
                    },
                )
                if name in open_runs:
                    if counts.get("state") in FAILED:
                        h["failed_sessions"] += 1
                    else:
                        h["last_success_at"] = ended
                        open_runs.discard(name)
            if not open_runs:
                # every pass's last success is found: older sessions change nothing
                break
    finally:
        cur.close()
    return out


def figures(
    root: Path,
    store: Store,
    config: Config,
    judge: str = "anthropic",
    now: datetime | None = None,
    *,
    spend: Spend | None = None,
) -> dict[str, Any]:
    """Everything the metrics file holds, as one JSON-able dict (also `status --json`'s "metrics")."""
    spend = spend or summarise(store, config, now)
    last = store.sessions(1)
    history = pass_history(store)
    passes: dict[str, dict[str, Any]] = {}
    money = terms(config, judge)
    for name in JUDGED_PASSES:
        h = history.get(name)
        counts = h["counts"] if h else {}
        t = assess(store, name, money, judge)
        charged = counts.get("charged_usd", counts.get("cost_usd"))
        passes[name] = {
            "state": counts.get("state"),
            "throttle": t.state,
            # a pass no session has run yet has no last session: its counts are None, not 0
            **{
                k: counts.get(k, 0) if h else None
                for k in (
                    "candidates",
                    "offered",
                    "judged",
                    "resolved",
                    "waiting",
                    "first_reads",
                    "audits",
                    "misses",
                    "handed_over",
                )
            },
            # allowance: None is unlimited (the dollar caps still hold); the balance in money, and the reads it buys
            # at each reader's price
            **shown(t, money),
            "session_cost_usd": charged if h else None,
            "today_cost_usd": spend.per_pass[name]["today_usd"],
            "last_30_days_cost_usd": spend.per_pass[name]["last_30_days_usd"],
            "last_session_at": h["ended_at"] if h else None,
            "last_success_at": h["last_success_at"] if h else None,
            "failed_sessions": h["failed_sessions"] if h else None,
        }
    # the describe step: no throttle, no verdicts; its spellings and lines
    h = history.get(DESCRIBE)
    counts = h["counts"] if h else {}
    describe = {
        "state": counts.get("state"),
        **{k: counts.get(k, 0) if h else None for k in ("candidates", "offered", "waiting", "written", "missing")},
        "session_cost_usd": counts.get("charged_usd", counts.get("cost_usd")) if h else None,
        **{k: h[k] if h else None for k in ("last_success_at", "failed_sessions")},
        "last_session_at": h["ended_at"] if h else None,
    }
    corpus = last[0]["corpus"] if last and last[0].get("corpus") else None
    sync = None
    # read from git and this clone's last sync: the remote's own figures
    if config.git.remote:
        ended = [
            r[0]
            for r in store.db.execute(
                "SELECT ended_at FROM sessions WHERE ended_at IS NOT NULL ORDER BY started_at DESC LIMIT ?",
                [SCAN_SESSIONS],
            )
        ]
        sync = Remote(open_repo(root), config).figures(ended)
    # [apply] mode = "propose": what waits on the proposals branch for a person's word, read from git
    proposals = Board(root, open_repo(root), config).figures(now) if config.apply.mode == "propose" else None
    return {
        **({"sync": sync} if sync else {}),
        **({"proposals": proposals} if proposals else {}),
        "models": kept_lifecycles(config, store),
        # each pass's first reader as its last session had it (suspended or reading), with its window
        "first_reader": audits.first_readers(store, config, JUDGED_PASSES, reader_states(history)),
        "corpus": {
            "path": str(root),
            "state": corpus["state"] if corpus else None,
            "files": corpus["files"] if corpus else None,
            "read": corpus["read"] if corpus else None,
            "skipped": corpus["skipped"] if corpus else None,
        },
        "last_session_at": last[0]["ended_at"] if last else None,
        "passes": passes,
        "describe": describe,
        "spend": {
            "today_usd": spend.today_usd,
            "last_30_days_usd": spend.last_30_days_usd,
            "month_to_date_usd": spend.month_to_date_usd,
            "month_projection_usd": spend.month_projection_usd,
            "day_cap_usd": spend.caps["day_usd"],
            "month_cap_usd": spend.caps["month_usd"],
        },
    }


# name, help, where the value comes from: ("pass", key) per pass, or ("spend", key) / ("corpus", key)
_PASS_GAUGES = [
    ("knomit_judge_pass_candidates", "Candidates the pass met in its last session.", "candidates"),
    ("knomit_judge_pass_offered_candidates", "Candidates offered to the judge in the pass's last session.", "offered"),
    (
        "knomit_judge_pass_judged_candidates",
        "Candidates judged (a verdict came back) in the pass's last session.",
        "judged",
    ),
    (
        "knomit_judge_pass_resolved_candidates",
        "Candidates resolved (merged or retracted) in the pass's last session.",
        "resolved",
    ),
    (
        "knomit_judge_pass_waiting_candidates",
        "Candidates the budget or a cap held back in the pass's last session.",
        "waiting",
    ),
    (
        "knomit_judge_pass_allowance_questions",
        "Questions the throttle allows the pass's next session (+Inf: unlimited; the dollar caps still hold).",
        "allowance",
    ),
    (
        "knomit_judge_pass_balance_usd",
        "The pass's balance for its next session, in USD (what it may still spend on reads; docs/throttle.md).",
        "balance_usd",
    ),
    (
        "knomit_judge_pass_session_cost_usd",
        "What the pass's last session counted against the dollar caps, in USD.",
        "session_cost_usd",
    ),
    ("knomit_judge_pass_today_cost_usd", "What the pass spent today (UTC), in USD.", "today_cost_usd"),
    (
        "knomit_judge_pass_last_30_days_cost_usd",
        "What the pass spent over the last 30 days, in USD.",
        "last_30_days_cost_usd",
    ),
    (
        "knomit_judge_pass_last_session_timestamp_seconds",
        "When the pass's last session ended (Unix time).",
        "last_session_at",
    ),
    (
        "knomit_judge_pass_last_success_timestamp_seconds",
        "When the last session in which the pass was neither broken nor aborted ended (Unix time).",
        "last_success_at",
    ),
    (
        "knomit_judge_pass_failed_sessions",
        "Sessions in a row, up to the last, in which the pass was broken or aborted (0: the last one was not).",
        "failed_sessions",
    ),
    ("knomit_judge_pass_first_reads", "Questions the first reader read in the pass's last session.", "first_reads"),
    (
        "knomit_judge_pass_audits",
        "First-reader no's the judge model read again in the pass's last session (session/rereads.py).",
        "audits",
    ),
    (
        "knomit_judge_pass_misses",
        "Audits in the pass's last session where the judge model said yes to a first-reader no.",
        "misses",
    ),
    (
        "knomit_judge_pass_handed_over",
        "Questions the first reader could not read in the pass's last session (unavailable, refused): the judge "
        "model read them.",
        "handed_over",
    ),
]
# the first reader over its window (audits.py), per pass: absent while there is nothing to say
_FIRST_READER_GAUGES = [
    (
        "knomit_judge_first_reader_recall",
        "The first reader's estimated recall over the pass's last sessions.",
        "recall",
    ),
    (
        "knomit_judge_first_reader_recall_low",
        "A 95% lower bound on the first reader's recall, from the uniform floor of its audits.",
        "recall_low",
    ),
    ("knomit_judge_first_reader_recall_target", "judge.first_reader_recall.", "target"),
    (
        "knomit_judge_first_reader_misses_estimated",
        "The first reader's misses over the pass's last sessions, inverse-probability weighted.",
        "misses_estimated",
    ),
]
_DESCRIBE_GAUGES = [
    (
        "knomit_judge_describe_missing_lines",
        "Motif spellings left without a describe line by the step's last session: to ask again, or waiting after "
        "describe.max_tries requests gave none.",
        "missing",
    ),
    ("knomit_judge_describe_written_lines", "Describe lines written in the step's last session.", "written"),
]
_SPEND_GAUGES = [
    ("knomit_judge_today_cost_usd", "What every session today (UTC) spent, in USD.", "today_usd"),
    ("knomit_judge_last_30_days_cost_usd", "What every session of the last 30 days spent, in USD.", "last_30_days_usd"),
    (
        "knomit_judge_month_to_date_cost_usd",
        "What every session this calendar month (UTC) spent, in USD.",
        "month_to_date_usd",
    ),
    (
        "knomit_judge_month_projection_cost_usd",
        "This month's spend projected at the last 7 days' rate, in USD.",
        "month_projection_usd",
    ),
    ("knomit_judge_day_cap_usd", "budget.max_usd_per_day, in USD.", "day_cap_usd"),
    ("knomit_judge_month_cap_usd", "budget.max_usd_per_month, in USD.", "month_cap_usd"),
]
_CORPUS_GAUGES = [
    ("knomit_judge_corpus_matched_files", "Files the corpus paths matched in the last session.", "files"),
    ("knomit_judge_corpus_read_files", "Fact files read in the last session.", "read"),
    ("knomit_judge_corpus_skipped_files", "Fact files skipped (malformed, too large) in the last session.", "skipped"),
]


_SYNC_GAUGES = [
    ("knomit_judge_unpushed_commits", "Local commits not on the remote branch.", "unpushed_commits"),
    (
        "knomit_judge_unpushed_sessions",
        "Sessions that ended since the oldest local commit not on the remote was made (0: everything is pushed).",
        "unpushed_sessions",
    ),
    (
        "knomit_judge_overridden_decisions",
        "Decisions whose change a writer's edit overrode in a merge (all history).",
        "overridden_decisions",
    ),
]


def _label(value: str) -> str:
    """A label value escaped as the exposition format wants."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    """`{k="v",...}`."""
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in labels.items()) + "}"


def _value(v: float | str | None) -> str:
    """A sample's value: a number, a timestamp as Unix time, or +Inf."""
    if isinstance(v, str):  # an ISO timestamp
        return repr(datetime.fromisoformat(v).timestamp())
    if v is None:
        # only the allowance is None with a sample: unlimited
        return "+Inf"
    if isinstance(v, float) and math.isinf(v):
        return "+Inf"
    # no figure here can be NaN (config.py keeps every number finite)
    if isinstance(v, float) and math.isnan(v):
        raise ValueError("a metric is NaN")
    return repr(float(v)) if isinstance(v, float) else str(int(v))


def _family(out: list[str], name: str, help_text: str, samples: list[tuple[str, float | str | None]]) -> None:
    """One gauge: its HELP and TYPE lines, then a line per sample."""
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} gauge")
    out.extend(f"{name}{labels} {_value(v)}" for labels, v in samples)


def render(fig: dict[str, Any]) -> str:
    """The figures in the Prometheus text exposition format (what node_exporter's textfile collector reads)."""
    corpus = fig["corpus"]["path"]
    out: list[str] = []
    passes = fig["passes"]
    # a pass never run has no last session
    ran = {n: p for n, p in passes.items() if p["state"] is not None}
    describe = fig.get("describe") or {}
    # the describe step, labelled as a pass: one alert rule covers it too
    if describe.get("state") is not None:
        ran[DESCRIBE] = describe
    _family(
        out,
        "knomit_judge_pass_state",
        "The pass's state in its last session: 1 for the current one.",
        [
            (_labels(corpus=corpus, **{"pass": n}, state=s), int(p["state"] == s))
            for n, p in ran.items()
            for s in sorted({*PASS_STATES, p["state"]})
        ],
    )
    _family(
        out,
        "knomit_judge_pass_throttle_state",
        "The throttle's state for the pass's next session: 1 for the current one.",
        [
            (_labels(corpus=corpus, **{"pass": n}, state=s), int(p["throttle"] == s))
            for n, p in passes.items()
            for s in sorted({*STANDINGS, p["throttle"]})
        ],
    )
    for name, help_text, key in _PASS_GAUGES:
        samples = [
            (_labels(corpus=corpus, **{"pass": n}), p[key])
            for n, p in passes.items()
            # an allowance of None is +Inf: unlimited
            if key == "allowance" or p[key] is not None
        ]
        # the step has the series that mean something for it
        if describe.get(key) is not None:
            samples.append((_labels(corpus=corpus, **{"pass": DESCRIBE}), describe[key]))
        _family(out, name, help_text, samples)
    for name, help_text, key in _DESCRIBE_GAUGES:
        if describe.get(key) is not None:
            _family(out, name, help_text, [(_labels(corpus=corpus), describe[key])])
    c = fig["corpus"]
    if c["state"] is not None:
        _family(
            out,
            "knomit_judge_corpus_state",
            "What the last session made of the corpus: 1 for the current state.",
            [(_labels(corpus=corpus, state=s), int(c["state"] == s)) for s in sorted({*CORPUS_STATES, c["state"]})],
        )
        for name, help_text, key in _CORPUS_GAUGES:
            _family(out, name, help_text, [(_labels(corpus=corpus), c[key])])
    if fig["last_session_at"]:
        _family(
            out,
            "knomit_judge_last_session_timestamp_seconds",
            "When the last session ended (Unix time).",
            [(_labels(corpus=corpus), fig["last_session_at"])],
        )
    for name, help_text, key in _SPEND_GAUGES:
        _family(out, name, help_text, [(_labels(corpus=corpus), fig["spend"][key])])
    if sync := fig.get("sync"):
        if sync["state"] is not None:
            _family(
                out,
                "knomit_judge_sync_state",
                "What the last session made of [git] remote: 1 for the current state.",
                [
                    (_labels(corpus=corpus, state=s), int(sync["state"] == s))
                    for s in sorted({*SYNC_STATES, sync["state"]})
                ],
            )
        if sync["last_push_at"]:
            _family(
                out,
                "knomit_judge_last_push_timestamp_seconds",
                "When a push from this clone last updated the remote branch (Unix time).",
                [(_labels(corpus=corpus), sync["last_push_at"])],
            )
        for name, help_text, key in _SYNC_GAUGES:
            _family(out, name, help_text, [(_labels(corpus=corpus), sync[key])])
    if proposals := fig.get("proposals"):
        _family(
            out,
            "knomit_judge_proposals_waiting",
            'Decisions waiting on the proposals branch for `approve` or `reject` ([apply] mode = "propose").',
            [(_labels(corpus=corpus, branch=proposals["branch"]), proposals["waiting"])],
        )
        if proposals["oldest_at"]:
            _family(
                out,
                "knomit_judge_proposals_oldest_timestamp_seconds",
                "When the oldest proposal still waiting was made (Unix time); absent while none waits.",
                [(_labels(corpus=corpus, branch=proposals["branch"]), proposals["oldest_at"])],
            )
    readers = {n: f for n, f in (fig.get("first_reader") or {}).items() if f["state"] != "off"}
    if readers:
        _family(
            out,
            "knomit_judge_first_reader_state",
            "The pass's first reader: 1 for its state.",
            [
                (_labels(corpus=corpus, **{"pass": n}, model=f["model"], state=s), int(f["state"] == s))
                for n, f in readers.items()
                for s in ("reading", "suspended")
            ],
        )
    for name, help_text, key in _FIRST_READER_GAUGES:
        if samples := [
            (_labels(corpus=corpus, **{"pass": n}), f[key]) for n, f in readers.items() if f[key] is not None
        ]:
            _family(out, name, help_text, samples)
    models = fig.get("models") or []
    if any(m["lifecycle"] for m in models):
        _family(
            out,
            "knomit_judge_model_lifecycle",
            "Each model the config names, as the Models API last said: 1 for its lifecycle stage.",
            [
                (_labels(corpus=corpus, key=m["key"], model=m["model"], lifecycle=s), int(m["lifecycle"] == s))
                for m in models
                if m["lifecycle"]
                for s in sorted({*LIFECYCLES, m["lifecycle"]})
            ],
        )
    if retiring := [m for m in models if m["retires_at"]]:
        _family(
            out,
            "knomit_judge_model_retires_timestamp_seconds",
            "When a model the config names is scheduled to retire (Unix time); absent while none is.",
            [(_labels(corpus=corpus, key=m["key"], model=m["model"]), m["retires_at"]) for m in retiring],
        )
    return "\n".join(out) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Replace path with text so that a reader (or a kill at any instant) sees the old file or the new one.

    files.atomic_write's temp file, fsync and rename; the temporary name starts with a dot and does not
    end in .prom, so the textfile collector never reads a half-written one. Mode 0644: the collector often
    runs as another user, and nothing here is secret.
    """
    path = Path(path)
    atomic_write(path, text, mode=0o644, prefix=f".{path.name}.")


def write(path: Path, root: Path, store: Store, config: Config, judge: str = "anthropic") -> str | None:
    """Write the metrics file after a session; a failure is logged and returned (the session's work is
    committed already, so nothing is lost, but the caller exits non-zero so a unit shows it)."""
    try:
        write_atomic(path, render(figures(root, store, config, judge)))
    except OSError as e:
        log.error("metrics file %s not written: %s", path, e)
        return f"metrics file {path} not written: {e.strerror or e}"
    return None
