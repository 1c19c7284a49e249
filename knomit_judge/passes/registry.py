"""The registry of judged passes, by name, in the order a session runs them."""

from __future__ import annotations

from .alias import AliasPass
from .discovery import DiscoveryPass
from .prune import PrunePass


def all_passes():
    return {"alias": AliasPass(), "prune": PrunePass(), "discovery": DiscoveryPass()}
