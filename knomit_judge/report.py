"""The HTML report: one self-contained page (inline CSS and SVG, no network asset) read from the db alone."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import git

from . import audits
from .calibrate import subject_text
from .config import load_config
from .errors import CannotWrite
from .gitops import open_repo, run_git
from .history import status_of
from .inbox import evidence_text, inbox
from .labels import read_labels
from .layout import matches
from .passes import JUDGED_PASSES
from .passes.registry import all_passes
from .precision import history, of_pass
from .store import Store
from .verdicts import Verdict

SESSIONS = 10
# throttle records per pass in the chart
HISTORY = 60
# Each its own colour, apart from the bars' too: `optimistic` is not a blue beside the `judged` blue (issue 31).
STATE_COLOURS = {
    "optimistic": "#f2c80f",
    "funded": "#31a354",
    "unproven": "#fd8d3c",
    "defunded": "#de2d26",
    "unthrottled": "#737373",
}
CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .2em .6em; border: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; text-align: left; } td.wide { min-width: 22em; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: .9em; } .muted { color: #777; }
svg { display: block; margin: .3em 0 1em; max-width: 100%; height: auto; }
table.fit { table-layout: fixed; width: 100%; } table.fit td, table.fit th { overflow-wrap: anywhere; }
.id, .nowrap { white-space: nowrap; }
.worked { color: #31a354; } .broken { color: #de2d26; font-weight: bold; } .defunded { color: #de2d26; }
"""
# px: the page's width at 70em of 14px; a narrower window scales the chart down
CHART_WIDTH = 980


def e(value: object) -> str:
    """Any value, escaped for HTML text and attributes."""
    return escape("" if value is None else str(value), quote=True)


def ident(value: object, title: str | None = None) -> str:
    """An id, sha or session id: monospace, and never broken across lines, so it reads and copies whole."""
    tip = f' title="{e(title)}"' if title else ""
    return f"<code class=id{tip}>{e(value)}</code>"


def path(value: str) -> str:
    """A fact path that may wrap after each '/' (and, as text does, after a hyphen), never inside a word."""
    return "<code>" + "/<wbr>".join(e(part) for part in str(value).split("/")) + "</code>"


_IDS = re.compile(r"\b(\d{8}T\d{6}Z-[0-9a-f]{4}|v[0-9a-f]{12})\b")


def ids_whole(escaped: str) -> str:
    """Escaped prose with the session and verdict ids in it kept whole (a session id has a hyphen to break at)."""
    return _IDS.sub(r"<span class=id>\1</span>", escaped)


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def cost(x: float | None) -> str:
    return "incomplete" if x is None else f"${x:.4f}"


def table(
    head: list[str],
    rows: list[list[str]],
    numeric: Collection[int] = frozenset(),
    wide: Collection[int] = frozenset(),
    widths: list[str] | None = None,
) -> str:
    """A table of already-escaped cells; `numeric` columns align right, `wide` ones get room for prose.

    `widths` (CSS lengths; "" shares what is left) fix the layout to the page's width: long paths wrap
    instead of pushing the table past a narrow screen, and columns of ids are wide enough for them whole.
    """
    th = "".join(f"<th>{h}</th>" for h in head)
    klass = lambda i: " class=num" if i in numeric else " class=wide" if i in wide and not widths else ""  # noqa: E731
    body = "".join("<tr>" + "".join(f"<td{klass(i)}>{c}</td>" for i, c in enumerate(r)) + "</tr>" for r in rows)
    if widths:
        cols = "".join(f'<col style="width: {w}">' if w else "<col>" for w in widths)
        return f"<table class=fit><colgroup>{cols}</colgroup><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def sessions_section(sessions: list[dict[str, Any]]) -> str:
    """The last sessions: when, cost, commits, and each pass's state and counts."""
    if not sessions:
        return "<p class=muted>No sessions yet.</p>"
    rows = []
    for s in sessions:
        cells = [
            ident(s["id"]),
            f"<span class=nowrap>{e(s['started_at'][:19].replace('T', ' '))}</span>",
            e(cost(s["cost_usd"])),
            e(len(s["commits"])),
        ]
        for name in ("exact", *JUDGED_PASSES):
            p = s["passes"].get(name)
            cells.append(
                "–"
                if not p
                else f'<span class="{e(p.get("state"))} nowrap">{e(p.get("state"))}</span>'
                f"<br><span class=muted>judged {e(p.get('judged', 0))}, resolved {e(p.get('resolved', 0))}"
                f", calls {e(p.get('judge_calls', 0))}</span>"
            )
        rows.append(cells)
    return table(["session", "started (UTC)", "cost", "commits", "exact", *JUDGED_PASSES], rows, {2, 3})


