"""Labels: journalled and committed alone, who and when, the revert they offer, files of them, and the report."""

from __future__ import annotations

import json
import shlex
import subprocess
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner
from helpers import git, scripted, tree_digest

from knomit_judge.cli import cli
from knomit_judge.config import parse_config
from knomit_judge.errors import ConfigError
from knomit_judge.labels import LABELS_FILE
from knomit_judge.report import render
from knomit_judge.session.review import ReviewOptions, review

PAIR = {"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty"}
SAME = {"same": True, "mechanism": "A penalty removes the signal needed to lift it."}


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def reviewed(repo, tmp_path) -> str:
    """Review the SMALL corpus (one alias merge); the applied verdict's id."""
    review(repo.root, ReviewOptions(judge=scripted(tmp_path, {**PAIR, "reply": SAME}), passes=("alias",)))
    verdicts = json.loads(run("verdicts", repo.root, "--pass", "alias", "--json").stdout)["verdicts"]
    return next(v["id"] for v in verdicts if v["commit_sha"])


def test_a_label_commit_carries_only_the_label_line(corpus_repo, tmp_path, monkeypatch):
    vid = reviewed(corpus_repo, tmp_path)
    corpus_repo.write("notes.txt", "staged by the user\n")
    git(corpus_repo.root, "add", "notes.txt")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ann Label")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ann@example.org")
    head = git(corpus_repo.root, "rev-parse", "HEAD").strip()
    out = run("label", vid, "no", corpus_repo.root, "--note", "two different mechanisms")
    assert out.exit_code == 0, out.output

    sha = git(corpus_repo.root, "rev-parse", "HEAD").strip()
    assert git(corpus_repo.root, "rev-parse", f"{sha}^").strip() == head
    assert git(corpus_repo.root, "show", "--name-only", "--format=", sha).split() == [LABELS_FILE]
    added = [
        line[1:]
        for line in git(corpus_repo.root, "show", "--format=", sha).splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert len(added) == 1
    record = json.loads(added[0])
    assert record == {
        **record,
        "type": "label",
        "verdict": vid,
        "pass": "alias",
        "answer": "same",
        "is_yes": True,
        "label": "no",
        "by": "Ann Label <ann@example.org>",
        "note": "two different mechanisms",
    }
    assert record["at"].endswith("+00:00") and record["commit"]  # UTC; the decision's commit
    body = git(corpus_repo.root, "log", "-1", "--format=%B")
    trailers = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=body, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert f"Knomit-Label: {vid} no" in trailers and "Knomit-Labeller: Ann Label <ann@example.org>" in trailers
    assert not any(t.startswith("Knomit-Verdict") for t in trailers)  # a label applies nothing
    # the user's staged file stays staged, outside the commit
    assert corpus_repo.status() == "A  notes.txt\n"

    # a no on an applied decision offers the exact revert command and does not run it
    assert "motifs: [penalty-blocks-own-recovery]" in corpus_repo.read("facts/ops/f3.md")
    offered = next(line for line in out.output.splitlines() if "to undo it: " in line).split("to undo it: ")[1]
    assert offered == (f"knomit-judge revert {vid} {corpus_repo.root} --reason 'labelled no: two different mechanisms'")
    git(corpus_repo.root, "reset", "-q", "notes.txt")
    (corpus_repo.root / "notes.txt").unlink()
    done = run(*shlex.split(offered)[1:])
    assert done.exit_code == 0, done.output
    assert "self-locking-penalty" in corpus_repo.read("facts/ops/f3.md")


def test_labels_from_a_file_are_one_commit_and_a_bad_line_writes_nothing(corpus_repo, tmp_path):
    vid = reviewed(corpus_repo, tmp_path)
    noes = [
        v["id"]
        for v in json.loads(run("verdicts", corpus_repo.root, "--pass", "alias", "--json").stdout)["verdicts"]
        if not v["commit_sha"]
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"verdict": vid, "label": True}) + "\n" + json.dumps({"verdict": vid, "label": "maybe"}) + "\n",
        encoding="utf-8",
    )
    before = tree_digest(corpus_repo.root)
    out = run("label", "--file", bad, corpus_repo.root)
    assert out.exit_code == 2 and "bad.jsonl:2: 'label' must be yes or no" in out.output
    out = run("label", "v000000000000", "yes", corpus_repo.root)
    assert out.exit_code == 2 and "no verdict 'v000000000000'" in out.output
    assert run("label", vid, "maybe", corpus_repo.root).exit_code == 2
    assert tree_digest(corpus_repo.root) == before and not (corpus_repo.root / LABELS_FILE).exists()

    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"verdict": vid, "label": True})
        + "\n"
        + json.dumps({"verdict": noes[0], "label": "no", "note": "right, different"})
        + "\n",
        encoding="utf-8",
    )
    out = run("label", "--file", good, corpus_repo.root, "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["revert"] == [] and [r["label"] for r in result["labels"]] == ["yes", "no"]
    assert git(corpus_repo.root, "show", "--name-only", "--format=%s", "HEAD").split() == [
        "label:",
        "2",
        "labels",
        "from",
        "good.jsonl",
        LABELS_FILE,
    ]
    assert len((corpus_repo.root / LABELS_FILE).read_text().splitlines()) == 2

    # calibrate scores the stored verdicts against these labels: no labels file, no judge call
    cal = json.loads(run("calibrate", "--journal", corpus_repo.root, "--json").stdout)
    assert cal["passes"]["alias"]["n"] == 2 and cal["passes"]["alias"]["agreement"] == 1.0
    assert cal["passes"]["alias"]["precision"] == 1.0 and cal["passes"]["alias"]["judge_calls"] == 0
    status = json.loads(run("status", corpus_repo.root, "--json").stdout)["precision"]["alias"]
    # only the yes verdict counts
    assert status["text"] == "precision 1.00 [0.21, 1.00] from 1 label"


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.text, self.svgs, self._svg = [], [], False

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def test_report_lists_the_inbox_and_the_precision_history(corpus_repo, tmp_path):
    vid = reviewed(corpus_repo, tmp_path)
    page = Page()
    page.feed(render(corpus_repo.root))
    shown = " ".join(page.text)
    assert "Inbox: what needs a look" in shown and vid in shown and f"knomit-judge label {vid} yes|no" in shown
    assert "No labels yet, so every pass applies its decisions." in shown
    assert run("label", vid, "no", corpus_repo.root).exit_code == 0
    page = Page()
    page.feed(render(corpus_repo.root))
    shown = " ".join(page.text)
    assert "Nothing waits for a label." in shown
    assert "precision 0.00 [0.00, 0.79] from 1 label" in shown
    chart = next(s for s in page.svgs if s.get("aria-label") == "precision history of alias")
    # fits a 1024 px window with the page's margins
    assert int(chart["width"]) <= 1024 - 64


def test_calibration_keys_are_checked_by_name():
    assert parse_config({"calibration": {"sample_rate": 0.25}}).calibration.sample_rate == 0.25
    for raw, named in (({"min_precision": 1.5}, "calibration.min_precision"), ({"rate": 1}, "calibration.rate")):
        with pytest.raises(ConfigError, match=named):
            parse_config({"calibration": raw})


def test_a_label_whose_commit_fails_leaves_no_line_behind(corpus_repo, tmp_path):
    vid = reviewed(corpus_repo, tmp_path)
    hook = corpus_repo.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'refused by policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = git(corpus_repo.root, "rev-parse", "HEAD")
    out = run("label", vid, "yes", corpus_repo.root)
    assert out.exit_code == 2 and "refused by policy" in out.output and "rolled back" in out.output
    assert git(corpus_repo.root, "rev-parse", "HEAD") == head
    # the intent cut the journal back
    assert not (corpus_repo.root / LABELS_FILE).exists()
    assert json.loads(run("status", corpus_repo.root, "--json").stdout)["precision"]["alias"]["labels"] == 0
    hook.unlink()
    assert run("label", vid, "yes", corpus_repo.root).exit_code == 0
    assert len((corpus_repo.root / LABELS_FILE).read_text().splitlines()) == 1
