"""The HTML report: self-contained, escaped, and rendered by a real headless Chromium."""

from __future__ import annotations

import html
import itertools
import json
import math
import re
from html.parser import HTMLParser

import pytest
from browser import chromium_dom
from click.testing import CliRunner
from helpers import DEMO, demo_repo, git, make_repo, scripted

from knomit_judge.cli import cli
from knomit_judge.report import render, throttle_chart
from knomit_judge.session.review import ReviewOptions, review

PAIR = {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty"}
# A rationale that would be markup if it were not escaped
RATIONALE = 'A penalty removes the signal <img src=x onerror="alert(1)"> needed to lift it & keeps it.'


class Rendered(HTMLParser):
    """The text a browser shows (outside <style> and <title>) and the elements it built."""

    def __init__(self):
        super().__init__()
        self.text, self.tags, self._skip = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._skip += tag in ("style", "title")

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "title")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@pytest.mark.browser
def test_report_renders_sessions_throttle_decisions_and_calibration_in_chromium(corpus_repo, tmp_path):
    judge = scripted(tmp_path, {**PAIR, "reply": {"same": True, "mechanism": RATIONALE}})
    review(corpus_repo.root, ReviewOptions(judge=judge))
    review(corpus_repo.root, ReviewOptions(judge=judge))
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps({**PAIR, "b": "queue-amplifies-latency", "label": False})
        + "\n"
        + json.dumps({"pass": "prune", "a": "facts/ops/f1.md", "b": "facts/ops/f2.md", "label": "distinct"})
        + "\n"
    )
    cli_run = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(corpus_repo.root), "--judge", judge])
    assert cli_run.exit_code == 0, cli_run.output

    page = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(corpus_repo.root), "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert f"wrote {page}" in result.stdout
    raw = page.read_text(encoding="utf-8")
    # self-contained: no script, no stylesheet or image fetched from anywhere
    for needle in ("<script", "<link", "src=", "url(", "@import"):
        assert needle not in raw.replace("&lt;img src=x", ""), needle

    dom = Rendered()
    dom.feed(chromium_dom(page, tmp_path))
    shown = " ".join(" ".join(dom.text).split())
    for name in ("alias", "prune", "discovery"):
        # each pass's chart, drawn as SVG text
        assert f"{name} bars: offered" in shown
    # the rationale as text ...
    assert " ".join(RATIONALE.split()) in shown
    assert "img" not in dom.tags and "script" not in dom.tags  # ... never as markup
    assert dom.tags.count("svg") == 3 and dom.tags.count("rect") > 6
    # commits are shown by sha and verdict, subjects by spellings
    assert "alias: merge motif" not in shown
    assert "penalty-blocks-own-recovery / self-locking-penalty" in shown
    assert "worked" in shown and "caught-up" in shown  # the two sessions' states
    # The calibration table: each pass's one question answered as labelled, by the verdict the reviews stored.
    # Review asked the alias pair in both orders (its swap sample), so a flip was measured: none of 1.
    # It asked the prune pair in one order (a default first answer ends the question), and calibrate reuses
    # the orders review asked (docs/calibration.md): no flip was measured, so the rate is "–", not "0/1".
    assert "alias 1 – – 1.000 – 0.000 (0/1) 0 $0.0000" in shown, shown
    assert "prune 1 – – 1.000 – – 0 $0.0000" in shown, shown


def test_report_of_a_fresh_corpus_says_what_is_missing(empty_repo):
    page = render(empty_repo.root)
    assert "No sessions yet." in page and "No applied decisions yet." in page
    assert page.count("no throttle history yet") == 3
    # no label at all: said once, not in a table row per pass and again under it
    assert page.lower().count("no labels") == 1 and "No labels yet, so every pass applies its decisions." in page
    # where a calibration would be: in the db of the corpus it ran on (make demo calibrates a corpus of its own)
    calibration = page.split("<h2>Calibration</h2>")[1]
    assert "No calibration of this corpus yet." in calibration
    assert "keeps its result in the db of CORPUS" in calibration
    # not the demo: not its corpus
    assert "make demo" not in page and ".demo/knomit-calibration" not in page


def test_only_the_demos_report_names_the_demos_calibration_corpus(tmp_path):
    repo = make_repo(tmp_path / ".demo" / "knomit-demo")
    calibration = render(repo.root).split("<h2>Calibration</h2>")[1]
    assert "<code>make demo</code> calibrates its own corpus, <code>.demo/knomit-calibration</code>" in calibration


