"""Prompts are versioned files in prompts/; evidence goes in as quoted data, never as instructions.

The package ships prompts/ as knomit_judge/data/prompts (a symlink in the clone, files in the wheel), read
through importlib.resources, so an installed copy reads its own prompts wherever it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from .errors import MissingResource
from .jsonl import dumps

PROMPTS_DIR = resources.files("knomit_judge") / "data" / "prompts"
_USER_MARK = "\n=== user ===\n"


@dataclass(frozen=True)
class Prompt:
    """One versioned prompt: its system text, its user template, and the reply contract."""

    name: str
    version: int
    system: str
    template: str
    reply_schema: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self) -> str:
        """name@version: what a verdict and a cached reply record as their prompt."""
        return f"{self.name}@{self.version}"

    @property
    def tool(self) -> dict[str, Any]:
        """The one tool the real API is forced to call: its input schema is the pass's reply contract."""
        return {
            "name": f"{self.name}_reply",
            "description": f"Record your answer to the {self.name} question.",
            "input_schema": self.reply_schema,
        }

    def render(self, evidence: object) -> str:
        """The user turn: the template with the evidence quoted in."""
        return self.template.replace("{{evidence}}", quote(evidence))


def cut(body: str, limit: int) -> str:
    """A fact body of at most `limit` characters, with a visible marker saying how much was left out.

    The cut is part of the prompt (hence of the reply-cache key), so no fact can make a prompt too long.
    """
    shown = kept(body, limit)
    return body if shown == body else shown + "\n" + MARKER.format(len(body) - len(shown))


MARKER = "[… {} characters not shown]"


def kept(body: str, limit: int) -> str:
    """The part of a body cut() shows, without its marker (whose count moves with any edit further down)."""
    if len(body) <= limit:
        return body
    return body[: max(0, limit - len(MARKER.format(len(body))) - 1)]


def quote(evidence: object) -> str:
    """Evidence as a JSON document between <evidence> tags.

    '<' and '>' are escaped inside the JSON, so no fact text can close the
    block or open a tag of its own: the delimiter cannot be forged from inside.
    """
    data = dumps(evidence, indent=2, ensure_ascii=False)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<evidence>\n{data}\n</evidence>"


@cache
def load_prompt(name: str, directory: Traversable = PROMPTS_DIR) -> Prompt:
    """The prompt `name`.md; a missing or malformed file is a broken install, said as such (exit 2)."""
    try:
        text = (directory / f"{name}.md").read_text(encoding="utf-8")
    except OSError:
        raise MissingResource(f"prompt {name}.md not found in the installed package ({directory})") from None
    try:
        _, front, rest = text.split("---\n", 2)
        meta = yaml.safe_load(front)
        system, template = rest.split(_USER_MARK, 1)
        return Prompt(
            name=meta["name"],
            version=int(meta["version"]),
            system=system.strip(),
            template=template.strip(),
            reply_schema=meta.get("reply_schema") or {},
        )
    except (ValueError, TypeError, KeyError, yaml.YAMLError):
        raise MissingResource(
            f"prompt {name}.md in the installed package ({directory}) is incomplete: it needs a "
            f"front matter with name and version, then the system text, {_USER_MARK.strip()!r} "
            "and the template"
        ) from None


def prompt_names(directory: Traversable = PROMPTS_DIR) -> list[str]:
    """Every prompt the package ships, by name (the files in prompts/)."""
    if not directory.is_dir():
        raise MissingResource(f"prompts not found in the installed package ({directory})")
    return sorted(f.name.removesuffix(".md") for f in directory.iterdir() if f.name.endswith(".md"))
