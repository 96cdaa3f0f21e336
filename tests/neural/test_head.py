"""Tests of embedlab.neural.head: head detection and loading (checkpoint, shipped, untrained, file)."""

from __future__ import annotations

import json

import pytest
import torch
from mlm_helpers import tiny_bert

from embedlab.neural import head as mlm_head
from embedlab.neural.head import HEAD_TENSOR_NAMES, HeadError, load_masked_lm, read_head_file
from embedlab.runtime.memo import clear


@pytest.fixture(autouse=True)
def _fresh_loaded_models():
    clear()
    yield
    clear()


def test_real_head_is_used_unchanged(tmp_path) -> None:
    saved = tiny_bert(tmp_path / "with-head", with_head=True)
    loaded = load_masked_lm(str(tmp_path / "with-head"))
    assert loaded.checkpoint_has_head and loaded.head_origin == "checkpoint"
    state = dict(loaded.model.named_parameters())
    original = dict(saved.named_parameters())
    for name in HEAD_TENSOR_NAMES:
        assert torch.equal(state[name], original[name]), name
    untrained = load_masked_lm(str(tmp_path / "with-head"), head="untrained")
    assert untrained.head_hash != loaded.head_hash


def test_missing_head_is_detected_and_never_silently_random(tmp_path) -> None:
    tiny_bert(tmp_path / "no-head", with_head=False)
    with pytest.raises(HeadError, match="mlm-head train"):
        load_masked_lm(str(tmp_path / "no-head"))
    first = load_masked_lm(str(tmp_path / "no-head"), head="untrained")
    assert not first.checkpoint_has_head and first.head_origin == "untrained"
    assert load_masked_lm(str(tmp_path / "no-head"), head="untrained") is first  # loaded once per process
    clear()
    second = load_masked_lm(str(tmp_path / "no-head"), head="untrained")
    assert second is not first and first.head_hash == second.head_hash  # the untrained head is seeded
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
    assert metadata["model_fingerprint"] == loaded.transformer_fingerprint
    assert metadata["command"].startswith("embedlab mlm-head train minilm")
    assert float(metadata["trained_top1"]) > float(metadata["untrained_top1"]) + 0.1
    sidecar = json.loads(file.with_suffix(".json").read_text())
    assert sidecar["trained_top5"] == metadata["trained_top5"]
    untrained = load_masked_lm("minilm", head="untrained")
    assert untrained.head_hash != loaded.head_hash


def test_head_file_for_another_model_is_refused(tmp_path) -> None:
    from safetensors.torch import save_file

    tiny_bert(tmp_path / "no-head", with_head=False)
    untrained = load_masked_lm(str(tmp_path / "no-head"), head="untrained")
    tensors = {name: tensor.detach().clone() for name, tensor in untrained.model.named_parameters() if name in HEAD_TENSOR_NAMES}
    save_file(tensors, str(tmp_path / "other.safetensors"), metadata={"model_fingerprint": "not-this-model"})
    with pytest.raises(HeadError, match="trained for model fingerprint not-this-model"):
        load_masked_lm(str(tmp_path / "no-head"), head=str(tmp_path / "other.safetensors"))
    with pytest.raises(HeadError, match="not found"):
        load_masked_lm(str(tmp_path / "no-head"), head=str(tmp_path / "missing.safetensors"))
