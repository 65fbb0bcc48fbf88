"""Numbers as every page writes them (the template filters `count` and `seconds`, and the topology's
labels, which are measured before they are drawn)."""

from __future__ import annotations


def count(value: int | float | None) -> str:
    """Thousands separated; a dash when unknown (not yet measured is not zero)."""
    return "—" if value is None else f"{value:,.0f}"


def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