def throttle_chart(name: str, rows: list[dict[str, Any]], now: str) -> str:
    """Per session, offered and judged side by side, resolved below them to its own scale, over a strip coloured by
    the throttle state each session ran in; `now` is the state the next one runs in, as `status` says it.

    The sessions share the chart's whole width, however few they are. A few resolutions out of 190 judged would
    be a pixel or two on the judged scale, so resolved has a panel and a scale of its own, every count above zero
    is at least MIN_BAR high, and the counts are printed. A session that offered nothing says why (its outcome,
    from the session record: `caught-up` is drawn as such), not "0/0".
    """
    if not rows:
        return f"<p class=muted>{e(name)}: no throttle history yet.</p>"
    w, left, right, top, plot, gap, rplot, strip = CHART_WIDTH, 40, 10, 44, 100, 8, 36, 10
    rtop = top + plot + gap
    stop = rtop + rplot + 3
    # below the strip: a line of text and the legend
    h = stop + strip + 40
    # a few sessions get wide slots, never a sliver at the left
    slot = (w - left - right) / len(rows)
    # offered and judged side by side: half each
    bw = min(slot * 0.8, 2 * MAX_BAR)
    half = bw / 2
    peak = max(1, *(r["offered"] for r in rows))
    rpeak = max(1, *(r["resolved"] for r in rows))
    # room for "resolved/judged" over each pair; else only the resolutions are printed
    labelled = slot >= 34
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        f'aria-label="throttle history of {e(name)}">',
        f'<text x="{left}" y="14" font-size="13" font-weight="bold">{e(name)}</text>',
        f'<text x="{w - right}" y="28" font-size="11" text-anchor="end" fill="#555">'
        f"bars: offered (grey) and judged (blue) to one scale, resolved ({RESOLVED_NAME}) below to its own; "
        f"numbers: {'resolved/judged' if labelled else 'resolved'}; strip: throttle state</text>",
        f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end">{peak}</text>',
        f'<text x="{left - 4}" y="{top + plot}" font-size="10" text-anchor="end">0</text>',
        f'<line x1="{left}" y1="{top + plot}" x2="{w - right}" y2="{top + plot}" stroke="#999"/>',
        f'<text x="{left - 4}" y="{rtop + 8}" font-size="10" text-anchor="end" fill="{RESOLVED_COLOUR}">{rpeak}</text>',
        f'<text x="{left - 4}" y="{rtop + rplot}" font-size="10" text-anchor="end" fill="{RESOLVED_COLOUR}">0</text>',
        f'<line x1="{left}" y1="{rtop + rplot}" x2="{w - right}" y2="{rtop + rplot}" stroke="#999"/>',
    ]
    caught_up = False
    for i, r in enumerate(rows):
        x = left + i * slot
        bx = x + (slot - bw) / 2
        tallest = 0.0
        for key, colour, dx, scale, base, room in (
            ("offered", OFFERED_COLOUR, 0, peak, top + plot, plot),
            ("judged", JUDGED_COLOUR, half, peak, top + plot, plot),
            ("resolved", RESOLVED_COLOUR, half, rpeak, rtop + rplot, rplot),
        ):
            # any count above zero is at least MIN_BAR high: 3 of 190 must not vanish into the axis
            bh = max(room * r[key] / scale, MIN_BAR if r[key] else 0)
            if key != "resolved":
                tallest = max(tallest, bh)
            parts.append(
                f'<rect class="{key}" x="{bx + dx:.1f}" y="{base - bh:.1f}" '
                f'width="{max(half - 1, 0.5):.1f}" height="{bh:.1f}" fill="{colour}"/>'
            )
        outcome = r.get("outcome") or ""
        # nothing offered: say why rather than draw "0/0"
        if not r["offered"]:
            done = outcome == "caught-up"
            caught_up |= done
            wide = slot >= 80
            word = ("✓ caught-up" if done else outcome or "nothing offered") if wide else "✓" if done else ""
            if word:
                parts.append(
                    f'<text class="idle" x="{x + slot / 2:.1f}" y="{top + plot / 2:.1f}" font-size="12" '
                    f'text-anchor="middle" fill="{IDLE_COLOUR if done else "#555"}">{e(word)}</text>'
                )
            if wide:
                parts.append(
                    f'<text x="{x + slot / 2:.1f}" y="{top + plot / 2 + 15:.1f}" font-size="10" '
                    f'text-anchor="middle" fill="#555">{"nothing left to ask" if done else "0 offered"}'
                    "</text>"
                )
        else:
            label = f"{r['resolved']}/{r['judged']}" if labelled else (str(r["resolved"]) if r["resolved"] else "")
            if label:
                parts.append(
                    f'<text class="count" x="{x + slot / 2:.1f}" y="{top + plot - tallest - 3:.1f}" '
                    f'font-size="10" text-anchor="middle" '
                    f'fill="{RESOLVED_COLOUR if r["resolved"] else "#555"}">{e(label)}</text>'
                )
        tip = (
            f"{r['session']}: {r['state']}{' (probe spent)' if r['probe_spent'] else ''}"
            f"{', ' + outcome if outcome else ''}, offered {r['offered']}, judged {r['judged']}, "
            f"resolved {r['resolved']}"
        )
        parts.append(
            f'<rect class="state" x="{x:.1f}" y="{stop}" width="{max(slot - 1, 1):.1f}" '
            f'height="{strip}" fill="{STATE_COLOURS.get(r["state"], "#000")}"><title>{e(tip)}</title></rect>'
        )
    states = sorted({r["state"] for r in rows})
    judged, resolved = sum(r["judged"] for r in rows), sum(r["resolved"] for r in rows)
    parts.append(
        f'<text x="{left}" y="{h - 22}" font-size="11" fill="#555">{len(rows)} session(s), oldest first: '
        f"resolved {resolved} of {judged} judged; the last ran {e(rows[-1]['state'])}, now {e(now)}"
        f"{'; ✓ caught-up: nothing left to ask' if caught_up else ''}</text>"
    )
    parts.append(
        chart_legend(
            left, h - 14, [(key, colour) for key, colour in BARS] + [(s, STATE_COLOURS.get(s, "#000")) for s in states]
        )
    )
    parts.append("</svg>")
    return "".join(parts)


