"""The HTML report: self-contained, escaped, and rendered by a real headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from conftest import scripted

from knomit_judge.cli import cli
from knomit_judge.report import render
from knomit_judge.review import ReviewOptions, review

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


def chromium_dom(path, tmp_path) -> str:
    """The page's DOM after Chromium has parsed and laid it out."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        # `make test` installs nothing outside .venv, so a machine without a browser skips this;
        # `make test-browser` sets KNOMIT_REQUIRE_BROWSER and fails instead.
        message = "chromium is not on PATH (see the README: `sudo apt-get install chromium`, then `make test-browser`)"
        if os.environ.get("KNOMIT_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    done = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium'}",
         "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_report_renders_sessions_throttle_decisions_and_calibration_in_chromium(corpus_repo, tmp_path):
    judge = scripted(tmp_path, {**PAIR, "reply": {"same": True, "mechanism": RATIONALE}})
    review(corpus_repo.root, ReviewOptions(judge=judge))
    review(corpus_repo.root, ReviewOptions(judge=judge))
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({**PAIR, "b": "queue-amplifies-latency", "label": False}) + "\n"
                      + json.dumps({"pass": "prune", "a": "facts/ops/f1.md", "b": "facts/ops/f2.md",
                                    "label": "distinct"}) + "\n")
    cli_run = CliRunner().invoke(cli, ["-q", "calibrate", str(labels), str(corpus_repo.root), "--judge", judge])
    assert cli_run.exit_code == 0, cli_run.output

    page = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["-q", "report", str(corpus_repo.root), "--html", str(page)])
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
        assert f"{name} bars: offered" in shown  # each pass's chart, drawn as SVG text
    assert " ".join(RATIONALE.split()) in shown  # the rationale as text ...
    assert "img" not in dom.tags and "script" not in dom.tags  # ... never as markup
    assert dom.tags.count("svg") == 3 and dom.tags.count("rect") > 6
    assert "alias: merge motif" not in shown  # commits are shown by sha and verdict, subjects by spellings
    assert "penalty-blocks-own-recovery / self-locking-penalty" in shown
    assert "worked" in shown and "caught-up" in shown  # the two sessions' states
    # the calibration table: alias 1 question answered correctly no, prune 1 distinct
    assert "alias 1 – – 1.000 – 0.000 (0/1) 0 $0.0000" in shown, shown
    assert "prune 1 – – 1.000 – 0.000 (0/1)" in shown


def test_report_of_a_fresh_corpus_says_what_is_missing(empty_repo):
    page = render(empty_repo.root)
    assert "No sessions yet." in page and "No applied decisions yet." in page and "No calibration yet" in page
    assert page.count("no throttle history yet") == 3
