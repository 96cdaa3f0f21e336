"""The embedlab command line: embed texts, compare two texts, list methods, evaluate, explain and more.

Each command group is one module with an ``add_cli(subparsers)`` function; :data:`COMMAND_GROUPS`
lists them, in the order ``embedlab --help`` shows their commands. A new group is one module plus one
entry there.

Every failure ends as one line ``embedlab COMMAND: error: ...`` on stderr and an exit status that says
whose fault it was (see :func:`main`); ``EMBEDLAB_DEBUG=1`` lets the traceback through instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sqlite3
import sys
import threading
import warnings

from embedlab.cli import alignsim, arguments, cache, choose, compare, embed, evaluate, matching, methods, neural, reproduce, serve, static
from embedlab.errors import InputError
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.progress import set_progress
from embedlab.runtime.settings import debug_requested, forbid_downloads
from embedlab.version import __version__

COMMAND_GROUPS = (embed, methods, evaluate, compare, choose, neural, matching, alignsim, reproduce, static, serve, cache)

USAGE_ERROR = 2  # bad arguments or input (embedlab's InputError): the user can fix the command line or the file
RUNTIME_ERROR = 1  # the command was fine but the machine was not (disk full, no permission, damaged database), or a bug
INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
# A path that names nothing, or the wrong kind of thing, is a mistake in the command line, not a fault.
_USAGE_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedlab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"embedlab {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for group in COMMAND_GROUPS:
        group.add_cli(subparsers)
    for command in leaf_parsers(parser):
        arguments.add_quiet(command)  # every command has --quiet, also one whose group does not add it
    return parser


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser that runs a command (``mlm-head train``, not ``mlm-head``), in registration order."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        return [parser]
    return [leaf for group in groups for child in dict.fromkeys(group.choices.values()) for leaf in leaf_parsers(child)]


def describe(error: BaseException) -> str:
    """One line for an error: an OSError as "reason: file" (not "[Errno 28] ..."), others as their message."""
    if isinstance(error, OSError) and error.strerror:
        files = [str(name) for name in (error.filename, error.filename2) if name is not None]
        return f"{error.strerror}: {' -> '.join(files)}" if files else error.strerror
    if isinstance(error, sqlite3.Error):
        return f"results database: {error}"
    message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)  # KeyError quotes its text
    return " ".join(message.split()) or type(error).__name__


def exit_status(error: BaseException) -> int:
    """2 for a usage or input error (:class:`~embedlab.errors.InputError`, where embedlab judged the input, or
    a path that names nothing), 1 for a runtime fault or a bug (any other exception, an internal ``KeyError``
    or ``ValueError`` included), 130 for Ctrl-C."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(error, (*_USAGE_OS_ERRORS, InputError)):
        return USAGE_ERROR
    return RUNTIME_ERROR


def _one_line_warning(command: str):
    """A ``warnings.showwarning`` that prints a warning (a damaged cache entry recomputed, a NaN metric
    not stored) as one line, without the source line Python would print under it."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"embedlab {command}: warning: {' '.join(str(message).split())}", file=file or sys.stderr)

    return show


def _interrupt(signum: int, frame) -> None:
    """SIGINT: raise KeyboardInterrupt, unless the interrupted code is a finalizer (``__del__``).

    Python prints and drops an exception raised in a finalizer ("Exception ignored in ... __del__"), so a
    Ctrl-C landing while the garbage collector runs one (the ``regex`` module's, during tokenisation) was
    lost and the run went on. Then the signal is sent again a moment later, to land elsewhere."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        frame = frame.f_back
    raise KeyboardInterrupt


def run() -> int:
    """The ``embedlab`` program (console script and ``python -m embedlab``): :func:`main`, then leave the
    interpreter's final garbage collection nothing to traverse.

    A command that loaded a model holds millions of objects (torch, transformers, the weights); at exit
    Python's last collection walks them all for nothing, about 1.5 s of a short command here
    (``benchmarks/bench_process_exit.py``). Frozen objects are skipped by it; everything the command wrote
    was already closed. :func:`main` itself does not freeze: in a longer-lived caller (a test, a notebook)
    the collector must keep working."""
    status = main()
    gc.freeze()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run one command and return its exit status; an error prints one line (see :func:`exit_status`)."""
    forbid_downloads()  # embedlab never downloads
    args = build_parser().parse_args(argv)
    handles_sigint = (threading.current_thread() is threading.main_thread()
                      and signal.getsignal(signal.SIGINT) is signal.default_int_handler)  # an ignored SIGINT stays ignored
    if handles_sigint:
        signal.signal(signal.SIGINT, _interrupt)
    args.command_line = ["embedlab", *(sys.argv[1:] if argv is None else argv)]  # reports record what made them
    set_progress(arguments.progress_mode(args))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(args.command)
            return int(args.handler(args) or 0)
    except BrokenPipeError:  # the reader went away (``embedlab results | head``): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return RUNTIME_ERROR
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - every failure becomes one line
        if debug_requested():
            raise
        status = exit_status(error)
        if status == INTERRUPTED:
            message = "interrupted"
        elif status == USAGE_ERROR or isinstance(error, (OSError, sqlite3.Error, MissingExtraError)):
            message = describe(error)
        else:  # not a fault we expect: name its type so that a bug report says what happened
            message = f"{type(error).__name__}: {describe(error)} (EMBEDLAB_DEBUG=1 shows the traceback)"
        print(f"embedlab {args.command}: error: {message}", file=sys.stderr)
        return status
    finally:
        set_progress("auto")  # the next command (in the same process, e.g. a test) starts afresh
        if handles_sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