# "resolved" must not share the "funded" state's green: the two are read side by side
RESOLVED_COLOUR, RESOLVED_NAME = "#6a3d9a", "purple"
OFFERED_COLOUR, JUDGED_COLOUR = "#cccccc", "#3182bd"
BARS = (("offered", OFFERED_COLOUR), ("judged", JUDGED_COLOUR), ("resolved", RESOLVED_COLOUR))
# px: the least height of a bar whose count is above zero
MIN_BAR = 3.0
# px: the widest a bar gets, however few the sessions
MAX_BAR = 40
# the word for a session that offered nothing
IDLE_COLOUR = "#238b45"


def chart_legend(x: float, y: float, items: list[tuple[str, str]]) -> str:
    """A row of colour swatches, each with its label: the bars' series, then the throttle states shown."""
    parts = ['<g class="legend">']
    for label, colour in items:
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="10" height="10" fill="{colour}" stroke="#999"/>'
            f'<text x="{x + 14:.0f}" y="{y + 9:.0f}" font-size="11">{e(label)}</text>'
        )
        x += 22 + 7 * len(label)
    parts.append("</g>")
    return "".join(parts)


def decisions_section(verdicts: list[Verdict], written: Written) -> str:
    """Applied decisions, newest first, each saying what it did to which facts (`written`: from written_facts)."""
    applied = [(v, sha) for v in verdicts if (sha := v.commit_sha)]
    if not applied:
        return "<p class=muted>No applied decisions yet.</p>"
    rows = [
        [
            f"<span class=nowrap>{e(v.created_at[:10])}</span><br>{e(v.created_at[11:19])}",
            e(v.pass_name),
            subject_html(v.subject) if v.subject else "",
            decision_html(v, written),
            e(v.rationale),
            ident(sha[:10], sha)
            + "<br>"
            + ident(v.id)
            + (f"<br><b>reverted</b>: {e(v.revert_reason)}" if v.reverted else ""),
        ]
        for v, sha in reversed(applied)
    ]
    # the columns of words and ids are wide enough for them whole; the prose columns share the rest
    return table(
        ["when (UTC)", "pass", "subject", "decision", "rationale", "commit, verdict"],
        rows,
        widths=["7.5em", "6.5em", "23%", "21%", "", "8.5em"],
    )


