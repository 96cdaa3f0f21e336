"""``embedlab explain`` and ``embedlab train-token-weights`` (argument defaults)."""

from __future__ import annotations

import argparse

import embedlab
from embedlab.cli.app import build_parser
from embedlab.training.token_weight_settings import TrainingConfig


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


def test_bertscore_cli(tmp_path, capsys):
    from embedlab.cli.app import main

    cands, refs = ["A man plays a guitar.", "The cat sleeps.", "Stocks fell sharply today."], ["Someone plays music.", "A cat is asleep.", "A dog runs."]
    (tmp_path / "cands.txt").write_text("\n".join(cands) + "\n")
    (tmp_path / "refs.txt").write_text("\r\n".join(refs))  # Windows line ends, no final newline
    out = tmp_path / "scores.tsv"
    assert main(["bertscore", "--cands", str(tmp_path / "cands.txt"), "--refs", str(tmp_path / "refs.txt"), "--idf",
                 "--layer", "4", "--out", str(out), "--quiet"]) == 0
    precision, recall, f1 = embedlab.bertscore(cands, refs, layer=4, idf=True)
    assert f"minilm L4 idf: P: {precision.mean():.6f} R: {recall.mean():.6f} F1: {f1.mean():.6f}" in capsys.readouterr().out
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows[0] == ["line", "P", "R", "F1"] and len(rows) == 4
    assert [float(value) for value in rows[2][1:]] == [round(float(part[1]), 6) for part in (precision, recall, f1)]


def test_bertscore_cli_bad_input(tmp_path, capsys):
    from embedlab.cli.app import main

    (tmp_path / "cands.txt").write_text("one\ntwo\n")
    (tmp_path / "refs.txt").write_text("one\n")
    (tmp_path / "gap.txt").write_text("one\n \n")
    (tmp_path / "two.txt").write_text("uno\ndos\n")
    cases = [
        (["--cands", "cands.txt", "--refs", "refs.txt"], "cands.txt has 2 lines but .*refs.txt has 1"),
        (["--cands", "gap.txt", "--refs", "two.txt"], r"gap.txt, line 2: empty candidate"),
        (["--cands", "two.txt", "--refs", "gap.txt"], r"gap.txt, line 2: empty reference"),
        (["--cands", "cands.txt", "--refs", "two.txt", "--layer", "9"], "layer 9 is beyond minilm's depth"),
    ]
    import re

    for arguments, message in cases:
        arguments = [str(tmp_path / value) if value.endswith(".txt") else value for value in arguments]
        assert main(["bertscore", *arguments, "--quiet"]) == 2
        error = capsys.readouterr().err
        assert re.search(message, error) and error.count("\n") == 1, error