def test_report_to_a_missing_directory_is_a_clear_error(corpus_repo, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "r.html"
    result = CliRunner().invoke(cli, ["-q", "report", str(corpus_repo.root), "--html", str(target)])
    assert result.exit_code == 2
    assert result.stderr == f"knomit-judge: --html {target}: No such file or directory\n"
    assert not (tmp_path / "no").exists()


def test_decisions_fit_the_page_charts_have_a_legend_and_retractions_name_the_retired_fact(corpus_repo, tmp_path):
    retract = {
        "pass": "prune",
        "a": "facts/ops/f1.md",
        "b": "facts/ops/f2.md",
        "reply": {
            "decision": "retract",
            "redundant": "B",
            "rationale": "Both say a limiter blocks the probe that lifts it.",
        },
    }
    result = review(corpus_repo.root, ReviewOptions(judge=scripted(tmp_path, retract)))
    assert result.passes["prune"].applied == 1
    assert "status: retracted" in corpus_repo.read("facts/ops/f2.md")  # f1 survives: higher confidence
    page = render(corpus_repo.root)

    decisions = page.split("<h2>Applied decisions</h2>")[1].split("<h2>")[0]
    # fixed layout at the page's width, long paths wrapping: the table cannot be wider than the page; the
    # columns of words and ids are as wide as those are, the prose columns share the rest
    assert decisions.startswith("<table class=fit><colgroup>")
    widths = re.findall(r'<col style="width: ([\d.]+(?:em|%))">|<col>', decisions.split("</colgroup>")[0])
    assert len(widths) == decisions.split("</thead>")[0].count("<th>") == 6
    assert "table.fit { table-layout: fixed; width: 100%; }" in page and "overflow-wrap: anywhere" in page
    # no column may insist on more room than the page has
    assert "min-width" not in decisions
    [row] = [r for r in decisions.split("<tr>") if "<td>prune</td>" in r]
    # what it did, in words: the fact it retracted and the one it kept, each path free to wrap only at a '/'
    assert (
        "<td>retracted <code>facts/<wbr>ops/<wbr>f2.md</code>; kept <code>facts/<wbr>ops/<wbr>f1.md</code></td>" in row
    )
    assert "retired" not in row
    # the sha and the verdict id whole: monospace, never wrapped
    assert re.search(
        r'<code class=id title="[0-9a-f]{40}">[0-9a-f]{10}</code><br><code class=id>v[0-9a-f]{12}</code>', row
    )
    assert ".id, .nowrap { white-space: nowrap; }" in page

    charts = page.split("<h2>Throttle history</h2>")[1].split("<h2>")[0]
    legends = re.findall(r'<g class="legend">(.*?)</g>', charts)
    assert len(legends) == 3  # one per pass
    for legend in legends:
        labels = re.findall(r">([a-z-]+)</text>", legend)
        swatches = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', legend)
        assert labels[:3] == ["offered", "judged", "resolved"] and "optimistic" in labels
        assert len(swatches) == len(labels)


def lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour '#rrggbb'."""
    rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    fx, fy, fz = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_every_colour_of_a_chart_is_told_from_every_other():
    # every state at once, beside the three series: `optimistic` was a light blue beside the `judged` blue
    rows = [
        {"session": f"s{i}", "state": state, "probe_spent": False, "offered": 10, "judged": 9, "resolved": 1}
        for i, state in enumerate(("optimistic", "funded", "unproven", "defunded", "unthrottled"))
    ]
    legend = re.search(r'<g class="legend">(.*?)</g>', throttle_chart("alias", rows, "funded")).group(1)
    labels = re.findall(r">([a-z-]+)</text>", legend)
    swatches = dict(zip(labels, re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', legend)))
    assert len(swatches) == 8
    for one, other in itertools.combinations(swatches, 2):
        # CIE76 delta E: 2 is just noticeable
        distance = math.dist(lab(swatches[one]), lab(swatches[other]))
        assert distance >= 30, (one, other, round(distance, 1))


# Added to a copy of the page only (the report itself has no script): what Chromium measured, as an attribute.
MEASURE = """<script>
const t = document.querySelector("table.fit");
document.body.dataset.measured = JSON.stringify({page: document.documentElement.scrollWidth,
  table: Math.ceil(t.getBoundingClientRect().right), viewport: window.innerWidth});
</script>"""
# no break opportunity at all
LONG = "facts/ops/" + "PenaltyThatBlocksItsOwnRecoveryLatchesTheSystemOff" * 3


@pytest.mark.browser
def test_the_decisions_table_fits_a_1024_pixel_window_in_chromium(corpus_repo, tmp_path):
    corpus_repo.fact(
        f"{LONG}.md", "Rate limiting that disables its own health check keeps a service down forever", confidence=0.9
    )
    corpus_repo.fact(f"{LONG}-again.md", "A limiter that blocks the health check keeps the service down forever")
    corpus_repo.commit("two long paths")
    merge = {
        "pass": "prune",
        "a": f"{LONG}.md",
        "b": f"{LONG}-again.md",
        "reply": {"decision": "merge", "rationale": "Both-say-the-limiter-blocks-the-probe-" * 6},
    }
    assert review(corpus_repo.root, ReviewOptions(judge=scripted(tmp_path, merge))).passes["prune"].applied == 1
    page = tmp_path / "measured.html"
    page.write_text(render(corpus_repo.root).replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium_dom(page, tmp_path, "--window-size=1024,768")
    measured = json.loads(html.unescape(re.search(r'data-measured="([^"]*)"', dom).group(1)))
    assert measured["viewport"] == 1024
    assert measured["table"] <= 1024 and measured["page"] <= 1024, measured


def _bars(svg: str, kind: str) -> list[tuple[float, float, float]]:
    """(x, width, height) of each bar of one series in a chart."""
    return [
        (float(x), float(w), float(h))
        for x, w, h in re.findall(
            rf'<rect class="{kind}" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="([\d.]+)"', svg
        )
    ]


def test_throttle_chart_tells_resolved_from_funded_fills_its_width_and_shows_small_counts():
    # two sessions as issue 22 saw them: a few resolutions out of 150-190 judged
    rows = [
        {"session": "s1", "state": "funded", "probe_spent": False, "offered": 190, "judged": 184, "resolved": 3},
        {"session": "s2", "state": "unproven", "probe_spent": False, "offered": 160, "judged": 150, "resolved": 0},
    ]
    svg = throttle_chart("prune", rows, "unproven")

    legend = re.search(r'<g class="legend">(.*?)</g>', svg).group(1)
    labels = re.findall(r">([a-z-]+)</text>", legend)
    swatches = dict(zip(labels, re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', legend)))
    assert {"resolved", "funded", "unproven"} <= set(swatches)
    assert swatches["resolved"] != swatches["funded"]
    # every series and state its own colour
    assert len(set(swatches.values())) == len(swatches)
    assert "resolved (purple)" in svg

    # the chart is as wide as the page (70em of 14px), and two sessions share its whole width
    width = float(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))
    # scaled down, not cut, in a narrower window
    assert width >= 960 and f'viewBox="0 0 {width:g} ' in svg
    strip = _bars(svg, "state")
    assert strip[-1][0] + strip[-1][1] >= 0.95 * width - 10 and strip[0][1] > width / 3
    offered, judged = _bars(svg, "offered"), _bars(svg, "judged")
    assert offered[1][0] > width / 2
    # offered beside judged, not behind it: 190 offered and 184 judged are two bars of their own
    for (ox, ow, oh), (jx, _, jh) in zip(offered, judged):
        assert ox + ow <= jx and oh > jh > 0

    # 3 resolved out of 184 judged is a bar that can be seen (resolved has its own scale), and its number is printed
    resolved = _bars(svg, "resolved")
    assert resolved[0][2] >= 30 and resolved[1][2] == 0
    counts = re.findall(r'<text class="count"[^>]*>([^<]*)</text>', svg)
    assert counts == ["3/184", "0/150"]
    assert "resolved 3 of 334 judged" in svg


def test_throttle_chart_with_many_sessions_prints_only_the_resolutions():
    rows = [
        {
            "session": f"s{i}",
            "state": "funded" if i % 7 == 0 else "unproven",
            "probe_spent": False,
            "offered": 180,
            "judged": 170,
            "resolved": 1 if i % 7 == 0 else 0,
        }
        for i in range(60)
    ]
    svg = throttle_chart("alias", rows, "defunded")
    assert re.findall(r'<text class="count"[^>]*>([^<]*)</text>', svg) == ["1"] * 9
    assert all(h >= 3 for _, _, h in _bars(svg, "resolved")[::7])


def test_a_caught_up_session_is_drawn_as_caught_up_not_as_zero_of_zero():
    rows = [
        {
            "session": "s1",
            "state": "optimistic",
            "probe_spent": False,
            "offered": 172,
            "judged": 172,
            "resolved": 3,
            "outcome": "worked",
        },
        {
            "session": "s2",
            "state": "funded",
            "probe_spent": False,
            "offered": 0,
            "judged": 0,
            "resolved": 0,
            "outcome": "caught-up",
        },
        {
            "session": "s3",
            "state": "defunded",
            "probe_spent": False,
            "offered": 0,
            "judged": 0,
            "resolved": 0,
            "outcome": "defunded",
        },
    ]
    svg = throttle_chart("alias", rows, "defunded")
    assert re.findall(r'<text class="count"[^>]*>([^<]*)</text>', svg) == ["3/172"]  # no "0/0"
    assert re.findall(r'<text class="idle"[^>]*>([^<]*)</text>', svg) == ["✓ caught-up", "defunded"]
    assert ">nothing left to ask</text>" in svg and "✓ caught-up: nothing left to ask" in svg
    # the strip's tooltip says it too
    assert "s2: funded, caught-up, offered 0" in svg


# What a person sees at 1280 px, as Chromium laid it out (added to a copy of the page; the report has no script):
# the page's width, ids that wrapped, cells that overflow, words broken inside (a line that ends in a text node
# after anything but a space, a hyphen or a '/'), and the charts' and bars' rendered sizes.
LOOK = """<script>
const out = {viewport: window.innerWidth, page: document.documentElement.scrollWidth,
  content: document.querySelector("h2").getBoundingClientRect().width, split: [], overflow: [], broken: [],
  charts: [], resolved: [], hidden: []};
for (const el of document.querySelectorAll(".id")) if (el.getClientRects().length !== 1) out.split.push(el.textContent);
for (const cell of document.querySelectorAll("td, th"))
  if (cell.scrollWidth > cell.clientWidth + 1) out.overflow.push(cell.textContent.slice(0, 60));
const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
const range = document.createRange();
for (let node = walk.nextNode(); node; node = walk.nextNode()) {
  if (node.parentElement.closest("svg")) continue;
  let last = null;
  for (let i = 0; i < node.length; i++) {
    range.setStart(node, i); range.setEnd(node, i + 1);
    const rect = range.getClientRects()[0];
    if (!rect || rect.width === 0) continue;
    if (last && rect.top > last.top + 2 && !/[\\s\\/-]/.test(node.data.slice(last.i, i + 1)))
      out.broken.push(node.data.slice(Math.max(0, i - 12), i) + "|" + node.data.slice(i, i + 12));
    last = {top: rect.top, i};
  }
}
for (const svg of document.querySelectorAll("svg[aria-label^='throttle']")) {
  out.charts.push(Math.round(svg.getBoundingClientRect().width));
  const bars = k => [...svg.querySelectorAll("rect." + k)].map(r => r.getBoundingClientRect());
  for (const r of bars("resolved")) if (r.height > 0) out.resolved.push(r.height);
  for (const o of bars("offered")) for (const j of bars("judged"))
    if (o.height > 0 && Math.min(o.right, j.right) - Math.max(o.left, j.left) > 0.5) out.hidden.push([o.left, j.left]);
}
document.body.dataset.look = JSON.stringify(out);
</script>"""


@pytest.mark.browser
def test_the_demo_report_reads_whole_at_1280_pixels_in_chromium(tmp_path):
    repo = demo_repo(tmp_path / "demo")
    judge = f"scripted:{DEMO / 'judge-replies.jsonl'}"
    review(repo.root, ReviewOptions(judge=judge))
    assert all(
        p.state == "caught-up" for n, p in review(repo.root, ReviewOptions(judge=judge)).passes.items() if n != "exact"
    )
    [discovery] = git(repo.root, "log", "--format=%H", "--grep=^Knomit-Pass: discovery$").split()
    [proposed] = git(repo.root, "show", "--format=", "--name-only", "--diff-filter=A", discovery, "--", "facts").split()

    page = tmp_path / "look.html"
    page.write_text(render(repo.root).replace("</body>", LOOK + "</body>"), encoding="utf-8")
    dom = chromium_dom(page, tmp_path, "--window-size=1280,900")
    look = json.loads(html.unescape(re.search(r'data-look="([^"]*)"', dom).group(1)))
    text = Rendered()
    text.feed(dom.split("<script>")[0])
    # a <wbr> adds no space: paths read as one word
    shown = " ".join("".join(text.text).split())

    # the page fits the window, and nothing in it is cut or broken inside a word, an id or a sha
    assert look["viewport"] == 1280 and look["page"] <= 1280, look
    assert look["split"] == [] and look["overflow"] == [] and look["broken"] == [], look
    # the three throttle charts use the page's width; resolved is a bar one sees; offered is not behind judged
    assert len(look["charts"]) == 3 and min(look["charts"]) >= 0.97 * look["content"], look
    assert look["resolved"] and min(look["resolved"]) >= 20 and look["hidden"] == [], look
    # the second session, caught-up in every judged pass, is drawn as such, never as "0/0"
    assert re.findall(r'<text class="idle"[^>]*>([^<]*)</text>', dom) == ["✓ caught-up"] * 3 and "0/0" not in shown
    decisions = shown.split("Applied decisions")[1].split("Inbox")[0]
    # the discovery row names the new fact
    assert f"proposed {proposed}" in decisions
    assert re.search(r"merged facts/\S+\.md into facts/\S+\.md", decisions)
    assert re.search(r"retracted facts/\S+\.md; kept facts/\S+\.md", decisions)
    assert re.search(r"retracted facts/\S+\.md, an exact duplicate of facts/\S+\.md", decisions)
    assert "retired" not in decisions
    assert shown.lower().count("no labels") == 1
    assert "No calibration of this corpus yet." in shown


class Cells(HTMLParser):
    """Every table row's cells, as text."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_every_figure_the_report_shows_agrees_with_status_after_a_session(tmp_path):
    """Issue 54: after one session the report's throttle table said `prune defunded 0 questions 0 at question`,
    its chart `now optimistic`, and `status` `defunded (next probe in 5 sessions)`. Each figure both show is
    compared here with what `knomit-judge status` prints."""
    import shutil

    from helpers import REPO

    fixture = REPO / "corpus-fixtures" / "knomit"
    root = tmp_path / "kb"
    root.mkdir()
    shutil.copytree(fixture / "kb", root / "kb")
    shutil.copytree(fixture / ".knomit", root / ".knomit")
    git(root, "init", "-q", "-b", "main")
    assert CliRunner().invoke(cli, ["-q", "init", str(root)]).exit_code == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "kb")
    judge = f"scripted:{fixture / 'judge-replies.jsonl'}"
    assert CliRunner().invoke(cli, ["-q", "review", str(root), "--judge", judge]).exit_code == 0
    said = CliRunner().invoke(cli, ["status", str(root)]).stdout.splitlines()
    data = json.loads(CliRunner().invoke(cli, ["status", str(root), "--json"]).stdout)
    # the case of the issue
    assert data["throttle"]["prune"]["state"] == "defunded"

    page = render(root)
    cells = Cells()
    cells.feed(page)
    rows = {(r[0], len(r)): r for r in cells.rows if r}
    shown = " ".join(" ".join(html.unescape(t) for t in re.findall(r">([^<>]+)<", page)).split())
    # the throttle table, row by row, reads as status's line for the pass: "prune: STATE - WHY; balance ..."
    throttle = said[said.index("throttle for the next session (scripted judge):") + 1 :][:3]
    for name, line in zip(("alias", "prune", "discovery"), throttle):
        _, state, balance, buys, why = rows[(name, 5)]
        assert line == f"  {name}: {state} - {why}" + (
            f"; balance {balance} buys {buys.replace(' at ', ' reads at ', 1)}" if buys != "–" else ""
        )
        assert balance == data["throttle"][name]["balance_text"]
        # the chart's "now" is the state status names for the next session, not the one the last session ran in
        assert f"now {state}" in re.search(rf'aria-label="throttle history of {name}".*?</svg>', page).group(0)
    # the sessions table: each pass's state and counts as status's sessions hold them
    for s in data["sessions"]:
        row = next(r for r in cells.rows if r and r[0] == s["id"])
        for name, cell in zip(("exact", "alias", "prune", "discovery"), row[4:]):
            p = s["passes"][name]
            assert cell == f"{p['state']} judged {p['judged']}, resolved {p['resolved']}, calls {p['judge_calls']}"
    # the position flips: status's line "position flips (swap sample): prune 0.000 (0/1)"
    flips = next(line for line in said if line.startswith("position flips"))
    for name, rate, n, measured in re.findall(r"(\w+) ([\d.]+) \((\d+)/(\d+)\)", flips):
        assert rows[(name, 4)] == [name, rate, n, measured]
    # the first reader: what status --json (and the metrics) hold
    for name, f in data["first_reader"].items():
        assert rows[(name, 10)][:6] == [
            name,
            f["model"] or "–",
            f["state"],
            str(f["reads"]),
            str(f["audits"]),
            str(f["misses"]),
        ]
    assert "resolved 1 of 28 judged" in shown and "28 asked for 28 questions, 1 resolved" in " ".join(said)
