"""A user's corpus read lazily: ``.txt`` (one text per line), ``.jsonl``, ``.csv``/``.tsv`` and ``.parquet``.

Why lazy: ``embedlab embed`` must handle corpora larger than memory, and a resumed run must start reading
at the first unfinished shard without re-reading (or re-decoding) everything before it. So a
:class:`Corpus` yields :class:`Record` objects one at a time, each carrying the :data:`Position` right
after it; :meth:`Corpus.scan` validates the whole file once (before any encoding, so bad input fails
fast) and returns the position where each shard starts, and :meth:`Corpus.records` can start at any of
those positions (a byte offset for the line formats, a row index for Parquet).

Every text has an id: the file's own ``id`` field/column when it has one (a JSON record with ``_id`` is a BEIR
corpus record: ``_id`` is its id and ``(title + " " + text).strip()`` its text) (all integers or all strings,
no duplicates), otherwise where the text came from (the 1-based line of a line format, the 1-based row
of a Parquet file). Bad input raises :class:`~embedlab.data.DataFormatError` naming the file and line
(or row): invalid UTF-8, invalid JSON, a missing or empty ``text``, an ``id`` of the wrong type, a
repeated ``id``.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from embedlab.data import DataFormatError, encoding_hint, is_blank, json_object, unicode_problem
from embedlab.data.beir import document_text
from embedlab.data.reading import special_file_kind
from embedlab.errors import InputError

# Position after a record: (byte offset, line number) for line formats, (row index, row index) for Parquet.
Position = tuple[int, int]
START: Position = (0, 0)

FORMATS = ("txt", "jsonl", "csv", "tsv", "parquet")
_SUFFIX_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
_PARQUET_BATCH_ROWS = 4096
_IDENTITY_BLOCK_BYTES = 1 << 20  # the input identity hashes the whole file in blocks of this size


@dataclass(frozen=True)
class Record:
    """One text, its id, the line (or row) it starts at, and the position right after it."""

    id: int | str
    text: str
    line: int
    after: Position
    given_id: bool = False  # the id is the file's own (not the line or row number)


@dataclass(frozen=True)
class CorpusScan:
    """What one validating pass over a corpus found: how many texts, what their ids are, where shards start."""

    count: int
    id_kind: str  # "line" (line/row numbers), "int" or "str" (the file's own ids)
    shard_starts: list[Position] = field(default_factory=list)


def corpus_format(path: str | Path, requested: str = "auto") -> str:
    """The format of ``path``: ``requested`` unless it is ``auto``, else by suffix (anything else is one text a line)."""
    if requested != "auto":
        if requested not in FORMATS:
            raise InputError(f"unknown input format {requested!r}; choose one of: auto, {', '.join(FORMATS)}")
        return requested
    return _SUFFIX_FORMATS.get(Path(str(path)).suffix.lower(), "txt")


class Corpus:
    """A text file (or ``-``, standard input, read once) whose records are read lazily, one at a time."""

    def __init__(self, path: str | Path, input_format: str = "auto") -> None:
        self.stdin = str(path) == "-"
        self.path = Path(str(path)).expanduser()
        self.source = "<stdin>" if self.stdin else str(path)
        self.format = corpus_format("-" if self.stdin else self.path, input_format)
        if self.stdin:
            if self.format == "parquet":
                raise InputError("Parquet input cannot come from standard input; give the file's path")
            return
        if self.path.is_symlink() and not self.path.exists():
            try:
                self.path.resolve(strict=True)
                why = "a broken symlink"
            except RuntimeError:
                why = "a symlink loop"
            except OSError as error:
                why = "a symlink loop" if error.errno == 40 else "a broken symlink"
            raise DataFormatError(f"input {self.path} is {why}; give the texts' file")
        if self.path.is_dir():
            raise DataFormatError(f"input {self.path} is a folder; give a .txt, .jsonl, .csv, .tsv or .parquet file")
        if not self.path.exists():
            raise FileNotFoundError(f"input file not found: {self.path.resolve()} (given as {str(path)!r})")

    # -- identity and validation ------------------------------------------------------------------------
    def identity(self) -> dict[str, object]:
        """What tells this input from any other: resolved path, format, size, mtime and the SHA-256 of its
        whole content (one streaming pass, constant memory).

        A resumed run compares it with the one its output folder recorded, so a changed input is refused
        rather than silently mixed with vectors of the old one, wherever the change is and whatever the
        size and mtime say."""
        if self.stdin:
            raise InputError("standard input has no identity to resume from; write the texts to a file first")
        kind = special_file_kind(self.path)
        if kind is not None:
            raise DataFormatError(f"input {self.source} is not a regular file ({kind}): a resumable run reads it several times "
                                  "and checks it has not changed; write the texts to a file first")
        status = self.path.stat()
        digest = hashlib.sha256()
        with self.path.open("rb") as file:
            for block in iter(lambda: file.read(_IDENTITY_BLOCK_BYTES), b""):
                digest.update(block)
        return {"path": str(self.path.resolve()), "format": self.format, "size": status.st_size,
                "mtime_ns": status.st_mtime_ns, "sha256": digest.hexdigest()}

    def scan(self, shard_size: int | None = None) -> CorpusScan:
        """Read every record once: validate it, check the ids (one kind, no repeats), count the texts and
        note the position where every ``shard_size``-th record starts."""
        if shard_size is not None and shard_size < 1:
            raise InputError(f"shard size must be a positive integer, got {shard_size}")
        ids, count, starts, previous = _IdCheck(self.source), 0, [], START
        for record in self.records():
            ids.add(record)
            if shard_size is not None and count % shard_size == 0:
                starts.append(previous)
            previous = record.after
            count += 1
        return CorpusScan(count, ids.kind or "line", starts)

    def read_all(self) -> tuple[list[int | str], list[str]]:
        """Every ``(id, text)`` in memory, validated as :meth:`scan` validates (one pass: works on stdin)."""
        ids, texts, check = [], [], _IdCheck(self.source)
        for record in self.records():
            check.add(record)
            ids.append(record.id)
            texts.append(record.text)
        return ids, texts

    # -- reading ----------------------------------------------------------------------------------------
    def records(self, start: Position = START) -> Iterator[Record]:
        """Records from ``start`` (a position :meth:`scan` or an earlier record gave) to the end."""
        if self.format == "parquet":
            yield from self._parquet_records(start[0])
            return
        if self.stdin:
            if start != START:
                raise InputError("standard input can only be read from its start")
            if sys.stdin is None or sys.stdin.closed:
                raise DataFormatError("standard input is closed; pipe the texts in, or give --input FILE")
            yield from self._line_records(sys.stdin.buffer, start)
            return
        with self.path.open("rb") as file:
            yield from self._line_records(file, start)

    def _line_records(self, file: BinaryIO, start: Position) -> Iterator[Record]:
        if self.format in ("csv", "tsv"):
            if start == START:
                header, start = self._header(file)
            else:
                header, _ = self._header(file)
                file.seek(start[0])
            yield from self._table_records(file, start, header)
            return
        if start != START:
            file.seek(start[0])
        for offset, number, line in self._decoded_lines(file, start):
            if self.format == "txt":
                if is_blank(line):
                    raise DataFormatError(f"{self.source}:{number}: empty line (every line is one text; remove blank lines;"
                                          " zero-width characters alone count as empty)")
                yield Record(number, line, number, (offset, number))
            elif line.strip():  # JSON lines: a blank line holds no record
                yield self._json_record(line, number, (offset, number))

    def _decoded_lines(self, file: BinaryIO, start: Position) -> Iterator[tuple[int, int, str]]:
        """(byte offset after the line, line number, line without its ending) from ``start`` on."""
        offset, number = start
        for raw in file:
            offset += len(raw)
            number += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                hint = encoding_hint(raw) if number == 1 else ""
                raise DataFormatError(f"{self.source}:{number}: not valid UTF-8 ({error.reason} at byte {error.start}){hint}") from None
            if number == 1:
                line = line.removeprefix("\ufeff")  # a byte-order mark is not part of the first text
            line = line.rstrip("\r\n")
            if "\r" in line and self.format in ("txt", "jsonl"):
                raise DataFormatError(f"{self.source}:{number}: a carriage return inside the line (old Mac line ends?): it "
                                      "would merge several texts into one; end lines with \\n (or \\r\\n)")
            yield offset, number, line

    def _json_record(self, line: str, number: int, after: Position) -> Record:
        row = json_object(line, f"{self.source}:{number}")
        if "text" not in row:
            raise DataFormatError(f"{self.source}:{number}: the record has no 'text' field")
        if "_id" in row and "id" not in row:  # a BEIR corpus.jsonl record: its id, and the text retrieval reads
            row = {"id": row["_id"], "text": _beir_text(row, f"{self.source}:{number}")}
        text = self._text(row["text"], number)
        if "id" not in row:
            return Record(number, text, number, after)
        given = row["id"]
        if isinstance(given, bool) or not isinstance(given, (int, str)):
            raise DataFormatError(f"{self.source}:{number}: 'id' must be an integer or a string")
        _check_id(given, f"{self.source}:{number}")
        return Record(given, text, number, after, True)

    def _text(self, value: object, number: int) -> str:
        if not isinstance(value, str):
            raise DataFormatError(f"{self.source}:{number}: 'text' must be a string")
        problem = unicode_problem(value)
        if problem:
            raise DataFormatError(f"{self.source}:{number}: 'text' has a {problem}")
        if is_blank(value):
            raise DataFormatError(f"{self.source}:{number}: 'text' is empty (or only zero-width characters)")
        return value

    # -- CSV / TSV --------------------------------------------------------------------------------------
    def _dialect(self) -> dict[str, object]:
        # TSV files quote nothing (a '"' inside a text is just a character); CSV follows RFC 4180
        return {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if self.format == "tsv" else {"delimiter": ","}

    def _header(self, file: BinaryIO) -> tuple[list[str], Position]:
        """The header row's column names (lower-cased), read from the file's start, and the position after it."""
        first = next(self._decoded_lines(file, START), None)
        if first is None:
            raise DataFormatError(f"{self.source}:1: empty file; a {self.format.upper()} corpus needs a header row naming a 'text' column")
        header = [name.strip().lower() for name in next(csv.reader([first[2]], **self._dialect()), [])]
        if "text" not in header:
            raise DataFormatError(f"{self.source}:1: the header row {first[2][:80]!r} has no 'text' column")
        for name in ("text", "id"):
            if header.count(name) > 1:  # which of them holds the texts would be a guess
                raise DataFormatError(f"{self.source}:1: the header row names the {name!r} column {header.count(name)} times")
        return header, (first[0], first[1])

    def _table_records(self, file: BinaryIO, start: Position, header: list[str]) -> Iterator[Record]:
        consumed = [start]  # position after the last line the csv reader has pulled

        def lines() -> Iterator[str]:
            for offset, number, line in self._decoded_lines(file, start):
                consumed[0] = (offset, number)
                yield line + "\n"

        reader = csv.reader(lines(), **self._dialect())
        text_column, id_column = header.index("text"), header.index("id") if "id" in header else None
        while True:
            first_line = consumed[0][1] + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise DataFormatError(f"{self.source}:{consumed[0][1]}: {error}") from None
            if not any(value.strip() for value in fields):
                continue  # a blank line holds no record
            if len(fields) != len(header):
                raise DataFormatError(f"{self.source}:{first_line}: expected {len(header)} fields ({', '.join(header)}), found {len(fields)}")
            text = self._text(fields[text_column], first_line)
            if id_column is None:
                yield Record(first_line, text, first_line, consumed[0])
            else:
                if not fields[id_column].strip():
                    raise DataFormatError(f"{self.source}:{first_line}: 'id' is empty")
                _check_id(fields[id_column].strip(), f"{self.source}:{first_line}")
                yield Record(fields[id_column].strip(), text, first_line, consumed[0], True)

    # -- Parquet ----------------------------------------------------------------------------------------
    def _parquet_records(self, start_row: int) -> Iterator[Record]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            parquet = pq.ParquetFile(self.path)
        except (pa.ArrowInvalid, OSError) as error:
            raise DataFormatError(f"{self.source}: not a readable Parquet file ({error})") from None
        schema = parquet.schema_arrow
        if "text" not in schema.names:
            raise DataFormatError(f"{self.source}: no 'text' column (columns: {', '.join(schema.names)})")
        if not _holds_strings(schema.field("text").type):
            raise DataFormatError(f"{self.source}: column 'text' must hold strings, not {schema.field('text').type}")
        has_id = "id" in schema.names
        if has_id:
            id_type = schema.field("id").type
            if not (pa.types.is_integer(id_type) or _holds_strings(id_type)):
                raise DataFormatError(f"{self.source}: column 'id' must hold integers or strings, not {id_type}")
        # skip whole row groups before ``start_row`` without reading them
        groups, first_row = [], 0
        for group in range(parquet.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if first_row + rows > start_row or groups:
                groups.append(group)
            else:
                first_row += rows
        if not groups:
            return
        row = first_row
        columns = ["text", "id"] if has_id else ["text"]
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=groups, columns=columns):
            texts = batch.column("text").to_pylist()
            ids = batch.column("id").to_pylist() if has_id else None
            for position, value in enumerate(texts):
                row += 1
                if row <= start_row:
                    continue
                if value is None:
                    raise DataFormatError(f"{self.source}: row {row}: 'text' is null")
                text = self._text(value, row)
                if ids is None:
                    yield Record(row, text, row, (row, row))
                elif ids[position] is None:
                    raise DataFormatError(f"{self.source}: row {row}: 'id' is null")
                else:
                    _check_id(ids[position], f"{self.source}: row {row}")
                    yield Record(ids[position], text, row, (row, row), True)


def _holds_strings(column_type) -> bool:
    """A Parquet column of strings, dictionary-encoded ones included (pandas' categories, Spark's writers)."""
    import pyarrow as pa

    if pa.types.is_dictionary(column_type):
        column_type = column_type.value_type
    return pa.types.is_string(column_type) or pa.types.is_large_string(column_type)


def _beir_text(row: dict, where: str) -> object:
    """``(title + " " + text).strip()``, as BEIR and MTEB (and the retrieval task) build a document."""
    if not isinstance(row.get("title") or "", str) or not isinstance(row["text"], str):
        raise DataFormatError(f"{where}: 'title' and 'text' must be strings")
    return document_text(row.get("title"), row["text"])


_INT64 = (-(2**63), 2**63 - 1)


def _check_id(value: int | str, where: str) -> None:
    """Refuse an id the shards cannot store: an integer outside int64, a string that is not valid Unicode."""
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        raise DataFormatError(f"{where}: 'id' {value} is outside the 64-bit integer range the shards store; "
                              "give it as a string, or renumber")
    if isinstance(value, str) and (problem := unicode_problem(value)):
        raise DataFormatError(f"{where}: 'id' has a {problem}")


class _IdCheck:
    """Ids of one corpus: all line numbers, or all the file's own of one type (integers or strings), unique."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.kind: str | None = None
        self.seen: set[int | str] = set()

    def add(self, record: Record) -> None:
        kind = _id_kind(record)
        if self.kind is None:
            self.kind = kind
        elif kind != self.kind:
            raise DataFormatError(
                f"{self.source}:{record.line}: {_describe_id(kind)}, but the records before have "
                f"{_describe_id(self.kind)}; give every record an id of one type (all integers or all strings), or none"
            )
        if kind != "line":
            if record.id in self.seen:
                raise DataFormatError(f"{self.source}:{record.line}: id {record.id!r} is repeated (ids must be unique)")
            self.seen.add(record.id)


def _id_kind(record: Record) -> str:
    if not record.given_id:
        return "line"
    return "int" if isinstance(record.id, int) else "str"


def _describe_id(kind: str) -> str:
    return {"line": "no 'id'", "int": "an integer 'id'", "str": "a string 'id'"}[kind]
