"""``embedlab methods`` (what can be asked for: families, options, presets, models) and ``embedlab demo``
(how a method behaves at a glance: a few STS-B test pairs, similarity next to the human score)."""

from __future__ import annotations

import argparse

from embedlab.cli.arguments import add_format, add_quiet, positive_int

DEMO_PAIRS = 12


def method_rows() -> list[list[str]]:
    """What can be asked for, one row per family option, preset and named model: kind, name, spec
    (default or value), description."""
    from embedlab.models.named import NAMED_MODELS, available_models
    from embedlab.registry import FAMILIES, PRESETS
    from embedlab.spec import POOLED

    rows = []
    for name, family in FAMILIES.items():
        shown = "MODEL[:k=v,...]" if name == POOLED else f"{name}:MODEL[,k=v,...]"
        rows.append(["family", name, shown, family.help])
        for key, option in family.options.items():
            choices = f" ({'|'.join(option.choices)})" if option.choices else ""
            rows.append(["option", f"{name}.{key}", f"{key}={option.default}{choices}", option.help])
    rows += [["preset", name, spec, why] for name, (spec, why) in PRESETS.items()]
    installed = set(available_models())
    rows += [["model", name, name, model.description + ("" if name in installed else " [not installed]")]
             for name, model in NAMED_MODELS.items()]
    return rows


def _cmd_methods(args: argparse.Namespace) -> int:
    from embedlab.results.tables import render

    if args.format in ("table", "markdown"):
        print("Method spec grammar: MODEL[:k=v,...] | FAMILY:MODEL[,k=v,...] ; '+' between specs concatenates; "
              "a preset name loads its spec.\n")
    print(render(("kind", "name", "spec", "description"), method_rows(), args.format))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Score a few STS-B test pairs with a method and print each score beside the human score."""
    from scipy.stats import spearmanr

    import embedlab
    from embedlab.data.sts import stsb

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
    add_format(methods)
    add_quiet(methods)
    methods.set_defaults(handler=_cmd_methods)

    demo = subparsers.add_parser("demo", help="similarities of a few STS-B test pairs next to their human scores")
    demo.add_argument("spec", nargs="?", default="minilm", help="method spec (default minilm)")
    demo.add_argument("--pairs", type=positive_int, default=DEMO_PAIRS, help=f"how many pairs to show (default {DEMO_PAIRS})")
    add_quiet(demo)
    demo.set_defaults(handler=_cmd_demo)
