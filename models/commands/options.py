"""argparse types that reject nonsensical numbers with a one-line message."""

from __future__ import annotations

import argparse


def _number(kind, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _number(int, text, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    value = _number(int, text, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text, "a number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    value = _number(float, text, "a number")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def probability(text: str) -> float:
    value = _number(float, text, "a number")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text}")
    return value
