"""The one output writer of every command that takes ``--out``: the README's rules for what embedlab writes.

* A file is written atomically (:func:`write_output_file`): a reader, or a disk that fills up, sees the
  old file or the whole new one; a symlink at the output is replaced, never written through.
* The output is never one of the command's inputs, however spelled (``./x``, a symlink, a hard link), and a
  folder that cannot take a new file is named as ``--out`` before any work (:func:`check_output_file`).
* A folder (:func:`output_folder`) is built in a staging folder beside it and renamed into place, under a
  lock that refuses a second writer; the staging folder of a killed writer is removed on the next open.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from embedlab.errors import InputError
from embedlab.runtime.cache.atomic import atomic_write_bytes, remove_orphan_staging, remove_orphan_temporaries, staging_path


def same_path(first: Path, second: Path) -> bool:
    """Whether two paths name one file or folder (however spelled: ``.``, symlinks, hard links)."""
    try:
        if first.exists() and second.exists():
            return os.path.samefile(first, second)
        return first.resolve() == second.resolve()
    except (OSError, RuntimeError):  # a symlink loop names no file: the input's own check reports it
        return False


def _nearest_folder(path: Path) -> Path:
    return next(folder for folder in (path.parent, *path.parent.parents) if folder.exists())


def check_output_file(path: Path, *, inputs: Iterable[Path | str | None] = (), option: str = "--out") -> Path:
    """``path`` once it is known to be writable as a new file: not a folder, not one of ``inputs``, and its
    folder (or the nearest existing one) takes a new file. Creates nothing; raises before any work."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder; give a file name")
    for given in inputs:
        if given is not None and str(given) != "-" and same_path(path, Path(given).expanduser()):
            raise InputError(f"{option} {path} is the input file {given}: writing there would replace it; "
                             "give another path (nothing was written)")
    for folder in path.parents:
        if folder.exists() and not folder.is_dir():
            raise InputError(f"{option} {path}: {folder} is a file, not a folder")
    _check_takes_files(_nearest_folder(path), path, option)
    return path


def _check_takes_files(folder: Path, path: Path, option: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise OSError(error.errno, f"{option} {path} cannot be written: {folder} takes no new file "
                                   f"({error.strerror or error}); nothing was written") from None


def write_output_file(path: Path, payload: bytes | Sequence[bytes | memoryview], *, option: str = "--out") -> None:
    """Write ``payload`` to ``path`` atomically (a symlink there is replaced, not written through); a disk
    or permission fault names ``option`` and leaves any old file whole."""
    path = Path(path).expanduser()
    try:
        atomic_write_bytes(path, payload)
    except OSError as error:
        raise OSError(error.errno, f"{option} {path} could not be written ({error.strerror or error}); "
                                   "any earlier file there is unchanged") from None


def write_output_text(path: Path, text: str, *, option: str = "--out") -> None:
    """:func:`write_output_file` of ``text`` in UTF-8."""
    write_output_file(path, text.encode("utf-8"), option=option)


def _refuse_non_empty(folder: Path, option: str) -> None:
    if folder.is_dir():
        remove_orphan_temporaries(folder)  # a killed writer's temporaries (an older embedlab wrote in place)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(f"{option} {folder} exists and is not an empty folder; choose a new folder")


@contextlib.contextmanager
def writer_lock(folder: Path, option: str = "--out") -> Iterator[None]:
    """Hold the writer's lock of ``folder`` (``.<name>.lock`` beside it, an ``flock`` the kernel drops when its
    holder dies): a second writer into the same folder is refused at once, naming ``option``."""
    from filelock import FileLock, Timeout

    folder = Path(folder).expanduser()
    folder.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder.with_name(f".{folder.name}.lock")), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise InputError(f"{option} {folder}: another embedlab process is writing this folder; wait for it to finish "
                         "or give another folder (nothing was written)") from None
    try:
        yield
    finally:
        lock.release()
        Path(lock.lock_file).unlink(missing_ok=True)


@contextlib.contextmanager
def output_folder(folder: Path, *, inputs: Iterable[Path | str | None] = (), option: str = "--out") -> Iterator[Path]:
    """A new folder written whole or not at all: yields a staging folder beside ``folder`` to write into,
    renamed to ``folder`` when the block ends without error (removed when it fails).

    ``folder`` must be new or empty and not one of ``inputs``. A lock (``.<name>.lock`` beside it, an
    ``flock`` the kernel drops when its holder dies) refuses a second writer at once, and the staging
    folders of killed writers are removed when the lock is taken."""
    folder = Path(folder).expanduser()
    for given in inputs:
        if given is not None and same_path(folder, Path(given).expanduser()):
            raise InputError(f"{option} {folder} is the input {given}; give another folder (nothing was written)")
    _refuse_non_empty(folder, option)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _check_takes_files(folder.parent, folder, option)
    with writer_lock(folder, option):
        remove_orphan_staging(folder)
        _refuse_non_empty(folder, option)  # written by a writer that finished while this one waited
        staging = staging_path(folder)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            yield staging
            if folder.is_dir():
                folder.rmdir()  # empty (checked under the lock): the staging folder takes its place
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

