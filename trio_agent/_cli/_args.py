"""The argparse types the commands share: a usage error for a bad value."""

from __future__ import annotations

import argparse

__all__ = ["positive_float", "positive_int"]


def positive_int(text: str) -> int:
    """An argparse type: an integer > 0 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (a usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return value
