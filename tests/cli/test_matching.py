"""``embedlab explain`` and ``embedlab train-token-weights`` (argument defaults)."""

from __future__ import annotations

import argparse

import embedlab
from embedlab.cli.app import build_parser
from embedlab.training.token_weights import TrainingConfig


def test_explain_cli(tmp_path, capsys):
    from embedlab.cli.matching import add_cli

    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "cli.png"
    args = parser.parse_args(["explain", "match:minilm,weights=none", "A cat sits.", "A dog sits.", "--out", str(out)])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    expected = embedlab.load("match:minilm,weights=none").similarity_pairs([("A cat sits.", "A dog sits.")])[0]
    assert f"similarity {expected:.4f}" in printed and "cat" in printed
    assert out.exists()


def test_train_token_weights_defaults_are_the_training_defaults():
    args = build_parser().parse_args(["train-token-weights", "minilm"])
    defaults = TrainingConfig(model="minilm")
    for name in ("steps", "batch_size", "learning_rate", "seed", "max_tokens", "min_chars", "checkpoint_every"):
        assert getattr(args, name) == getattr(defaults, name)
    assert args.resume and args.out is None
