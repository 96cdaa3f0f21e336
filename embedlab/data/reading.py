"""Reading the shared data files: text decoding as SentEval reads it, lines, fields, numbers, JSON lines,
and the row counts of the data README that every loader checks (so that a truncated or altered copy
fails loudly instead of giving a silently different number)."""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from embedlab.data import DataFormatError, json_object
from embedlab.runtime.cache.atomic import atomic_write_bytes


# Row counts published in the data README (scored pairs for STS12-16, rows otherwise).
EXPECTED_ROWS: dict[str, int] = {
    "sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186,
    "stsb-train": 5749, "stsb-dev": 1500, "stsb-test": 1379,
    "sick-train": 4500, "sick-trial": 500, "sick-test": 4927,
    "mr": 10662, "cr": 3775, "subj": 10000, "mpqa": 10606,
    "sst2-train": 67349, "sst2-dev": 872, "sst2-test": 1821,
    "sst5-train": 8544, "sst5-dev": 1101, "sst5-test": 2210,
    "trec-train": 5452, "trec-test": 500,
    "mrpc-train": 4076, "mrpc-test": 1725, "mrpc-glue-train": 3668,
    "paws-dev": 8000, "paws-test": 8000, "qqp": 10000, "afin": 3001, "summeval": 1600,
    "agnews": 8000, "biomedical": 20000, "googlenews_ts": 11109,  # the README gives no count for the _s and _t variants
    "searchsnippets": 12340, "stackoverflow": 20000, "tweet": 2472,
}


def read_text(path: Path) -> str:
    """File content as text: UTF-8 (BOM dropped), falling back to Latin-1 as SentEval reads its files."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def file_lines(path: Path) -> list[str]:
    """Lines without their line ending; a missing final newline does not add an empty line."""
    text = read_text(path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def senteval_text(text: str) -> str:
    """SentEval tokenises on whitespace and re-joins with single spaces."""
    return " ".join(text.split())


def check_rows(key: str, count: int, path: Path) -> None:
    expected = EXPECTED_ROWS.get(key)
    if expected is not None and count != expected:
        raise DataFormatError(f"{path}: {count} rows for {key!r}, but the data README says {expected}")


def parse_number(value: str, path: Path, line_number: int, what: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise DataFormatError(f"{path}, line {line_number}: {what} {value!r} is not a number") from None
    if not np.isfinite(number):
        raise DataFormatError(f"{path}, line {line_number}: {what} {value!r} is not finite")
    return number


def split_fields(line: str, path: Path, line_number: int, minimum: int, separator: str = "\t") -> list[str]:
    parts = line.split(separator)
    if len(parts) < minimum:
        raise DataFormatError(
            f"{path}, line {line_number}: expected at least {minimum} tab-separated fields, found {len(parts)}"
        )
    return parts


def json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    for number, line in enumerate(file_lines(path), start=1):
        if not line.strip():
            continue
        yield number, json_object(line, f"{path}, line {number}")


def special_file_kind(path: Path) -> str | None:
    """"a named pipe", "a device" or "a socket" for a file that is not a regular one (it may be read only
    once, or never end); None for a regular file or a folder (a folder is refused when read)."""
    mode = path.stat().st_mode
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def read_npz_fields(path: Path, fields: Sequence[str], what: str) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file at ``path`` (no pickles), which must be exactly ``fields``; a file that is
    not such an archive is refused with a DataFormatError naming it as a ``what`` file."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise DataFormatError(f"{path}: not a readable {what} file ({error})") from error
    if sorted(arrays) != sorted(fields):
        raise DataFormatError(f"{path}: holds {sorted(arrays)}, expected {sorted(fields)}")
    return arrays


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` as a compressed ``.npz`` file at ``path``, written atomically (what :func:`read_npz_fields` reads)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())
