"""Argument types shared by the commands: numbers checked when the command line is read.

A batch size of 0, a negative seed or a NaN learning rate would otherwise fail deep inside numpy or
torch (or divide by zero); as argparse types they give the usual one-line usage error and exit status 2.
"""

from __future__ import annotations

import argparse
import math


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _finite(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return number


def _at_least(number: float, text: str, minimum: int) -> float:
    if number < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative" if minimum == 0 else f"{text!r} must be at least {minimum}")
    return number


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (batch sizes, counts of items to draw, steps)."""
    return _at_least(_integer(text), text, 1)


def non_negative_int(text: str) -> int:
    """A whole number ≥ 0 (seeds, epochs)."""
    return _at_least(_integer(text), text, 0)


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates)."""
    number = _finite(text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return number


def non_negative_float(text: str) -> float:
    """A finite number ≥ 0 (weight decay)."""
    return _at_least(_finite(text), text, 0)