def subject_html(subject: dict[str, Any]) -> str:
    """Spellings as `a / b`; fact paths one a line, each free to wrap only between its parts."""
    if "group" in subject:
        return "<br>".join(path(p) for p in subject["group"])
    if subject["a"].endswith(".md") or "/" in subject["a"]:
        return f"{path(subject['a'])}<br>{path(subject['b'])}"
    return e(subject_text(subject))


def decision_html(v: Verdict, written: Written) -> str:
    """What a decision did, in words: which fact it retired and which one it kept, or the fact it proposed."""
    proposed = written.proposed.get(v.id)
    if proposed:
        return "proposed " + ", ".join(path(p) for p in proposed)
    done = []
    for retired in written.retired.get(v.id, ()):
        kept = written.survivor.get(retired)
        if v.answer == "merge":
            done.append(f"merged {path(retired)} into {path(kept)}" if kept else f"merged {path(retired)}")
        else:
            # retired by no judged pass: an exact duplicate's copy
            why = "; kept " if v.pass_name in JUDGED_PASSES else ", an exact duplicate of "
            done.append(f"retracted {path(retired)}" + (f"{why}{path(kept)}" if kept else ""))
    return "<br>".join(done) or e(v.answer)


@dataclass
class Written:
    """What the applied decisions wrote (written_facts)."""

    # verdict id -> the facts it retired
    retired: dict[str, list[str]] = field(default_factory=dict)
    # retired fact -> the fact that survived it
    survivor: dict[str, str] = field(default_factory=dict)
    # verdict id -> the facts its commit added
    proposed: dict[str, list[str]] = field(default_factory=dict)


_RETRACTED_BY = re.compile(r"""^retracted_by:\s*["']?([A-Za-z0-9]+)""")
_SURVIVOR = re.compile(r"""^survivor:\s*["']?([^"'\s]+)""")


