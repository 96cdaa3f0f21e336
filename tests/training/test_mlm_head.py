"""Tests of embedlab.neural.head: head detection and loading, WikiText-2 preparation, head training."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest
import torch

from embedlab.neural import head as mlm_head
from embedlab.neural.head import (
    HEAD_TENSOR_NAMES,
    IGNORE_LABEL,
    HeadError,
    HeadTrainingConfig,
    detokenize_wikitext,
    load_masked_lm,
    mask_blocks,
    read_head_file,
    train_head,
)
from embedlab.models import resolve_model_path

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _tiny_bert(folder, with_head: bool, seed: int = 0):
    """A tiny randomly initialised BERT (MiniLM's tokenizer) saved with or without its masked-LM head."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    model = BertForMaskedLM(config)
    with torch.no_grad():  # make the head clearly not BERT's initialisation
        for name, parameter in model.named_parameters():
            if name.startswith("cls.predictions.transform.") or name == "cls.predictions.bias":
                parameter.uniform_(-0.5, 0.5)
    folder.mkdir(parents=True, exist_ok=True)
    if with_head:
        model.save_pretrained(folder)
    else:
        model.bert.save_pretrained(folder)
    source = resolve_model_path("minilm")
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    return model


@pytest.fixture(autouse=True)
def _fresh_loader_cache():
    mlm_head._MASKED_LM_CACHE.clear()
    yield
    mlm_head._MASKED_LM_CACHE.clear()


def test_detokenize_wikitext() -> None:
    line = " The role @-@ playing game sold 1 @,@ 000 copies at 3 @.@ 5 dollars , said <unk> . "
    assert detokenize_wikitext(line, "[UNK]") == "The role-playing game sold 1,000 copies at 3.5 dollars , said [UNK] ."


def test_mask_blocks_standard_bert_masking() -> None:
    from embedlab.models import load_model

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


def test_real_head_is_used_unchanged(tmp_path) -> None:
    saved = _tiny_bert(tmp_path / "with-head", with_head=True)
    loaded = load_masked_lm(str(tmp_path / "with-head"))
    assert loaded.checkpoint_has_head and loaded.head_origin == "checkpoint"
    state = dict(loaded.model.named_parameters())
    original = dict(saved.named_parameters())
    for name in HEAD_TENSOR_NAMES:
        assert torch.equal(state[name], original[name]), name
    untrained = load_masked_lm(str(tmp_path / "with-head"), head="untrained")
    assert untrained.head_hash != loaded.head_hash


def test_missing_head_is_detected_and_never_silently_random(tmp_path) -> None:
    _tiny_bert(tmp_path / "no-head", with_head=False)
    with pytest.raises(HeadError, match="mlm-head train"):
        load_masked_lm(str(tmp_path / "no-head"))
    first = load_masked_lm(str(tmp_path / "no-head"), head="untrained")
    assert not first.checkpoint_has_head and first.head_origin == "untrained"
    mlm_head._MASKED_LM_CACHE.clear()
    second = load_masked_lm(str(tmp_path / "no-head"), head="untrained")
    assert first.head_hash == second.head_hash  # the untrained head is seeded
    weights = dict(first.model.named_parameters())
    assert torch.equal(weights["cls.predictions.transform.LayerNorm.weight"], torch.ones(32))
    assert torch.equal(weights["cls.predictions.bias"], torch.zeros(30522))


def test_shipped_minilm_head(tmp_path) -> None:
    loaded = load_masked_lm("minilm")
    assert not loaded.checkpoint_has_head
    assert loaded.head_origin == "shipped:minilm_mlm_head.safetensors"
    file = mlm_head.RESOURCES / "minilm_mlm_head.safetensors"
    assert file.stat().st_size < 2_000_000
    tensors, metadata = read_head_file(file)
    assert set(tensors) == set(HEAD_TENSOR_NAMES)
    assert metadata["model_fingerprint"] == loaded.fingerprint
    assert metadata["command"].startswith("embedlab mlm-head train minilm")
    assert float(metadata["trained_top1"]) > float(metadata["untrained_top1"]) + 0.1
    sidecar = json.loads(file.with_suffix(".json").read_text())
    assert sidecar["trained_top5"] == metadata["trained_top5"]
    untrained = load_masked_lm("minilm", head="untrained")
    assert untrained.head_hash != loaded.head_hash


def test_training_is_deterministic_and_resumes_exactly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    _tiny_bert(tmp_path / "no-head", with_head=False)
    config = HeadTrainingConfig(model=str(tmp_path / "no-head"), train_tokens=3000, valid_tokens=1500, epochs=2, batch_size=64)
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
    _tiny_bert(tmp_path / "no-head", with_head=False)
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
