"""Every command has --help text with an example and appears in the README; the README's first screen;
the generated parts of docs/ (every --help, every config key and default) agree with the code."""

import dataclasses
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from knomit_judge import docgen
from knomit_judge.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_with_example_and_is_in_readme(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert f"knomit-judge {name}" in README


def test_readme_first_screen_shows_demo_and_test():
    first_screen = "\n".join(README.splitlines()[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_readme_is_short():
    assert len(README.splitlines()) <= 250


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_links_between_the_pages_resolve(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    # a link written in inline code (docs/corpus.md's link forms) is no link
    text = re.sub(r"`[^`\n]+`", "", text)
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
        if "://" in target:
            continue
        path = (page.parent / target) if target else page
        assert path.exists(), f"{page.name}: {target}"
        if anchor:
            assert anchor in _anchors(path), f"{page.name}: {target}#{anchor}"


def test_generated_docs_agree_with_the_code():
    """docs/cli.md and docs/configuration.md as `make docs` would write them; every key has a why."""
    assert docgen.problems() == []


@pytest.mark.parametrize("name", [None, *sorted(cli.commands)])
def test_docs_show_each_commands_help_as_it_prints(name):
    result = CliRunner().invoke(
        cli, [name, "--help"] if name else ["--help"], prog_name="knomit-judge", terminal_width=docgen.WIDTH
    )
    assert result.exit_code == 0
    assert result.output in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_every_config_key_and_default_is_documented():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for section, cls in docgen.config_sections().items():
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assert f"| `{f.name}` | {docgen.type_name(f)} | `{docgen.toml_value(default)}` |" in text, (
                f"{section}.{f.name}"
            )


@pytest.fixture
def docs_copy(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("_pending"))
    return tmp_path / "docs"


def test_a_key_without_a_why_or_a_why_without_a_key_is_flagged(docs_copy):
    path = docs_copy / "configuration.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        re.sub(r"\nbudget\.window:.*\n(  .*\n)*", "\n", text).replace(
            "\n-->", "\nbudget.no_such_key: a why for nothing\n-->"
        ),
        encoding="utf-8",
    )
    found = docgen.problems(docs_copy)
    assert "configuration.md: budget.window has no why" in found
    assert "configuration.md: why for budget.no_such_key, which is no config key" in found


def test_make_docs_picks_up_a_new_key_a_new_section_and_a_new_command(docs_copy, monkeypatch):
    # keys no Config has (budget.max_usd_per_day and [metrics] were this example until they were added)
    @dataclasses.dataclass
    class Alerts:
        webhook: str = ""

    @dataclasses.dataclass
    class Budget(type(docgen.Config().budget)):
        max_usd_per_week: float = 0.0

    sections = {**docgen.config_sections(), "budget": Budget, "alerts": Alerts}
    monkeypatch.setattr(docgen, "config_sections", lambda: sections)
    cli_text = (docs_copy / "cli.md").read_text(encoding="utf-8")
    (docs_copy / "cli.md").write_text(
        re.sub(
            r"### knomit-judge status\n\n<!-- docgen: help status -->.*?"
            r"<!-- /docgen -->\n",
            "",
            cli_text,
            flags=re.S,
        ),
        encoding="utf-8",
    )
    assert "cli.md: generated block(s) out of date: help status (no block); run `make docs`" in docgen.problems(
        docs_copy
    )

    # written, but two keys still owe a why
    assert docgen.main(["--docs", str(docs_copy)]) == 1
    config = (docs_copy / "configuration.md").read_text(encoding="utf-8")
    assert "| `max_usd_per_week` | float | `0.0` |  | **no why yet**" in config  # no range: none set
    assert "## [alerts]\n\n<!-- docgen: config alerts -->" in config
    assert config.rstrip().endswith("-->") and config.index("[alerts]") < config.index("<!-- docgen-why")
    assert "### knomit-judge status\n\n<!-- docgen: help status -->\n```text\nUsage: knomit-judge status" in (
        docs_copy / "cli.md"
    ).read_text(encoding="utf-8")
    assert sorted(p for p in docgen.problems(docs_copy)) == [
        "configuration.md: alerts.webhook has no why",
        "configuration.md: budget.max_usd_per_week has no why",
    ]


def test_make_demo_and_test_install_nothing_outside_the_clone_and_venv(tmp_path):
    """`make -n` lists every command the targets would run, from a fresh clone (no .venv yet)."""
    import shutil
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    clone = tmp_path / "clone"
    # not .pytest-tmp: the test's own folder is in it (tests/conftest.py), and the copy would copy itself
    shutil.copytree(repo, clone, ignore=shutil.ignore_patterns(".venv", ".demo", ".git", "__pycache__", ".pytest-tmp"))
    done = subprocess.run(
        ["make", "-n", "demo", "test"],
        cwd=clone,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("DEMO_DIR", "CALIBRATION_DIR")},
    )
    assert done.returncode == 0, done.stderr
    commands = done.stdout.replace(str(clone), "<clone>")
    # the dry run did list the recipes
    assert "pip install" in commands and "pytest" in commands
    for needle in ("apt-get", "apt ", "sudo", "dnf ", "brew ", "$HOME", "~/"):
        assert needle not in commands, needle
    # no absolute path but the clone's: the demo's scratch corpora and report are inside it
    words = [w.strip("\"'").split(":", 1)[-1] for w in commands.split()]
    assert not [w for w in words if w.startswith("/")], commands
    assert "<clone>/.demo/knomit-demo" in commands


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_no_figure_is_given_at_a_retired_models_prices_as_current(page):
    """A price figure "at MODEL prices" (or "at MODEL's $X") names a model that can be called today, or the text
    around it says the figure is of then (a measurement before the model retired)."""
    from knomit_judge.config import retired_model

    for block in page.read_text(encoding="utf-8").split("\n\n"):
        # a table's rows one by one, a paragraph whole
        for row in block.split("\n|"):
            flat = " ".join(row.split())
            for m in re.finditer(r"\b[Aa]t (claude-[a-z0-9-]+?)(?:'s)? (?:prices|\$)", flat):
                near = flat[max(0, m.start() - 250) : m.end() + 150]
                assert not retired_model(m.group(1)) or re.search(r"\b(retired|then|[Bb]efore)\b", near), (
                    f"{page.name}: {near}"
                )


def test_the_readme_says_how_long_make_test_takes():
    """A newcomer who runs the suite knows what to expect of it (measured, on how many cores)."""
    assert re.search(r"\$ make test .*: about \d+ minutes on \d+ cores", README)


def test_the_readme_gives_the_opening_as_the_money_the_shipped_defaults_say():
    """Issue 54: the README said the first session is capped at 20 questions; since the balance counts money
    it opens at budget.opening_usd (250 first reads), and only the scripted judge opens at 20 questions."""
    from knomit_judge.config import SCRIPTED_QUESTIONS, Config

    config = Config()
    # the paragraph as one line, however it is wrapped
    text = " ".join(README.split())
    said = re.search(
        r"`budget\.opening_usd` \(\$([\d.]+): about (\d+) first reads at ([\w.-]+), or (\d+) questions "
        r"read by the judge model alone\).*?each resolution deposits \$([\d.]+).*?The scripted judge "
        r"has no price: its balance counts questions and opens at (\d+)\. A session never spends more "
        r"than `judge\.max_cost_usd` \(\$(\d+)\)",
        text,
    )
    assert said, "the README's paragraph on the opening balance"
    opening, first_reads, first_reader, judge_reads, deposit, scripted, cap = said.groups()
    first, judge = config.question_usd(config.judge.first_reader), config.question_usd(config.judge.model)
    assert float(opening) == config.budget.opening_usd and float(deposit) == config.budget.usd_per_resolution
    assert first_reader == config.judge.first_reader
    assert int(first_reads) == round(config.budget.opening_usd / first)
    assert int(judge_reads) == int(config.budget.opening_usd / judge)
    assert int(scripted) == SCRIPTED_QUESTIONS[0] and float(cap) == config.judge.max_cost_usd
    # nowhere a cap of 20 questions
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        flat = " ".join(page.read_text(encoding="utf-8").split())
        assert not re.search(r"capped \(`optimistic`, 20 questions\)|optimistic cap's 20", flat), page.name
