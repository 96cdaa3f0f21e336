"""The ``embedlab`` command line: embed texts, compare two texts, list methods (and, from feature
modules, evaluate, explain and more).

Feature modules register their subcommands through ``add_cli(subparsers)``; see ``FEATURE_MODULES``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import numpy as np

FEATURE_MODULES: list[str] = ["embedlab.cli.evaluate", "embedlab.cli.neural", "embedlab.cli.matching", "embedlab.cli.alignsim"]


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
        if not file.is_file():
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

    score = embedlab.load(args.spec).similarity([(args.text_a, args.text_b)])[0]
    print(f"{score:.6f}")
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    from embedlab.methods.registry import PRESETS, describe_families
    from embedlab.models import DESCRIPTIONS, available_models

    print("Method spec grammar: MODEL[:k=v,...] | FAMILY:MODEL[,k=v,...] ; '+' between specs concatenates.\n")
    print("Families and options (defaults shown):")
    print(describe_families())
    print("\nPresets (paper configurations):")
    for name, (spec, why) in PRESETS.items():
        print(f"  {spec}\n      {name}: {why}")
    installed = set(available_models())
    print("\nNamed models:")
    for name, description in DESCRIPTIONS.items():
        print(f"  {name:8s} {description}{'' if name in installed else ' [not installed]'}")
    return 0


DEMO_PAIRS = 12


def _cmd_demo(args: argparse.Namespace) -> int:
    """Embed a few STS-B test pairs with a method and print cosine beside the human score."""
    import embedlab
    from embedlab.data.datasets import stsb

    test = stsb("test")
    rows = list(zip(test.scores.tolist(), test.first, test.second))
    chosen = [rows[index] for index in range(0, len(rows), len(rows) // args.pairs)][: args.pairs]
    method = embedlab.load(args.spec)
    scores = method.similarity([(a, b) for _, a, b in chosen])
    print(f"method: {method.spec}  (STS-B test, {len(chosen)} pairs: human score 0-5 vs similarity)")
    for (gold, a, b), score in sorted(zip(chosen, scores), key=lambda item: item[0][0]):
        print(f"  {gold:4.2f}  {score:+.3f}  {a[:48]!r} ~ {b[:48]!r}")
    from scipy.stats import spearmanr

    print(f"Spearman over these pairs: {spearmanr([g for g, _, _ in chosen], scores).statistic:.3f}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embedlab", description=__doc__.split("\n\n")[0])
    subparsers = parser.add_subparsers(dest="command", required=True)

    embed = subparsers.add_parser("embed", help="embed texts into a .npy file")
    embed.add_argument("spec", help="method spec, e.g. minilm or minilm:layers=1+last,post=quantile-u")
    embed.add_argument("--input", required=True, help="text file (one text per line), .jsonl with a 'text' field, or - for stdin")
    embed.add_argument("--input-format", choices=("auto", "lines", "jsonl"), default="auto", help="auto: .jsonl/.json files are JSON lines")
    embed.add_argument("--output", required=True, help="output .npy file (float32, one row per text)")
    embed.add_argument("--batch-size", type=int, default=32)
    embed.add_argument("--normalize", action="store_true", help="unit-normalise the vectors")
    embed.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True, help="show a progress bar")
    embed.set_defaults(handler=_cmd_embed)

    similarity = subparsers.add_parser("similarity", help="print the similarity (cosine for vector methods) of two texts")
    similarity.add_argument("spec")
    similarity.add_argument("text_a")
    similarity.add_argument("text_b")
    similarity.set_defaults(handler=_cmd_similarity)

    methods = subparsers.add_parser("methods", help="list method families, options, presets and models")
    methods.set_defaults(handler=_cmd_methods)

    demo = subparsers.add_parser("demo", help="similarities of a few STS-B test pairs next to their human scores")
    demo.add_argument("spec", nargs="?", default="minilm")
    demo.add_argument("--pairs", type=int, default=DEMO_PAIRS)
    demo.set_defaults(handler=_cmd_demo)

    for module in FEATURE_MODULES:
        importlib.import_module(module).add_cli(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # embedlab never downloads
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (InputError, ValueError, TypeError, LookupError, FileNotFoundError) as error:
        print(f"embedlab {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