def written_facts(repo: git.Repo, verdicts: list[Verdict], fact_globs: list[str]) -> Written:
    """What the applied decisions wrote: verdict id -> the facts it retired (`retracted_by:` in the tracked files),
    retired fact -> the fact that survived it (`survivor:`), and verdict id -> the facts its commit added (a
    discovery's proposal). Two git calls, whatever the number of decisions. A retraction that deleted its
    file leaves no trace to name."""
    found = Written()
    try:
        out = run_git(repo, "grep", "-z", "-I", "-H", "-e", "^retracted_by:", "-e", "^survivor:")
    # exit 1: no fact is retracted
    except git.GitCommandError:
        out = ""
    for line in out.splitlines():
        where, _, text = line.partition("\0")
        if m := _RETRACTED_BY.match(text):
            found.retired.setdefault(m.group(1), []).append(where)
        elif m := _SURVIVOR.match(text):
            found.survivor[where] = m.group(1)
    passes = all_passes()
    proposals = {
        v.commit_sha: v.id for v in verdicts if v.pass_name in passes and passes[v.pass_name].proposes and v.commit_sha
    }
    if proposals:
        try:
            out = run_git(
                repo,
                "-c",
                "core.quotePath=false",
                "log",
                "--no-walk=unsorted",
                "--diff-filter=A",
                "--name-only",
                "--format=@%H",
                *proposals,
            )
        # a commit no longer in the repository: its row names no path
        except git.GitCommandError:
            out = ""
        sha = None
        for line in out.splitlines():
            if line.startswith("@"):
                sha = line[1:]
            elif line and sha in proposals and matches(line, fact_globs):
                found.proposed.setdefault(proposals[sha], []).append(line)
    return found


def flips_section(throttle: dict[str, dict[str, Any]]) -> str:
    """The position flip rate per pass, from the swap sample of review's own verdicts (`status`'s throttle)."""
    rows = []
    for name, t in throttle.items():
        if t["flip_measured"]:
            rows.append([e(name), f"{t['flip_rate']:.3f}", str(t["flips"]), str(t["flip_measured"])])
    if not rows:
        return "<p class=muted>Position flips: no pair in the swap sample yet.</p>"
    return (
        "<p>Position flips: of the pairs whose first order gave the default and that were asked in both "
        "orders anyway (<code>judge.swap_sample</code>), the share whose second order did not.</p>"
        + table(["pass", "flip rate", "flips", "measured"], rows, {1, 2, 3})
    )


def balance_section(status: dict[str, Any]) -> str:
    """Each pass's throttle for its next session, as `status` says it: its state and probe, its balance (in money,
    or in questions for the scripted judge), what that buys at each reader's price, and why."""
    rows = [
        [
            e(name),
            e(t["state_text"]),
            e(t["balance_text"]),
            # status's buys, where status says them (a balance in money): none for one counted in questions
            e(", ".join(f"{n} at {m}" for m, n in t["buys"].items()) if t["buys_text"] else "–"),
            e(t["why"]),
        ]
        for name, t in status["throttle"].items()
    ]
    return (
        f"<p>What each pass may still spend in its next session ({e(status['judge'])} judge), what it buys, and "
        "why: as <code>knomit-judge status</code> says it (docs/throttle.md).</p>"
        + table(["pass", "next session", "balance", "reads it buys", "why"], rows, {2}, wide={4})
    )


# where `make demo` reviews (the Makefile's DEMO), by its last two parts
DEMO_CORPUS = (".demo", "knomit-demo")


