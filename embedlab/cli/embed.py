"""``embedlab embed`` (texts → a .npy of vectors) and ``embedlab similarity`` (two texts → one score).

Any method spec works with ``similarity``; pairwise methods (``match:…``) have no vectors, so ``embed``
reports that they cannot be embedded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from embedlab.cli.arguments import positive_int
from embedlab.data import unicode_problem


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


def read_texts(path: str, input_format: str = "auto") -> list[str]:
    """Texts from a file or ``-`` (stdin): one per line, or JSON lines with a ``text`` field."""
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
        return lines
    texts = []
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
        texts.append(record["text"])
    return texts


def _cmd_embed(args: argparse.Namespace) -> int:
    import embedlab

    texts = read_texts(args.input, args.input_format)
    vectors = embedlab.load(args.spec).encode(
        texts, batch_size=args.batch_size, show_progress_bar=args.progress, normalize=args.normalize
    )
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    np.save(output, vectors, allow_pickle=False)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1] if vectors.ndim == 2 else 0} float32 vectors to {output}", file=sys.stderr)
    return 0


def _cmd_similarity(args: argparse.Namespace) -> int:
    import embedlab

    for name, text in (("text_a", args.text_a), ("text_b", args.text_b)):
        problem = unicode_problem(text)  # undecodable bytes in an argument arrive as lone surrogates
        if problem:
            raise InputError(f"{name} has a {problem}")
    score = embedlab.load(args.spec).similarity([(args.text_a, args.text_b)])[0]
    print(f"{score:.6f}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``embed`` and ``similarity``."""
    embed = subparsers.add_parser("embed", help="embed texts into a .npy file")
    embed.add_argument("spec", help="method spec, e.g. minilm or minilm:layers=1+last,post=quantile-u")
    embed.add_argument("--input", required=True, help="text file (one text per line), .jsonl with a 'text' field, or - for stdin")
    embed.add_argument("--input-format", choices=("auto", "lines", "jsonl"), default="auto", help="auto: .jsonl/.json files are JSON lines")
    embed.add_argument("--output", required=True, help="output .npy file (float32, one row per text)")
    embed.add_argument("--batch-size", type=positive_int, default=32)
    embed.add_argument("--normalize", action="store_true", help="unit-normalise the vectors")
    embed.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    embed.set_defaults(handler=_cmd_embed)

    similarity = subparsers.add_parser("similarity", help="print the similarity (cosine for vector methods) of two texts")
    similarity.add_argument("spec")
    similarity.add_argument("text_a")
    similarity.add_argument("text_b")
    similarity.set_defaults(handler=_cmd_similarity)
