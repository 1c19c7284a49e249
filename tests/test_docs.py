"""Every command has --help text with an example and appears in the README; the README's first screen."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from knomit_judge.cli import cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_with_example_and_is_in_readme(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert f"knomit-judge {name}" in README


def test_readme_first_screen_shows_demo_and_test():
    first_screen = "\n".join(README.splitlines()[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def test_every_config_key_is_documented():
    from dataclasses import fields
    from knomit_judge.config import Config
    for section in fields(Config):
        if section.name == "prices":
            continue
        for key in fields(section.default_factory()):
            assert f"`{section.name}.{key.name}`" in README, f"{section.name}.{key.name} not in README"
