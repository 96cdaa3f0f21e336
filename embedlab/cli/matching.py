"""CLI of token-level matching (token-matching paper §4.5 "Case Study", §3 "Token Weighting").

* ``embedlab explain SPEC "text a" "text b" --out match.png``: the token similarity heatmap with each
  row's first and second maxima marked (Fig. 2), and the per-token matching scores and weights.
* ``embedlab train-token-weights MODEL``: learn token weights with unsupervised SimCSE (frozen encoder).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embedlab.cli.arguments import add_format, add_out, add_quiet, non_negative_int, positive_float, positive_int


def _cmd_explain(args: argparse.Namespace) -> int:
    import embedlab
    from embedlab.matching.explain import plot_explanation
    from embedlab.matching.method import MatchingMethod
    from embedlab.results.tables import render

    spec = args.spec if args.spec.startswith("match:") else f"match:{args.spec}"
    method = embedlab.load(spec)
    if not isinstance(method, MatchingMethod):
        raise TypeError(f"explain needs a match spec (match:MODEL,...), got {args.spec!r}")
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
    from embedlab.models import load_model
    from embedlab.training.token_weights import TrainingConfig, train_token_weights

    config = TrainingConfig(
        model=args.model,
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        seed=args.seed,
        max_tokens=args.max_tokens,
        min_chars=args.min_chars,
        checkpoint_every=args.checkpoint_every,
    )
    out = Path(args.out) if args.out else learned_weights_path(load_model(args.model))
    weights = train_token_weights(config, out, resume=args.resume)
    print(f"wrote {weights.shape[0]} token weights to {out} (record: {out.with_suffix('.json')})", file=sys.stderr)
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``explain`` and ``train-token-weights``."""
    explain = subparsers.add_parser("explain", help="token-level matching of two texts: scores, weights and a heatmap (Fig. 2)")
    explain.add_argument("spec", help="match spec, e.g. match:minilm,weights=idf (a bare model name means match:MODEL)")
    explain.add_argument("text_a")
    explain.add_argument("text_b")
    add_out(explain, help="PNG file for the heatmap")
    add_format(explain)
    add_quiet(explain)
    explain.set_defaults(handler=_cmd_explain)

    from embedlab.training.token_weights import TrainingConfig

    defaults = TrainingConfig(model="")
    train = subparsers.add_parser("train-token-weights", help="learn per-token weights with unsupervised SimCSE (§3 Token Weighting)")
    train.add_argument("model", help="model name or folder, e.g. minilm")
    add_out(train, help="weights file to write, .safetensors (default: where weights=learned looks for this model)")
    train.add_argument("--steps", type=positive_int, default=defaults.steps, help=f"training steps (default {defaults.steps})")
    train.add_argument("--batch-size", type=positive_int, default=defaults.batch_size, help=f"sentences per step (default {defaults.batch_size})")
    train.add_argument("--learning-rate", type=positive_float, default=defaults.learning_rate, help=f"Adam learning rate (default {defaults.learning_rate})")
    train.add_argument("--seed", type=non_negative_int, default=defaults.seed, help=f"seed of the sentence order (default {defaults.seed})")
    train.add_argument("--max-tokens", type=positive_int, default=defaults.max_tokens, help="sentences are cut to this many tokens (SimCSE: 32)")
    train.add_argument("--min-chars", type=non_negative_int, default=defaults.min_chars, help="WikiText-2 sentences shorter than this are skipped")
    train.add_argument("--checkpoint-every", type=positive_int, default=defaults.checkpoint_every, help=f"steps between resumable checkpoints (default {defaults.checkpoint_every})")
    train.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True, help="continue from a checkpoint of the same settings")
    add_quiet(train)
    train.set_defaults(handler=_cmd_train)
