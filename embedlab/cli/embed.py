"""``embedlab embed`` (texts → a .npy or .parquet of vectors) and ``embedlab similarity`` (two texts → one score).

Any method spec works with ``similarity``; pairwise methods (``match:…``) have no vectors, so ``embed``
reports that they cannot be embedded.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from embedlab.cli.arguments import positive_int
from embedlab.data import unicode_problem
from embedlab.runtime import atomic_write_bytes


class InputError(ValueError):
    """Bad input file content, with the file and line it came from."""


def _decode_lines(payload: bytes, source: str) -> list[str]:
    lines = payload.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line does not start another text
    decoded = []
    for number, raw in enumerate(lines, start=1):
        try:
            decoded.append(raw.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise InputError(f"{source}:{number}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
    return decoded


def _read(path: str, input_format: str) -> tuple[str, list[int], list[object], list[str]]:
    """``(source, line numbers, JSON 'id' fields or None, texts)`` of a file or ``-`` (stdin)."""
    if path == "-":
        payload, source = sys.stdin.buffer.read(), "<stdin>"
    else:
        file = Path(path)
        if file.is_dir():
            raise InputError(f"--input {file} is a folder; give a text file (one text per line) or .jsonl")
        if not file.exists():
            raise InputError(f"input file not found: {file.resolve()}")
        payload, source = file.read_bytes(), str(file)
    lines = _decode_lines(payload, source)
    if input_format == "auto":
        input_format = "jsonl" if source.endswith((".jsonl", ".json")) else "lines"
    if input_format == "lines":
        return source, list(range(1, len(lines) + 1)), [None] * len(lines), lines
    numbers, given_ids, texts = [], [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{source}:{number}: invalid JSON ({error.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise InputError(f"{source}:{number}: expected a JSON object with a string field 'text'")
        problem = unicode_problem(record["text"])
        if problem:
            raise InputError(f"{source}:{number}: 'text' has a {problem}")
        if "id" in record and (isinstance(record["id"], bool) or not isinstance(record["id"], (int, str))):
            raise InputError(f"{source}:{number}: 'id' must be an integer or a string")
        numbers.append(number)
        given_ids.append(record.get("id"))
        texts.append(record["text"])
    return source, numbers, given_ids, texts


def read_texts(path: str, input_format: str = "auto") -> list[str]:
    """Texts from a file or ``-`` (stdin): one per line, or JSON lines with a ``text`` field."""
    return _read(path, input_format)[3]


def read_records(path: str, input_format: str = "auto") -> tuple[list[int] | list[str], list[str]]:
    """``(ids, texts)``: ids are the JSON records' ``id`` fields when every record has one (all integers or
    all strings), otherwise the 1-based line numbers the texts came from, so each vector can be traced."""
    source, numbers, given_ids, texts = _read(path, input_format)
    kinds = {type(given) for given in given_ids}
    if kinds == {int} or kinds == {str}:
        return given_ids, texts
    if kinds != {type(None)} and given_ids:
        raise InputError(f"{source}: give every record an 'id' of one type (all integers or all strings), or none")
    return numbers, texts


OUTPUT_FORMATS = (".npy", ".parquet")


def check_output(output: Path) -> None:
    """Fail before any encoding if ``output`` cannot be written: wrong suffix, not a regular file, no
    pyarrow for .parquet, or a folder that cannot be created or written to."""
    if output.exists() and not output.is_file():
        raise InputError(f"--output {output} exists and is not a regular file")
    if output.suffix not in OUTPUT_FORMATS:
        raise InputError(f"--output {output} must end in .npy (vectors) or .parquet (id, vector, optional text)")
    if output.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("writing .parquet needs pyarrow (pip install pyarrow), or write .npy") from None
    for folder in (output.parent, *output.parent.parents):
        if folder.exists() and not folder.is_dir():
            raise InputError(f"--output {output}: {folder} is a file, not a folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=output.parent):
        pass  # the folder takes a new file: the atomic write's temporary file will be created there too


def parquet_bytes(ids: list[int] | list[str], vectors: np.ndarray, texts: list[str] | None) -> object:
    """A Parquet file (as a pyarrow buffer): ``id``, ``vector`` (fixed-size list of float32), and ``text``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {
        "id": pa.array(ids, type=pa.int64() if ids and isinstance(ids[0], int) else pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), type=pa.float32()), vectors.shape[1]),
    }
    if texts is not None:
        columns["text"] = pa.array(texts, type=pa.string())
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def _cmd_embed(args: argparse.Namespace) -> int:
    import embedlab

    output = Path(args.output)
    check_output(output)
    if args.include_text and output.suffix != ".parquet":
        raise InputError("--include-text needs a .parquet output (a .npy file holds only the vectors)")
    ids, texts = read_records(args.input, args.input_format) if output.suffix == ".parquet" else (None, read_texts(args.input, args.input_format))
    method = embedlab.load(args.spec)
    vectors = method.encode(texts, batch_size=args.batch_size, show_progress_bar=args.progress, normalize_embeddings=args.normalize)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)  # FAISS-ready rows
    if output.suffix == ".npy":
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        payload = buffer.getbuffer()
    else:
        payload = parquet_bytes(ids, vectors, texts if args.include_text else None)
    try:
        atomic_write_bytes(output, [payload])
    except OSError as error:
        raise OSError(error.errno, f"could not write the output ({error.strerror}); nothing was written", str(output)) from None
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} float32 vectors to {output}", file=sys.stderr)
    return 0


def _cmd_similarity(args: argparse.Namespace) -> int:
    import embedlab

    for name, text in (("text_a", args.text_a), ("text_b", args.text_b)):
        problem = unicode_problem(text)  # undecodable bytes in an argument arrive as lone surrogates
        if problem:
            raise InputError(f"{name} has a {problem}")
    score = embedlab.load(args.spec).similarity_pairs([(args.text_a, args.text_b)])[0]
    print(f"{score:.6f}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``embed`` and ``similarity``."""
    embed = subparsers.add_parser("embed", help="embed texts into a .npy or .parquet file")
    embed.add_argument("spec", help="method spec, e.g. minilm or minilm:layers=1+last,post=quantile-u")
    embed.add_argument("--input", required=True, help="text file (one text per line), .jsonl with a 'text' field, or - for stdin")
    embed.add_argument("--input-format", choices=("auto", "lines", "jsonl"), default="auto", help="auto: .jsonl/.json files are JSON lines")
    embed.add_argument(
        "--output", required=True,
        help="exactly this file, written atomically: .npy (float32 rows, one per text) or .parquet (id, vector, "
        "text with --include-text; ids from the JSON 'id' field, else line numbers)",
    )
    embed.add_argument("--include-text", action="store_true", help=".parquet only: add a 'text' column")
    embed.add_argument("--batch-size", type=positive_int, default=32)
    embed.add_argument("--normalize", action="store_true", help="unit-normalise the vectors")
    embed.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    embed.set_defaults(handler=_cmd_embed)

    similarity = subparsers.add_parser("similarity", help="print the similarity (cosine for vector methods) of two texts")
    similarity.add_argument("spec")
    similarity.add_argument("text_a")
    similarity.add_argument("text_b")
    similarity.set_defaults(handler=_cmd_similarity)
