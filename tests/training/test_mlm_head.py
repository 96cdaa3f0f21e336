"""Tests of embedlab.training.mlm_head: BERT masking, cached encoder features, deterministic resumable training, the CLI."""

from __future__ import annotations

import argparse

import pytest
import torch
from mlm_helpers import tiny_bert

from embedlab.neural.head import HEAD_TENSOR_NAMES, IGNORE_LABEL, load_masked_lm, read_head_file
from embedlab.runtime.memo import clear
from embedlab.training.mlm_head import mask_blocks, masked_features, train_head
from embedlab.training.mlm_head_settings import HeadTrainingConfig


@pytest.fixture(autouse=True)
def _fresh_loaded_models():
    clear()
    yield
    clear()


def test_mask_blocks_standard_bert_masking() -> None:
    from embedlab.models.loading import load_model

    tokenizer = load_model("minilm", device="cpu").tokenizer
    generator = torch.Generator().manual_seed(1)
    body = torch.randint(1000, 2000, (200, 126), generator=generator)
    blocks = torch.cat([torch.full((200, 1), tokenizer.cls_token_id), body, torch.full((200, 1), tokenizer.sep_token_id)], dim=1)
    inputs, labels = mask_blocks(blocks, tokenizer, seed=0)
    chosen = labels != IGNORE_LABEL
    assert not chosen[:, 0].any() and not chosen[:, -1].any()
    assert abs(chosen.float().mean().item() * 128 / 126 - 0.15) < 0.01
    assert torch.equal(labels[chosen], blocks[chosen])
    assert torch.equal(inputs[~chosen], blocks[~chosen])
    masked = (inputs[chosen] == tokenizer.mask_token_id).float().mean().item()
    kept = (inputs[chosen] == blocks[chosen]).float().mean().item()
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02  # random replacements: the remaining ~10%
    again_inputs, again_labels = mask_blocks(blocks, tokenizer, seed=0)
    assert torch.equal(inputs, again_inputs) and torch.equal(labels, again_labels)


def test_encoder_features_are_computed_once_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    tiny_bert(tmp_path / "no-head", with_head=False)
    config = HeadTrainingConfig(model=str(tmp_path / "no-head"), valid_tokens=1500)
    masked_lm = load_masked_lm(config.model, head="untrained")
    hidden, labels = masked_features(masked_lm, "valid", config, seed=1, max_tokens=config.valid_tokens, show_progress=False)
    assert hidden.shape == (len(labels), 32) and (labels != IGNORE_LABEL).all()
    assert abs(len(labels) / (1500 // 126 * 126) - 0.15) < 0.03  # 15 % of the text tokens of the blocks

    def no_encoding(*args, **kwargs):
        raise AssertionError("cached encoder features were computed again")

    monkeypatch.setattr(masked_lm.model.bert, "forward", no_encoding)
    again_hidden, again_labels = masked_features(masked_lm, "valid", config, seed=1, max_tokens=config.valid_tokens, show_progress=False)
    assert torch.equal(again_hidden, hidden) and torch.equal(again_labels, labels)


def test_training_is_deterministic_and_resumes_exactly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    tiny_bert(tmp_path / "no-head", with_head=False)
    # ~225 masked training positions: 4 steps an epoch still make a schedule that a lost optimizer state, an
    # unreplayed learning-rate schedule or a reshuffled epoch order changes; 500 valid tokens only feed the log
    config = HeadTrainingConfig(model=str(tmp_path / "no-head"), train_tokens=1500, valid_tokens=500, epochs=2, batch_size=64)
    straight = train_head(config, checkpoint_dir=None, show_progress=False, log=lambda _: None)
    assert straight.history[1]["train_loss"] < straight.history[0]["train_loss"]
    checkpoints = tmp_path / "checkpoints"

    class Interrupted(Exception):
        pass

    def stop_after_first_epoch(message: str) -> None:
        if message.startswith("epoch 1:"):
            raise Interrupted

    with pytest.raises(Interrupted):
        train_head(config, checkpoint_dir=checkpoints, show_progress=False, log=stop_after_first_epoch)
    messages: list[str] = []
    resumed = train_head(config, checkpoint_dir=checkpoints, show_progress=False, log=messages.append)
    assert any("resumed" in message for message in messages)
    assert [entry["epoch"] for entry in resumed.history] == [1, 2]
    for name in HEAD_TENSOR_NAMES:
        assert torch.equal(straight.tensors[name], resumed.tensors[name]), name


def test_cli_trains_and_writes_head(tmp_path, monkeypatch, capsys) -> None:
    from embedlab.cli.neural import add_cli

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    tiny_bert(tmp_path / "no-head", with_head=False)
    parser = argparse.ArgumentParser(prog="embedlab")
    add_cli(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "tiny_head.safetensors"
    args = parser.parse_args(["mlm-head", "train", str(tmp_path / "no-head"), "--train-tokens", "2000", "--valid-tokens", "1000", "--epochs", "1", "--out", str(out), "--no-progress"])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    assert "untrained head: top-1" in printed and "trained head:" in printed
    tensors, metadata = read_head_file(out)
    assert "--train-tokens 2000" in metadata["command"]
    loaded = load_masked_lm(str(tmp_path / "no-head"), head=str(out))
    assert loaded.head_origin.startswith("file:")
    assert torch.equal(dict(loaded.model.named_parameters())["cls.predictions.bias"], tensors["cls.predictions.bias"])
    missing = parser.parse_args(["mlm-head", "train", str(tmp_path / "nowhere"), "--no-progress"])
    assert missing.handler(missing) == 2
