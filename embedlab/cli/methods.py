"""``embedlab methods`` (what can be asked for: families, options, presets, models) and ``embedlab demo``
(how a method behaves at a glance: a few STS-B test pairs, similarity next to the human score)."""

from __future__ import annotations

import argparse

from embedlab.cli.arguments import positive_int

DEMO_PAIRS = 12


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


def _cmd_demo(args: argparse.Namespace) -> int:
    """Score a few STS-B test pairs with a method and print each score beside the human score."""
    from scipy.stats import spearmanr

    import embedlab
    from embedlab.data.datasets import stsb

    test = stsb("test")
    rows = list(zip(test.scores.tolist(), test.first, test.second))
    step = max(1, len(rows) // args.pairs)  # evenly spread; every pair when more are asked for than exist
    chosen = [rows[index] for index in range(0, len(rows), step)][: args.pairs]
    method = embedlab.load(args.spec)
    scores = method.similarity_pairs([(a, b) for _, a, b in chosen])
    print(f"method: {method.spec}  (STS-B test, {len(chosen)} pairs: human score 0-5 vs similarity)")
    for (gold, a, b), score in sorted(zip(chosen, scores), key=lambda item: item[0][0]):
        print(f"  {gold:4.2f}  {score:+.3f}  {a[:48]!r} ~ {b[:48]!r}")
    print(f"Spearman over these pairs: {spearmanr([g for g, _, _ in chosen], scores).statistic:.3f}")
    return 0


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Register ``methods`` and ``demo``."""
    methods = subparsers.add_parser("methods", help="list method families, options, presets and models")
    methods.set_defaults(handler=_cmd_methods)

    demo = subparsers.add_parser("demo", help="similarities of a few STS-B test pairs next to their human scores")
    demo.add_argument("spec", nargs="?", default="minilm")
    demo.add_argument("--pairs", type=positive_int, default=DEMO_PAIRS, help=f"how many pairs to show (default {DEMO_PAIRS})")
    demo.set_defaults(handler=_cmd_demo)
