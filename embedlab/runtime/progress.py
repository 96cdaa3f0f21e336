"""Progress bars and status lines: every bar embedlab draws goes through :func:`progress_bar`.

:func:`set_progress` (the CLI's ``--quiet`` / ``--progress``) chooses the mode; :func:`show_progress`,
which every long loop asks, draws bars on stderr only when someone watches a terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from embedlab.errors import InputError
from embedlab.runtime.settings import progress_mode, set_progress_mode

if TYPE_CHECKING:
    from tqdm import tqdm as ProgressBar  # what progress_bar returns, for annotations
else:
    ProgressBar = object

PROGRESS_MODES = ("auto", "quiet", "always")


def set_progress(mode: str) -> None:
    """Progress bars for this process: ``auto`` (on stderr when it is a terminal), ``quiet`` (never) or
    ``always`` (also when stderr is a file or a pipe)."""
    if mode not in PROGRESS_MODES:
        raise InputError(f"unknown progress mode {mode!r}; expected one of {', '.join(PROGRESS_MODES)}")
    set_progress_mode(mode)


def show_progress(requested: bool | None = None) -> bool:
    """Whether a long loop draws its progress bar: never when quiet; else the caller's explicit choice
    (``show_progress_bar=True/False``), else only when stderr is a terminal or bars are forced, so that
    piped or logged output holds no bar fragments."""
    if progress_mode() == "quiet":
        return False
    if requested is not None:
        return bool(requested)
    return progress_mode() == "always" or (sys.stderr is not None and sys.stderr.isatty())


def progress_bar(iterable=None, *, show: bool | None = None, **options):
    """A tqdm bar on stderr, drawn when :func:`show_progress` says so for the caller's ``show`` (its
    ``show_progress_bar=``; ``disable`` overrides both)."""
    from tqdm.auto import tqdm

    options.setdefault("disable", not show_progress(show))
    return tqdm(iterable, file=sys.stderr, **options)


@contextlib.contextmanager
def library_bars(module: object) -> Iterator[None]:
    """Within this block the ``tqdm`` a library module draws unconditionally (transformers' GGUF loading) is
    :func:`progress_bar`, so its bar follows :func:`show_progress` (a terminal, not --quiet)."""
    original = module.tqdm
    module.tqdm = progress_bar
    try:
        yield
    finally:
        module.tqdm = original


def status(message: str) -> None:
    """One status line on stderr (unless quiet), printed above any progress bar instead of through it."""
    if progress_mode() != "quiet":
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)
