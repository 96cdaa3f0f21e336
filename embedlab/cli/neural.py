"""CLI for the neural-embeddings area: ``embedlab mlm-head train MODEL`` (paper Appendix A).

The CLI app registers it through :func:`add_cli`. Embedding texts with ``neural:…`` specs goes through
the generic ``embedlab embed`` command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from embedlab import runtime
from embedlab.runtime.outputs import check_output_file
from embedlab.cli.arguments import add_out, add_quiet, non_negative_float, non_negative_int, positive_float, positive_int

if TYPE_CHECKING:  # the training module (and torch) load only when a command runs
    from embedlab.training.mlm_head_settings import HeadTrainingConfig

DEFAULTS_NOTE = "defaults reproduce the shipped MiniLM head exactly"


def add_cli(subparsers) -> None:
    """Register ``mlm-head train`` on the main parser's subcommands."""
    from embedlab.training.mlm_head_settings import HeadTrainingConfig

    defaults = HeadTrainingConfig(model="")
    head = subparsers.add_parser("mlm-head", help="masked-LM heads for encoders shipped without one")
    head_commands = head.add_subparsers(dest="mlm_head_command", required=True)
    train = head_commands.add_parser(
        "train",
        help="train a masked-LM head (encoder frozen) on WikiText-2 and report held-out masked-token accuracy",
        description=f"Train the head transform and output bias with the encoder frozen ({DEFAULTS_NOTE}).",
    )
    train.add_argument("model", help="model name (e.g. minilm), local folder or cached Hugging Face id")
    add_out(train, type=Path, default=None, help="head file to write (default: ./MODEL_mlm_head.safetensors)")
    train.add_argument("--seed", type=non_negative_int, default=defaults.seed, help=f"seed of masking, initialisation and batch order (default {defaults.seed})")
    train.add_argument("--epochs", type=positive_int, default=defaults.epochs, help=f"passes over the training tokens (default {defaults.epochs})")
    train.add_argument("--train-tokens", type=positive_int, default=defaults.train_tokens, help="WikiText-2 train tokens used")
    train.add_argument("--valid-tokens", type=positive_int, default=defaults.valid_tokens, help="WikiText-2 valid tokens evaluated")
    train.add_argument("--block-tokens", type=positive_int, default=defaults.block_tokens, help="tokens per input, [CLS]/[SEP] included")
    train.add_argument("--batch-size", type=positive_int, default=defaults.batch_size, help="masked positions per step")
    train.add_argument("--lr", type=positive_float, default=defaults.learning_rate, help=f"AdamW learning rate (default {defaults.learning_rate})")
    train.add_argument("--weight-decay", type=non_negative_float, default=defaults.weight_decay, help=f"AdamW weight decay (default {defaults.weight_decay})")
    train.add_argument("--threads", type=positive_int, default=defaults.threads, help="torch threads (fixed, so that reruns give identical heads)")
    train.add_argument("--checkpoint-dir", type=Path, default=None, help="folder for resumable checkpoints (default: in the embedlab cache)")
    add_quiet(train)
    train.set_defaults(handler=_train_handler)


def _train_handler(args: argparse.Namespace) -> int:
    from embedlab.neural.head import HeadError
    from embedlab.training.mlm_head import HeadTrainingConfig, default_head_filename, save_head, train_head
    from embedlab.runtime import cache_dir

    config = HeadTrainingConfig(
        model=args.model,
        seed=args.seed,
        block_tokens=args.block_tokens,
        train_tokens=args.train_tokens,
        valid_tokens=args.valid_tokens,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        weight_decay=args.weight_decay,
        threads=args.threads,
    )
    out = args.out or Path(default_head_filename(args.model))
    for written in (out, out.with_suffix(".json")):  # checked before the hours of training, not after
        check_output_file(written)
    command = "embedlab mlm-head train " + " ".join(shlex.quote(part) for part in _reproducing_arguments(config))
    checkpoint_dir = args.checkpoint_dir or cache_dir("mlm_head", "checkpoints")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")
            result = train_head(config, checkpoint_dir=checkpoint_dir, command=command, log=runtime.status)
    except (HeadError, FileNotFoundError, LookupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    save_head(result, out)
    print(f"masked-token accuracy on WikiText-2 valid ({result.metadata['valid_masked_positions']} masked positions):")
    print(f"  untrained head: top-1 {result.untrained_accuracy[0]:.4f}  top-5 {result.untrained_accuracy[1]:.4f}")
    print(f"  trained head:   top-1 {result.trained_accuracy[0]:.4f}  top-5 {result.trained_accuracy[1]:.4f}")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


def _reproducing_arguments(config: HeadTrainingConfig) -> list[str]:
    """The model plus every option that differs from the defaults (the head's metadata records it)."""
    from embedlab.training.mlm_head import HeadTrainingConfig

    defaults = HeadTrainingConfig(model=config.model)
    parts = [config.model]
    for option, field_name in (
        ("--seed", "seed"), ("--epochs", "epochs"), ("--train-tokens", "train_tokens"), ("--valid-tokens", "valid_tokens"),
        ("--block-tokens", "block_tokens"), ("--batch-size", "batch_size"), ("--lr", "learning_rate"),
        ("--weight-decay", "weight_decay"), ("--threads", "threads"),
    ):
        if getattr(config, field_name) != getattr(defaults, field_name):
            parts += [option, str(getattr(config, field_name))]
    return parts