def calibration_section(result: dict[str, Any] | None, demo: bool = False) -> str:
    """The calibration's table, or where one would be; `demo`: this is `make demo`'s corpus, which has one beside it."""
    if not result:
        # a calibration is kept in the db of the corpus it ran on (make demo calibrates a corpus of its own, which
        # only the demo's report names: a user's corpus has nothing to do with it)
        return (
            "<p class=muted>No calibration of this corpus yet. <code>knomit-judge calibrate LABELS CORPUS</code> "
            "keeps its result in the db of CORPUS, the corpus whose facts the labels name, and that corpus's "
            "report shows it"
            + (
                " (<code>make demo</code> calibrates its own corpus, "
                "<code>.demo/knomit-calibration</code>, and writes its report beside this one)"
                if demo
                else ""
            )
            + ".</p>"
        )
    rows = []
    for name, s in result["passes"].items():
        flips = f"{num(s['flip_rate'])} ({s['flips']}/{s['flip_measured']})" if s["flip_measured"] else "–"
        rows.append(
            [
                e(name),
                str(s["n"]),
                num(s["precision"]),
                num(s["recall"]),
                num(s["agreement"]),
                num(s["kappa"]),
                flips,
                str(s["judge_calls"]),
                e(cost(s["cost_usd"])),
            ]
        )
    o = result["overall"]
    rows.append(["all", str(o["n"]), num(o["precision"]), num(o["recall"]), num(o["agreement"]), "", "", "", ""])
    wrong = [q for q in result["questions"] if q["answer"] is not None and q["answer"] != q["label"]]
    items = "".join(
        f"<li>line {q['line']} {e(q['pass'])} {e(subject_text(q['subject']))}: label {e(q['label'])}, "
        f"judge {e(q['answer'])}</li>"
        for q in wrong
    )
    skipped = "".join(f"<li>line {s['line']}: {e(s['reason'])}</li>" for s in result["skipped"])
    over = ", ".join(f"{e(n)} {e(s['kappa_over'])}" for n, s in result["passes"].items())
    return (
        f"<p>Judge <code>{e(result['judge'])}</code> against <code>{e(result['labels'])}</code>, "
        f"{e(result['created_at'])}. Precision and recall are of yes (prune: merge or retract); agreement "
        f"and kappa are over {over}; the flip rate is over the pairs whose first order gave the default and "
        f"that were asked in both orders; a split records the default.</p>"
        + table(
            ["pass", "n", "precision", "recall", "agreement", "kappa", "flip rate", "calls", "cost"],
            rows,
            {1, 2, 3, 4, 5, 6, 7, 8},
        )
        + (f"<p>Disagreements with the labels:</p><ul>{items}</ul>" if items else "")
        + (f"<p>Skipped lines:</p><ul>{skipped}</ul>" if skipped else "")
    )


def render(root: Path | str) -> str:
    """The report page for the corpus at root, from a read-only copy of its db."""
    root = Path(root).resolve()
    repo = open_repo(root)
    config = load_config(root)
    with Store.read_only(root) as store:
        # every figure `status` also shows comes from here
        now = status_of(root, store, config, SESSIONS)
        sessions = now["sessions"]
        charts = "".join(
            throttle_chart(n, list(reversed(store.throttle_history(n, HISTORY))), now["throttle"][n]["state_text"])
            for n in JUDGED_PASSES
        )
        charts = balance_section(now) + charts + flips_section(now["throttle"])
        verdicts = store.verdicts()
        decisions = decisions_section(verdicts, written_facts(repo, verdicts, config.corpus.paths))
        calibration = calibration_section(store.last_calibration(), demo=(root.parent.name, root.name) == DEMO_CORPUS)
        readers = first_reader_section(now["first_reader"])
    people = labels_sections(root)
    made = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>knomit-judge report: {e(root.name)}</title><style>{CSS}</style></head><body>"
        f"<h1>knomit-judge report: {e(root.name)}</h1><p class=muted>{e(root)} · generated {e(made)}</p>"
        f"<h2>Last sessions</h2>{sessions_section(sessions)}"
        f"<h2>Throttle history</h2>{charts}"
        f"<h2>The first reader</h2>{readers}"
        f"<h2>Applied decisions</h2>{decisions}"
        f"{people}"
        f"<h2>Calibration</h2>{calibration}"
        "</body></html>\n"
    )


def first_reader_section(readers: dict[str, dict[str, Any]]) -> str:
    """Each pass's first reader over its window (audits.py): state, reads, audits, misses, recall and its bound."""
    rows = [
        [
            e(n),
            e(f["model"] or "–"),
            e(f["state"]),
            str(f["reads"]),
            str(f["audits"]),
            str(f["misses"]),
            num(f["misses_estimated"], 1),
            num(f["recall"], 2),
            audits.bound_text(f["recall_low"], labelled=False),
            f"{f['target']:g}",
        ]
        for n, f in readers.items()
    ]
    return (
        f"<p>Over each pass's last {audits.WINDOW} sessions: the misses the audits found, the misses estimated by "
        "weighting each audit by its inclusion probability, the estimated recall and a 95% lower bound from "
        "the uniform floor of the audits alone.</p>"
        + table(
            ["pass", "model", "state", "reads", "audits", "misses", "estimated", "recall", "lower bound", "target"],
            rows,
            {3, 4, 5, 6, 7, 9},
        )
    )


