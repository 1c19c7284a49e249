"""Prompts are versioned files in prompts/; evidence goes in as quoted data, never as instructions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
_USER_MARK = "\n=== user ===\n"


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: str
    template: str

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, evidence) -> str:
        return self.template.replace("{{evidence}}", quote(evidence))


def quote(evidence) -> str:
    """Evidence as a JSON document between <evidence> tags.

    '<' and '>' are escaped inside the JSON, so no fact text can close the
    block or open a tag of its own: the delimiter cannot be forged from inside.
    """
    data = json.dumps(evidence, indent=2, ensure_ascii=False)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<evidence>\n{data}\n</evidence>"


@cache
def load_prompt(name: str, directory: Path = PROMPTS_DIR) -> Prompt:
    text = (directory / f"{name}.md").read_text(encoding="utf-8")
    _, front, rest = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    system, template = rest.split(_USER_MARK, 1)
    return Prompt(name=meta["name"], version=int(meta["version"]), system=system.strip(), template=template.strip())
