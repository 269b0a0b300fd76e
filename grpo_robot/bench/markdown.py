"""The pieces of the Markdown tables the benchmarks and reports print."""

from __future__ import annotations


def row(*cells: object) -> str:
    """`| a | b |`."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def rate_interval(rate: float, interval: tuple[float, float], decimals: int = 0) -> str:
    """A success rate and its interval, `72% [65%, 78%]`, in percent with `decimals` decimals."""
    low, high = interval
    return f"{rate:.{decimals}%} [{low:.{decimals}%}, {high:.{decimals}%}]"
