"""The registry of judged passes, by name, in the order a session runs them."""

from __future__ import annotations

from .alias import AliasPass
from .base import Pass
from .discovery import DiscoveryPass
from .prune import PrunePass


def all_passes() -> dict[str, Pass]:
    """Every judged pass, fresh, by name in run order; typed Pass so mypy checks each one keeps the contract."""
    return {"alias": AliasPass(), "prune": PrunePass(), "discovery": DiscoveryPass()}