def write_report(root: Path | str, path: Path | str) -> Path:
    """Write the report page to path (the library API behind `knomit-judge report`)."""
    path = Path(path)
    # first: a corpus error leaves no file behind
    page = render(root)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as err:
        raise CannotWrite(f"--html {path}: {err.strerror or err}") from None
    return path


# People's labels: the inbox and the precision history (inbox.py, labels.py, precision.py) ----------------
INBOX_ROWS = 50
# per fact in the page; `knomit-judge inbox` shows more
EVIDENCE_CHARS = 240
LABELS_CSS = (
    ".inbox { width: 100%; table-layout: fixed; } .inbox td { overflow-wrap: anywhere; } "
    "ul.evidence { margin: 0; padding-left: 1.1em; }"
)


def _clip(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def labels_sections(root: Path) -> str:
    """The inbox and each pass's precision history, as two sections of the page."""
    cfg = load_config(root).calibration
    box = inbox(root)
    labels = read_labels(root)
    rows = []
    for n, item in enumerate(box["items"][:INBOX_ROWS], 1):
        v = item.verdict
        evidence = "".join(
            f"<li><b>{e(k)}</b>: {e(_clip(evidence_text(val)))}</li>" for k, val in item.evidence.items()
        )
        commit = (
            f"proposed in {ident(item.proposal.commit[:10], item.proposal.commit)} ({e(item.proposal.at)})"
            if item.proposal
            else f"applied in {ident(v.commit_sha[:10], v.commit_sha)}"
            if v.commit_sha
            else "not applied"
        )
        command = " or ".join(item.commands[k] for k in ("approve", "reject")) if item.proposal else item.label_command
        rows.append(
            f"<tr><td>{n}<br><b>{e(item.kind)}</b></td>"
            f"<td><b>{e(v.pass_name)}</b><br>{subject_html(v.subject)}"
            f"<br><span class=muted>{ids_whole(e(item.why))}</span></td>"
            f"<td><b>{e(v.answer)}</b>: {e(v.rationale)}<br>{commit}<br>verdict {ident(v.id)}"
            f"<br><code class=muted>{'/<wbr>'.join(e(p) for p in command.split('/'))}</code></td>"
            f"<td><ul class=evidence>{evidence}</ul></td></tr>"
        )
    more = len(box["items"]) - len(rows)
    inbox_html = (
        '<table class=inbox><colgroup><col style="width:7.5em"><col style="width:24%"><col style="width:30%">'
        "<col></colgroup><thead><tr><th>#</th><th>question</th><th>judge said</th><th>evidence</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<p class=muted>and {more} more: <code>knomit-judge inbox</code></p>" if more > 0 else "")
        if rows
        else "<p class=muted>Nothing waits for a label.</p>"
    )
    precision_rows, charts = [], []
    for name in JUDGED_PASSES:
        p = of_pass(labels, name, cfg.min_precision)
        precision_rows.append([e(name), e(p.phrase()), e(p.probation_phrase() if p.probation else "applying")])
        points = history(labels, name, cfg.min_precision)
        if points:
            charts.append(precision_chart(name, points, cfg.min_precision))
    # with no label at all, one line says so (not a table of "no labels yet" and a line per pass saying it again)
    precision = (
        f"{table(['pass', 'precision', 'state'], precision_rows)}{''.join(charts)}"
        if charts
        else "<p class=muted>No labels yet, so every pass applies its decisions.</p>"
    )
    waiting = box.get("proposals")
    proposals = (
        ""
        if waiting is None
        else (
            f"<h2>Proposals waiting</h2><p>{e(waiting['waiting'])} decision(s) wait on <code>{e(waiting['branch'])}</code> "
            f"for <code>knomit-judge approve</code> or <code>reject</code>"
            + (f"; the oldest since {e(waiting['oldest_at'])}" if waiting["oldest_at"] else "")
            + ". They lead the inbox.</p>"
        )
    )
    return (
        f"<style>{LABELS_CSS}</style>{proposals}<h2>Inbox: what needs a look</h2>"
        f"<p>{'Proposals waiting, then undecided questions' if waiting else 'Undecided questions first'}, "
        "then yeses held by probation, "
        f"discovery proposals, and a sample of applied decisions ({e(f'{cfg.sample_rate:g}')} of each "
        f"session's per pass, at least one). Label one with <code>knomit-judge label VERDICT yes|no</code>."
        f"</p>{inbox_html}"
        f"<h2>Precision of applied decisions</h2><p>From people's labels on yes verdicts, with a Wilson 95% "
        f"interval. A pass whose interval lies below {e(f'{cfg.min_precision:.2f}')} "
        f"(<code>calibration.min_precision</code>) is on probation: it judges and stores but applies nothing."
        f"</p>{precision}"
    )


