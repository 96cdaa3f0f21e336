"""The embedlab command line: embed texts, compare two texts, list methods, evaluate, explain and more.

Each command group is one module with an ``add_cli(subparsers)`` function; :data:`COMMAND_GROUPS`
lists them, in the order ``embedlab --help`` shows their commands. A new group is one module plus one
entry there.
"""

from __future__ import annotations

import argparse
import os
import sys

from embedlab import __version__
from embedlab.cli import alignsim, embed, evaluate, matching, methods, neural

COMMAND_GROUPS = (embed, methods, evaluate, neural, matching, alignsim)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedlab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"embedlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_cli(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; expected failures (bad input, spec, data) print one line and return 2."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # embedlab never downloads
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, TypeError, LookupError, FileNotFoundError) as error:
        print(f"embedlab {args.command}: error: {error}", file=sys.stderr)
        return 2
