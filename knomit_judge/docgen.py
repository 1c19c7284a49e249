"""Write the generated blocks of docs/cli.md and docs/configuration.md from the code, so they cannot drift.

    python -m knomit_judge.docgen           rewrite the blocks in place (make docs)
    python -m knomit_judge.docgen --check   change nothing; exit 1 naming every block that differs

A generated block sits between `<!-- docgen: NAME -->` and `<!-- /docgen -->`; everything outside the
blocks is written by hand and kept as it is. Blocks: `help` (the top-level --help) and `help COMMAND`
in docs/cli.md; `config SECTION` (one table per knomit-judge.toml section) and `prices` in
docs/configuration.md. A command or a section with no block yet gets one appended, so a new command,
flag, section or key shows up the next time this runs.

The "why" of every key is prose, so it lives in docs/configuration.md itself, in the comment that
starts `<!-- docgen-why`: one entry per key, `section.key: text`, continuation lines indented. A key
with no entry, or an entry naming no key, fails --check (and tests/test_docs.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from click.testing import CliRunner

from .cli import cli
from .config import DEFAULT_PRICES, WORDS, Config, Price, value_range

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DOCS = Path(__file__).resolve().parent.parent / "docs"
# the help is rendered at a fixed width, so the docs do not depend on the terminal that ran this
WIDTH = 80
BLOCK = re.compile(r"<!-- docgen: (?P<name>[^>]+?) -->\n(?P<body>.*?)<!-- /docgen -->", re.S)
WHY_START = "<!-- docgen-why"
WHY_ENTRY = re.compile(r"^(?P<key>[a-z_]+\.[a-z_]+):\s*(?P<text>.*)$")
MISSING_WHY = "**no why yet**: add one to the `docgen-why` comment at the end of this file"


def command_help(name: str | None) -> str:
    """What `knomit-judge [NAME] --help` prints."""
    args = [name, "--help"] if name else ["--help"]
    result = CliRunner().invoke(cli, args, prog_name="knomit-judge", terminal_width=WIDTH)
    if result.exit_code != 0:
        raise RuntimeError(f"knomit-judge {' '.join(args)} exited {result.exit_code}: {result.output}")
    return result.output


def config_sections() -> dict[str, type[DataclassInstance]]:
    """Each knomit-judge.toml section (but prices) and its dataclass, in Config's order (`ignored` is no section)."""
    defaults = Config()
    return {
        f.name: type(getattr(defaults, f.name))
        for f in dataclasses.fields(Config)
        if f.name != "prices" and dataclasses.is_dataclass(getattr(defaults, f.name))
    }


def config_keys() -> list[str]:
    """Every key a why is owed for: `section.key`, prices' keys as `prices.key`."""
    keys = [f"{s}.{f.name}" for s, cls in config_sections().items() for f in dataclasses.fields(cls)]
    return keys + [f"prices.{f.name}" for f in dataclasses.fields(Price)]


def read_whys(text: str) -> dict[str, str]:
    """The `section.key: text` entries of the docgen-why comment."""
    start = text.find(WHY_START)
    if start < 0:
        return {}
    body = text[start + len(WHY_START) : text.index("-->", start)]
    whys: dict[str, str] = {}
    key = None
    for line in body.splitlines():
        match = WHY_ENTRY.match(line)
        if match:
            key = match["key"]
            whys[key] = match["text"].strip()
        elif key and line.strip():
            whys[key] = f"{whys[key]} {line.strip()}".strip()
    return whys


