"""The models' list prices (USD per million tokens, overridable with [prices."MODEL"]) and the models retired."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Price:
    input_per_mtok: float
    output_per_mtok: float
    # Message Batches bill this share less than the same calls made one by one
    batch_discount: float = 0.5
    # A prompt-size tier (Haiku 5.5's): a prompt of more than tier_tokens input tokens bills the whole call at
    # the *_above prices. 0 = one price whatever the prompt's size.
    tier_tokens: int = 0
    input_per_mtok_above: float = 0.0
    output_per_mtok_above: float = 0.0

    def usd(self, tokens_in: float, tokens_out: float) -> float:
        """What a call of these token counts costs, one by one (a batch takes batch_discount off).

        tokens_out is the output as the API reports it, thinking included: thinking is billed as output.
        """
        above = bool(self.tier_tokens) and tokens_in > self.tier_tokens
        rate_in = self.input_per_mtok_above if above else self.input_per_mtok
        rate_out = self.output_per_mtok_above if above else self.output_per_mtok
        return tokens_in * rate_in / 1e6 + tokens_out * rate_out / 1e6


# List prices in USD per million tokens, input / output, read from the model pages on platform.claude.com on
# 2026-12-05 (docs/real-api.md); overridable with [prices."MODEL"]. Batch: 50% off on every model listed.
# Only models that can be called today: a retired model (claude-sonnet-4-5 since 2026-11-30, and the 4.1 and
# earlier generations) has no price, so no session plans to pay it.
DEFAULT_PRICES = {
    "claude-haiku-5-5": Price(0.10, 0.50, tier_tokens=100_000, input_per_mtok_above=0.50, output_per_mtok_above=2.50),
    "claude-sonnet-5-5": Price(2.0, 10.0),
    "claude-opus-5-5": Price(4.0, 20.0),
    "claude-fable-5-1": Price(10.0, 50.0),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
}


# Models retired, with the day where it is known and the current model of their line: what a plan names them by
# when no Models API can be asked (a dry run without a key), instead of "no price". An exact id or a dated one
# (claude-sonnet-4-5-20250929) matches, never a longer family name (claude-opus-4 is not claude-opus-4-5).
RETIRED_MODELS = {
    "claude-sonnet-4-5": ("2026-11-30", "claude-sonnet-5-5"),
    "claude-opus-4-1": (None, "claude-opus-5-5"),
    "claude-opus-4": (None, "claude-opus-5-5"),
    "claude-sonnet-4": (None, "claude-sonnet-5-5"),
    "claude-3-7-sonnet": (None, "claude-sonnet-5-5"),
    "claude-3-5-sonnet": (None, "claude-sonnet-5-5"),
    "claude-3-5-haiku": (None, "claude-haiku-5-5"),
    "claude-3-opus": (None, "claude-opus-5-5"),
    "claude-3-haiku": (None, "claude-haiku-5-5"),
}


def retired_model(model: str) -> str | None:
    """How a retired model is named from RETIRED_MODELS ("retired (since ...); ..."), or None."""
    name = next((n for n in RETIRED_MODELS if model == n or re.fullmatch(re.escape(n) + r"-\d{8}", model)), None)
    if name is None:
        return None
    day, current = RETIRED_MODELS[name]
    return (
        f"retired{f' (since {day})' if day else ''}: no request naming it can succeed; "
        f"its line's current model is {current!r}"
    )