def precision_chart(name: str, points: list[dict[str, Any]], floor: float) -> str:
    """Precision after each label (at least one), oldest first: the line, its 95% band, the probation floor (dashed)."""
    w, h, left, top, plot = 640, 190, 40, 24, 120
    right = w - 16
    step = (right - left) / max(len(points) - 1, 1)
    x = lambda i: left + i * step if len(points) > 1 else (left + right) / 2  # noqa: E731
    y = lambda v: top + plot * (1 - v)  # noqa: E731
    band = (
        " ".join(f"{x(i):.1f},{y(pt['high']):.1f}" for i, pt in enumerate(points))
        + " "
        + " ".join(f"{x(i):.1f},{y(pt['low']):.1f}" for i, pt in reversed(list(enumerate(points))))
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
        f'aria-label="precision history of {e(name)}">',
        f'<text x="{left}" y="15" font-size="13" font-weight="bold">{e(name)}</text>',
        f'<text x="{right}" y="15" font-size="11" text-anchor="end" fill="#555">line: precision; band: 95% '
        f"interval; dashed: min_precision {floor:.2f}; red dots: on probation</text>",
    ]
    for v in (0, 0.5, 1):
        parts.append(
            f'<line x1="{left}" y1="{y(v):.1f}" x2="{right}" y2="{y(v):.1f}" stroke="#e4e4e4"/>'
            f'<text x="{left - 5}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:g}</text>'
        )
    if len(points) > 1:
        parts.append(f'<polygon points="{band}" fill="#6baed6" fill-opacity="0.3"/>')
        line = " ".join(f"{x(i):.1f},{y(pt['precision']):.1f}" for i, pt in enumerate(points))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#3182bd" stroke-width="2"/>')
    parts.append(
        f'<line x1="{left}" y1="{y(floor):.1f}" x2="{right}" y2="{y(floor):.1f}" stroke="#de2d26" '
        f'stroke-dasharray="5,4"/>'
    )
    for i, pt in enumerate(points):
        tip = (
            f"{pt['at']}: precision {pt['precision']:.2f} [{pt['low']:.2f}, {pt['high']:.2f}] from "
            f"{pt['labels']} label(s){' - probation' if pt['probation'] else ''}"
        )
        parts.append(
            f'<line x1="{x(i):.1f}" y1="{y(pt["low"]):.1f}" x2="{x(i):.1f}" y2="{y(pt["high"]):.1f}" stroke="#6baed6"/>'
            if len(points) == 1
            else ""
        )
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(pt["precision"]):.1f}" r="3.5" '
            f'fill="{"#de2d26" if pt["probation"] else "#3182bd"}"><title>{e(tip)}</title></circle>'
        )
    last = points[-1]
    parts.append(
        f'<text x="{left}" y="{top + plot + 22}" font-size="11" fill="#555">{len(points)} label(s), '
        f"oldest first ({e(points[0]['at'][:10])} to {e(last['at'][:10])}); now {last['precision']:.2f} "
        f"[{last['low']:.2f}, {last['high']:.2f}]{' - probation' if last['probation'] else ''}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
