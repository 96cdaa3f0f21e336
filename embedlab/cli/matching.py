"""CLI of token-level matching (token-matching paper §4.5 "Case Study", §3 "Token Weighting").

* ``embedlab explain SPEC "text a" "text b" --out match.png``: the token similarity heatmap with each
  row's first and second maxima marked (Fig. 2), and the per-token matching scores and weights.
* ``embedlab train-token-weights MODEL``: learn token weights with unsupervised SimCSE (frozen encoder).
* ``embedlab bertscore --cands FILE --refs FILE``: BERTScore P, R, F1 as the ``bert-score`` package gives
  them (system-level means printed; one line per pair to ``--out``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embedlab.cli.arguments import (ConfigOption, add_config_options, add_format, add_out, add_quiet, config_from_arguments,
                                    non_negative_int, positive_float, positive_int)
from embedlab.data import encoding_hint, is_blank
from embedlab.errors import InputError, InputTypeError

# TrainingConfig's fields the command sets (temperature stays SimCSE's)
TOKEN_WEIGHT_OPTIONS = (
    ConfigOption("--steps", "steps", positive_int, "training steps"),
    ConfigOption("--batch-size", "batch_size", positive_int, "sentences per step"),
    ConfigOption("--learning-rate", "learning_rate", positive_float, "Adam learning rate"),
    ConfigOption("--seed", "seed", non_negative_int, "seed of the sentence order"),
    ConfigOption("--max-tokens", "max_tokens", positive_int, "sentences are cut to this many tokens (SimCSE: 32)", show_default=False),
    ConfigOption("--min-chars", "min_chars", non_negative_int, "WikiText-2 sentences shorter than this are skipped", show_default=False),
    ConfigOption("--checkpoint-every", "checkpoint_every", positive_int, "steps between resumable checkpoints"),
)


def _cmd_explain(args: argparse.Namespace) -> int:
    import embedlab
    from embedlab.matching.explain import plot_explanation
    from embedlab.matching.method import MatchingMethod
    from embedlab.results.tables import render

    spec = args.spec if args.spec.startswith("match:") else f"match:{args.spec}"
    method = embedlab.load(spec)
    if not isinstance(method, MatchingMethod):
        raise InputTypeError(f"explain needs a match spec (match:MODEL,...), got {args.spec!r}")
    explanation = method.explain(args.text_a, args.text_b)
    if args.format in ("json", "csv"):  # one row per token, each with the pair's similarity
        columns = ("similarity", *explanation.COLUMNS)
        print(render(columns, [[round(explanation.similarity, 6), *row] for row in explanation.rows()], args.format))
    else:
        print(f"method: {method.spec}\nsimilarity {explanation.similarity:.4f}\n")
        print(render(explanation.COLUMNS, explanation.rows(), args.format))
    if args.out:
        plot_explanation(explanation, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from embedlab.matching.method import learned_weights_path
    from embedlab.models.loading import load_model
    from embedlab.training.token_weight_settings import TrainingConfig
    from embedlab.training.token_weights import train_token_weights

    config = config_from_arguments(TrainingConfig, args, TOKEN_WEIGHT_OPTIONS)
    out = Path(args.out) if args.out else learned_weights_path(load_model(args.model))
    from embedlab.runtime.outputs import check_output_file

    for written in (out, out.with_suffix(".json")):  # checked before training, not after
        check_output_file(written)
    weights = train_token_weights(config, out, resume=args.resume)
    print(f"wrote {weights.shape[0]} token weights to {out} (record: {out.with_suffix('.json')})", file=sys.stderr)
    return 0


def read_lines(path: Path, what: str) -> list[str]:
    """One text per line (UTF-8, a final newline optional); an empty line is refused with its number."""
    if not path.is_file():
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}){encoding_hint(path.read_bytes()[:2])}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    for number, line in enumerate(lines, start=1):
        if is_blank(line):
            raise InputError(f"{path}, line {number}: empty {what[:-1]} (BERTScore is undefined for an empty text)")
    return lines


def _cmd_bertscore(args: argparse.Namespace) -> int:
    import numpy as np

    from embedlab.matching.bertscore import bertscore
    from embedlab.matching.bertscore_scoring import resolve_layer
    from embedlab.models.loading import load_model

    from embedlab.runtime.outputs import check_output_file, write_output_text

    out = check_output_file(Path(args.out), inputs=(args.cands, args.refs, args.baseline)) if args.out else None
    cands, refs = read_lines(Path(args.cands), "candidates"), read_lines(Path(args.refs), "references")
    if len(cands) != len(refs):
        raise InputError(f"{args.cands} has {len(cands)} lines but {args.refs} has {len(refs)}: one reference per candidate")
    if not cands:
        raise InputError(f"{args.cands} and {args.refs} hold no lines")
    model = load_model(args.model)
    layer = resolve_layer(model, args.layer)
    precision, recall, f1 = bertscore(cands, refs, model=model, layer=layer, idf=args.idf, rescale=args.rescale,
                                      batch_size=args.batch_size, baseline=args.baseline, long_texts=args.long_texts)
    if out is not None:
        rows = ["line\tP\tR\tF1"] + [f"{line}\t{p:.6f}\t{r:.6f}\t{f:.6f}" for line, (p, r, f) in enumerate(zip(precision, recall, f1), start=1)]
        write_output_text(out, "\n".join(rows) + "\n")
        print(f"wrote {len(cands)} lines to {out}", file=sys.stderr)
    setting = f"{args.model} L{layer} {'idf' if args.idf else 'no-idf'}{' rescaled' if args.rescale else ''}"
    print(f"{setting}: P: {np.mean(precision):.6f} R: {np.mean(recall):.6f} F1: {np.mean(f1):.6f}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``explain``, ``train-token-weights`` and ``bertscore``."""
    explain = subparsers.add_parser("explain", help="token-level matching of two texts: scores, weights and a heatmap (Fig. 2)")
    explain.add_argument("spec", help="match spec, e.g. match:minilm,weights=idf (a bare model name means match:MODEL)")
    explain.add_argument("text_a")
    explain.add_argument("text_b")
    add_out(explain, help="PNG file for the heatmap")
    add_format(explain)
    add_quiet(explain)
    explain.set_defaults(handler=_cmd_explain)

    from embedlab.training.token_weight_settings import TrainingConfig

    defaults = TrainingConfig(model="")
    train = subparsers.add_parser("train-token-weights", help="learn per-token weights with unsupervised SimCSE (§3 Token Weighting)")
    train.add_argument("model", help="model name or folder, e.g. minilm")
    add_out(train, help="weights file to write, .safetensors (default: where weights=learned looks for this model)")
    add_config_options(train, defaults, TOKEN_WEIGHT_OPTIONS)
    train.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True, help="continue from a checkpoint of the same settings")
    add_quiet(train)
    train.set_defaults(handler=_cmd_train)

    score = subparsers.add_parser("bertscore", help="BERTScore P, R, F1 of candidate lines against reference lines (equal to the bert-score package)")
    score.add_argument("--cands", required=True, help="text file, one candidate per line")
    score.add_argument("--refs", required=True, help="text file, one reference per line (line i pairs with candidate line i)")
    score.add_argument("--model", default="minilm", help="model name or folder (default minilm)")
    score.add_argument("--layer", type=non_negative_int, default=None, help="layer 0 (embedding output) .. L (default: the package's for known models, else the last)")
    score.add_argument("--idf", action="store_true", help="weigh tokens by idf over the references")
    score.add_argument("--rescale", action="store_true", help="rescale with the baseline: (s - b) / (1 - b) (embedlab's WikiText-2 baselines, not the package's)")
    score.add_argument("--baseline", default=None, help="baseline file in the package's format (LAYER,P,R,F) for --rescale")
    score.add_argument("--batch-size", type=positive_int, default=64, help="texts per model run and pairs per matching batch (default 64, as the package)")
    score.add_argument("--long-texts", choices=("truncate", "chunk"), default="truncate",
                       help="truncate: cut each text at the tokenizer's maximum (512 for MiniLM), as the package does "
                            "(default); chunk: embedlab's extension, every token of a longer text in sentence-packed chunks")
    add_out(score, help="TSV file: line, P, R, F1 of every pair")
    add_quiet(score)
    score.set_defaults(handler=_cmd_bertscore)