def toml_value(value: object) -> str:
    """A default as knomit-judge.toml writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"`{toml_value(f.default)}`"
    if f.default_factory is not dataclasses.MISSING:
        return f"`{toml_value(f.default_factory())}`"
    return "required"


def type_name(f: dataclasses.Field[Any]) -> str:
    """config.py's annotations are strings (postponed); a dataclass made elsewhere may hold the type itself."""
    if isinstance(f.type, str):
        # a key of a few words (ApplyMode) is a string in the file
        return "str" if f.type in WORDS else f.type
    return getattr(f.type, "__name__", str(f.type))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_table(section: str, cls: type[DataclassInstance], whys: dict[str, str], prefix: str | None = None) -> str:
    """One section's keys as a Markdown table: key, type, default, range (of a number), and why."""
    rows = ["| key | type | default | range | why |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(cls):
        key = f"{prefix or section}.{f.name}"
        limits = value_range(f'prices."MODEL".{f.name}' if section == "prices" else key)
        rows.append(f"| `{f.name}` | {type_name(f)} | {_default(f)} | {limits} | {_cell(whys.get(key, MISSING_WHY))} |")
    return "\n".join(rows) + "\n"


def prices_block(whys: dict[str, str]) -> str:
    """The [prices."MODEL"] keys, and the prices shipped."""
    shipped = ["| model | input_per_mtok | output_per_mtok |", "|---|---|---|"]
    shipped += [f"| `{model}` | {p.input_per_mtok} | {p.output_per_mtok} |" for model, p in DEFAULT_PRICES.items()]
    return (
        config_table("prices", Price, whys)
        + "\nShipped prices (USD per million tokens):\n\n"
        + "\n".join(shipped)
        + "\n"
    )


def render(name: str, whys: dict[str, str]) -> str:
    """The body of the block called NAME."""
    kind, _, arg = name.partition(" ")
    if kind == "help":
        if arg and arg not in cli.commands:
            raise KeyError(f"help {arg}: no such command")
        return "```text\n" + command_help(arg or None) + "```\n"
    if kind == "config":
        sections = config_sections()
        if arg not in sections:
            raise KeyError(f"config {arg}: no such section")
        return config_table(arg, sections[arg], whys)
    if kind == "prices":
        return prices_block(whys)
    raise KeyError(f"{name}: unknown block")


def _block(name: str, body: str) -> str:
    return f"<!-- docgen: {name} -->\n{body}<!-- /docgen -->"


def regenerate(text: str, wanted: list[tuple[str, str]]) -> str:
    """TEXT with every block rewritten, and a block appended under its heading for each wanted one it lacks."""
    whys = read_whys(text)
    out = BLOCK.sub(lambda m: _block(m["name"], render(m["name"], whys)), text)
    have = {m["name"] for m in BLOCK.finditer(text)}
    missing = [f"{heading}\n\n{_block(name, render(name, whys))}\n" for name, heading in wanted if name not in have]
    if missing:
        # before the why comment, so it stays the last thing in the file
        cut = out.find(WHY_START)
        head, tail = (out, "") if cut < 0 else (out[:cut], out[cut:])
        out = head.rstrip("\n") + "\n\n" + "\n".join(missing) + ("\n" + tail if tail else "")
    return out


def cli_blocks() -> list[tuple[str, str]]:
    """docs/cli.md's blocks, (name, heading): the top-level help, then each command's."""
    return [
        ("help", "### knomit-judge"),
        *((f"help {name}", f"### knomit-judge {name}") for name in sorted(cli.commands)),
    ]


def config_blocks() -> list[tuple[str, str]]:
    """docs/configuration.md's blocks, (name, heading): a table per section, then prices."""
    return [*((f"config {s}", f"## [{s}]") for s in config_sections()), ("prices", '## [prices."MODEL"]')]


def files(docs: Path = DOCS) -> dict[Path, list[tuple[str, str]]]:
    """Each generated doc and the blocks it holds."""
    return {docs / "cli.md": cli_blocks(), docs / "configuration.md": config_blocks()}


def problems(docs: Path = DOCS) -> list[str]:
    """What --check reports: blocks that differ from the code, keys without a why, whys without a key."""
    found = []
    for path, wanted in files(docs).items():
        text = path.read_text(encoding="utf-8")
        if regenerate(text, wanted) != text:
            differ = [m["name"] for m in BLOCK.finditer(text) if m["body"] != render(m["name"], read_whys(text))]
            have = {m["name"] for m in BLOCK.finditer(text)}
            differ += [f"{name} (no block)" for name, _ in wanted if name not in have]
            found.append(f"{path.name}: generated block(s) out of date: {', '.join(differ)}; run `make docs`")
    whys = read_whys((docs / "configuration.md").read_text(encoding="utf-8"))
    keys = config_keys()
    found += [f"configuration.md: {key} has no why" for key in keys if not whys.get(key)]
    found += [f"configuration.md: why for {key}, which is no config key" for key in whys if key not in keys]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knomit_judge.docgen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the docs differ")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs directory (default: the clone's)")
    args = parser.parse_args(argv)
    if not args.check:
        for path, wanted in files(args.docs).items():
            text = path.read_text(encoding="utf-8")
            new = regenerate(text, wanted)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"rewrote {path}", file=sys.stderr)
    found = problems(args.docs)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
