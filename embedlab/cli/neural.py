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

from embedlab.runtime.outputs import check_output_file
from embedlab.runtime.progress import status
from embedlab.cli.arguments import (ConfigOption, add_config_options, add_out, add_quiet, config_from_arguments, non_negative_float,
                                    non_negative_int, positive_float, positive_int, reproducing_arguments)

DEFAULTS_NOTE = "defaults reproduce the shipped MiniLM head exactly"
# HeadTrainingConfig's fields the command sets, in the order of its help (and of the command a head records)
HEAD_OPTIONS = (
    ConfigOption("--seed", "seed", non_negative_int, "seed of masking, initialisation and batch order"),
    ConfigOption("--epochs", "epochs", positive_int, "passes over the training tokens"),
    ConfigOption("--train-tokens", "train_tokens", positive_int, "WikiText-2 train tokens used", show_default=False),
    ConfigOption("--valid-tokens", "valid_tokens", positive_int, "WikiText-2 valid tokens evaluated", show_default=False),
    ConfigOption("--block-tokens", "block_tokens", positive_int, "tokens per input, [CLS]/[SEP] included", show_default=False),
    ConfigOption("--batch-size", "batch_size", positive_int, "masked positions per step", show_default=False),
    ConfigOption("--lr", "learning_rate", positive_float, "AdamW learning rate"),
    ConfigOption("--weight-decay", "weight_decay", non_negative_float, "AdamW weight decay"),
    ConfigOption("--threads", "threads", positive_int, "torch threads (fixed, so that reruns give identical heads)", show_default=False),
)


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
    add_config_options(train, defaults, HEAD_OPTIONS)
    train.add_argument("--checkpoint-dir", type=Path, default=None, help="folder for resumable checkpoints (default: in the embedlab cache)")
    add_quiet(train)
    train.set_defaults(handler=_train_handler)


def _train_handler(args: argparse.Namespace) -> int:
    from embedlab.neural.head import HeadError
    from embedlab.runtime.settings import cache_dir
    from embedlab.training.mlm_head import default_head_filename, save_head, train_head
    from embedlab.training.mlm_head_settings import HeadTrainingConfig

    config = config_from_arguments(HeadTrainingConfig, args, HEAD_OPTIONS)
    out = args.out or Path(default_head_filename(args.model))
    for written in (out, out.with_suffix(".json")):  # checked before the hours of training, not after
        check_output_file(written)
    reproducing = reproducing_arguments(config, HeadTrainingConfig(model=config.model), HEAD_OPTIONS)
    command = "embedlab mlm-head train " + " ".join(shlex.quote(part) for part in reproducing)
    checkpoint_dir = args.checkpoint_dir or cache_dir("mlm_head", "checkpoints")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")
            result = train_head(config, checkpoint_dir=checkpoint_dir, command=command, log=status)
    except (HeadError, FileNotFoundError, LookupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    save_head(result, out)
    print(f"masked-token accuracy on WikiText-2 valid ({result.metadata['valid_masked_positions']} masked positions):")
    print(f"  untrained head: top-1 {result.untrained_accuracy[0]:.4f}  top-5 {result.untrained_accuracy[1]:.4f}")
    print(f"  trained head:   top-1 {result.trained_accuracy[0]:.4f}  top-5 {result.trained_accuracy[1]:.4f}")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0

