"""Argument types shared by the commands: numbers checked when the command line is read.

A batch size of 0, a negative seed or a NaN learning rate would otherwise fail deep inside numpy or
torch (or divide by zero); as argparse types they give the usual one-line usage error and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TypeVar

from embedlab.results.formats import FORMATS

T = TypeVar("T")


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


def seed_int(text: str) -> int:
    """A seed: a whole number 0 … 2⁶³ − 1 (it is stored with every result, in SQLite's 64-bit integer)."""
    seed = non_negative_int(text)
    if seed > 2 ** 63 - 1:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is too large for a seed (at most 2**63 - 1, what the results database stores)")
    return seed


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates)."""
    number = _finite(text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return number


def non_negative_float(text: str) -> float:
    """A finite number ≥ 0 (weight decay)."""
    return _at_least(_finite(text), text, 0)


# ---- options every command shares: one name, one meaning, one help text -------------------------------

FORMAT_HELP = "how to print the results: table (aligned text), markdown, json (one object per line) or csv"


def add_format(parser: argparse.ArgumentParser, default: str = "table") -> None:
    """``--format table|markdown|json|csv`` (printed through :func:`embedlab.results.tables.render`)."""
    parser.add_argument("--format", choices=FORMATS, default=default, help=f"{FORMAT_HELP} (default {default})")


def add_out(parser: argparse.ArgumentParser, *old_names: str, help: str, **options) -> None:
    """``--out`` for whatever a command writes; ``old_names`` (e.g. ``--output``) still work but are not shown."""
    parser.add_argument("--out", help=help, **options)
    for name in old_names:
        parser.add_argument(name, dest="out", help=argparse.SUPPRESS, **{k: v for k, v in options.items() if k == "type"})


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap B``: resamples of every record's 95 % confidence interval (0: none)."""
    parser.add_argument("--bootstrap", type=non_negative_int, default=None, metavar="B",
                        help="bootstrap resamples of each record's 95%% confidence interval, drawn from --seed "
                             "(default 1000, or $EMBEDLAB_BOOTSTRAP; 0 turns intervals off)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars or status lines on stderr. The older ``--no-progress`` means the same;
    ``--progress`` forces bars even when stderr is not a terminal (e.g. logged to a file).

    Every command gets these once (``embedlab.cli.app`` adds them to every command); an option a command
    already defines itself is left as it is."""
    taken = {option for action in parser._actions for option in action.option_strings}
    if "--quiet" not in taken:
        parser.add_argument("--quiet", "-q", action="store_true",
                            help="no progress bars or status lines on stderr (results still go to stdout)")
    if "--no-progress" not in taken:
        parser.add_argument("--no-progress", dest="quiet", action="store_true", help=argparse.SUPPRESS)
    if "--progress" not in taken:
        parser.add_argument("--progress", dest="force_progress", action="store_true",
                            help="show progress bars even when stderr is not a terminal")


def progress_mode(args: argparse.Namespace) -> str:
    """The :func:`embedlab.runtime.progress.set_progress` mode the parsed options ask for."""
    if getattr(args, "quiet", False):
        return "quiet"
    return "always" if getattr(args, "force_progress", False) else "auto"


# ---- the training commands' settings: each option stated once, as a field of the command's config ----------

@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """One command-line option of a training config: ``--flag`` sets the config's ``field``."""

    flag: str
    field: str
    type: Callable[[str], object]
    help: str
    show_default: bool = True  # "(default N)" after the help


def add_config_options(parser: argparse.ArgumentParser, defaults: object, options: Sequence[ConfigOption]) -> None:
    """One argument per option, its default the config's own (``defaults``: the config with every default)."""
    for option in options:
        default = getattr(defaults, option.field)
        shown = f" (default {default})" if option.show_default else ""
        parser.add_argument(option.flag, dest=option.field, type=option.type, default=default, help=option.help + shown)


def config_from_arguments(config_type: Callable[..., T], args: argparse.Namespace, options: Sequence[ConfigOption]) -> T:
    """The config a command's parsed arguments name: its model and every option's field."""
    return config_type(model=args.model, **{option.field: getattr(args, option.field) for option in options})


def reproducing_arguments(config: object, defaults: object, options: Sequence[ConfigOption]) -> list[str]:
    """The model plus every option that differs from the defaults: the arguments that reproduce ``config``."""
    parts = [getattr(config, "model")]
    for option in options:
        if getattr(config, option.field) != getattr(defaults, option.field):
            parts += [option.flag, str(getattr(config, option.field))]
    return parts
