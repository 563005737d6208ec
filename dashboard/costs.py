"""What tokens cost, by the price table in settings (``SESSIONHUB["PRICES"]``): USD per
million tokens of input, output, cache reads and cache writes, by model name prefix."""

from __future__ import annotations

from django.conf import settings

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


def prices_of(model: str) -> list[float] | None:
    """The prices of a model: the table's longest prefix of its name (``claude-opus-4-1``
    takes ``claude-opus-4``'s); None when the table does not know it."""
    name = model.lower().strip()
    if "/" in name:  # "anthropic/claude-sonnet-4-5" as a router names it
        name = name.rsplit("/", 1)[-1]
    best = ""
    for prefix in settings.SESSIONHUB["PRICES"]:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return settings.SESSIONHUB["PRICES"][best] if best else None


def cost(model: str, input: int, output: int, cache_read: int, cache_write: int) -> float | None:
    """USD for these tokens of this model; None for a model with no price."""
    prices = prices_of(model)
    if prices is None:
        return None
    counts = (input, output, cache_read, cache_write)
    return sum(n * p for n, p in zip(counts, prices, strict=True)) / 1_000_000
