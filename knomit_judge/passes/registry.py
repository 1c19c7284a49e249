"""The registry of judged passes, by name, in the order a session runs them; and every step of a session."""

from __future__ import annotations

from .alias import AliasPass
from .base import DESCRIBE, DescribeStep, Pass, Step
from .discovery import DiscoveryPass
from .exact import DuplicateGroups
from .prune import PrunePass


def all_passes() -> dict[str, Pass]:
    """Every judged pass, fresh, by name in run order; typed Pass so mypy checks each one keeps the contract."""
    return {"alias": AliasPass(), "prune": PrunePass(), "discovery": DiscoveryPass()}


def answered() -> list[Pass | DescribeStep]:
    """What a judge answers: the judged passes, then the describe step (the scripted judge's entries)."""
    return [*all_passes().values(), DescribeStep()]


def steps() -> dict[str, Step]:
    """Every step a session may record a result of, by name: exact duplicates, the judged passes, the describe step
    (a stored result is read back by its step's abilities, never by its name)."""
    return {"exact": DuplicateGroups(), **all_passes(), DESCRIBE: DescribeStep()}
