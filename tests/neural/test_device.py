"""Tests of embedlab.neural.device and the device-agnostic batched path: device choice, memory-budget
group sizing, split-and-retry on out-of-memory, no host round trip in the epochs, TF32 off.

No GPU here: device-agnosticism is checked by running the batched path with torch's default device set
to ``meta``, so any tensor the path creates without naming the model's device would be a meta tensor and
fail (or poison) the run; the CUDA-only checks at the end run where torch sees a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedlab.neural import batched, device, tuning
from embedlab.neural import frozen as frozen_module
from embedlab.neural.family import NeuralEmbedder
from embedlab.neural.tuning import embed_texts, embed_texts_variants, masked_lm_on
from embedlab.neural.options import NeuralOptions, resolve_parameter_names
from tolerance import TUNED_COSINE_FLOOR

HEAD = tuple(resolve_parameter_names("head", 6))
BLOCK = tuple(resolve_parameter_names("block", 6))


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_device_values_and_sizes_are_checked() -> None:
    assert [device.check_device(value) for value in ("auto", "CPU", "cuda", "cuda:1")] == ["auto", "cpu", "cuda", "cuda:1"]
    for bad in ("gpu", "cuda:x", "mps"):
        with pytest.raises(ValueError, match="auto .* cpu, cuda or cuda:N"):
            device.check_device(bad)
    assert device.resolve_device("cpu") == torch.device("cpu")
    assert device.resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            device.resolve_device("cuda")
    assert device.parse_bytes("512MB") == 512 << 20
    assert device.parse_bytes("1.5GB") == 3 << 29
    assert device.parse_bytes("4096") == 4096
    assert device.check_memory("2g") == str(2 << 30)
    for bad in ("lots", "0", "-1GB"):
        with pytest.raises(ValueError):
            device.parse_bytes(bad)


def test_group_size_is_the_largest_within_the_budget() -> None:
    cpu = torch.device("cpu")
    shape = dict(hidden=384, vocabulary=30522, position_budget=256)
    assert device.group_positions_for(None, cpu, candidates=None, **shape) == device.CPU_GROUP_POSITIONS  # CPU default unchanged
    for candidates in (None, 256):
        for budget in (2 * 10**8, 3 * 10**8, 10**9):  # above the fixed part (logits slices, frozen forward)
            positions = device.group_positions_for(budget, cpu, candidates=candidates, **shape)
            assert 1 <= positions <= device.CPU_GROUP_POSITIONS
            if positions < device.CPU_GROUP_POSITIONS:
                assert device.group_bytes(positions, **shape, candidates=candidates) <= budget < device.group_bytes(positions + 1, **shape, candidates=candidates)
    assert device.group_positions_for(1, cpu, candidates=None, **shape) == 1  # never below one position (one text a group)
    assert device.group_positions_for(10**15, torch.device("cuda"), candidates=None, **shape) == device.CUDA_GROUP_POSITIONS


def test_masked_lm_stays_itself_on_its_own_device(masked_minilm) -> None:
    assert masked_lm_on(masked_minilm, torch.device("cpu")) is masked_minilm
    embedder = NeuralEmbedder("minilm", {"device": "cpu"})
    assert embedder.device == torch.device("cpu") and embedder.tuning_lm is embedder.masked_lm
    # CPU cache keys are those of before the device option existed (no device part)
    assert embedder.cache_key("a text") == NeuralEmbedder("minilm").cache_key("a text") or torch.cuda.is_available()
    with pytest.raises(ValueError, match="reference path runs on the CPU"):
        _ = NeuralEmbedder("minilm", {"device": "cuda", "path": "reference"}).device


@pytest.mark.parametrize(("params", "softmax"), [(HEAD, "exact"), (HEAD, "candidates"), (BLOCK, "exact")])
@pytest.mark.crosspath
def test_small_memory_budget_splits_groups_without_changing_embeddings(masked_minilm, sentences, monkeypatch, params, softmax) -> None:
    options = NeuralOptions(params, epochs=2, softmax=softmax, candidates=16)
    whole = embed_texts(masked_minilm, sentences, options)
    sizes: list[int] = []
    original = tuning.micro_tune_batched

    def counting(masked_lm, group, *args, **kwargs):
        sizes.append(len(group))
        return original(masked_lm, group, *args, **kwargs)

    monkeypatch.setattr(tuning, "micro_tune_batched", counting)
    budget = device.group_bytes(8, masked_minilm.hidden_size, 30522, device.CPU_POSITION_BUDGET, 16 if softmax == "candidates" else None)
    split = embed_texts(masked_minilm, sentences, options, memory=str(budget))
    assert sizes == [1, 1, 1]  # every sentence has more than 8 masked positions: one text a group
    assert (cosine(whole, split) >= TUNED_COSINE_FLOOR).all()  # tuned in other groups (docs/neural.md)


@pytest.mark.crosspath
def test_out_of_memory_splits_the_group_and_retries(masked_minilm, sentences, monkeypatch) -> None:
    options = NeuralOptions(HEAD, epochs=2)
    whole = embed_texts(masked_minilm, sentences, options)
    attempts: list[tuple[int, int]] = []
    original = tuning.micro_tune_batched

    def short_of_memory(masked_lm, group, run_options, position_budget, need_plain, store=None):
        attempts.append((len(group), position_budget))
        if len(group) > 1 or position_budget > 64:  # a simulated CUDA allocator failure
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB (simulated)")
        return original(masked_lm, group, run_options, position_budget=position_budget, need_plain=need_plain, store=store)

    monkeypatch.setattr(tuning, "micro_tune_batched", short_of_memory)
    retried = embed_texts(masked_minilm, sentences, options)
    # 3 texts → halves [0] and [1, 2] → [1], [2]; each single text halves its logits slices 256 → 128 → 64
    assert attempts[0] == (3, 256) and attempts[1:4] == [(1, 256), (1, 128), (1, 64)]
    assert sum(1 for size, budget in attempts if budget == 64) == 3
    assert (cosine(whole, retried) >= TUNED_COSINE_FLOOR).all()  # retried in halves: other groups

    def never_fits(masked_lm, group, run_options, position_budget, need_plain, store=None):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes")

    monkeypatch.setattr(tuning, "micro_tune_batched", never_fits)
    with pytest.raises(MemoryError, match=r"text 7 \(\d+ masked positions\) does not fit in memory on cpu"):
        embed_texts(masked_minilm, sentences[:1], options, indices=[7])

    def other_error(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(tuning, "micro_tune_batched", other_error)
    with pytest.raises(RuntimeError, match="shape mismatch"):  # only allocation failures are retried
        embed_texts(masked_minilm, sentences[:1], options)


@pytest.mark.parametrize(("params", "softmax", "variants"), [(HEAD, "exact", ("neural",)), (HEAD, "candidates", ("neural",)), (BLOCK, "exact", ("neural", "avg-diff"))])
def test_batched_path_creates_every_tensor_on_the_models_device(masked_minilm, sentences, monkeypatch, params, softmax, variants) -> None:
    """With torch's default device ``meta``, a tensor made without the model's device would be meta:
    the run would fail (meta tensors hold no data) or differ. Host-built inputs are made on the CPU on purpose."""
    options = NeuralOptions(params, epochs=2, softmax=softmax, candidates=16)
    expected = embed_texts_variants(masked_minilm, sentences[:2], options, variants)
    original, padded = tuning.micro_tune_batched, frozen_module.padded_inputs

    def on_meta_default(*args, **kwargs):
        with torch.device("meta"):
            return original(*args, **kwargs)

    def on_host(*args, **kwargs):  # tokenised inputs are host data by design, moved to the device after
        with torch.device("cpu"):
            return padded(*args, **kwargs)

    monkeypatch.setattr(tuning, "micro_tune_batched", on_meta_default)
    monkeypatch.setattr(frozen_module, "padded_inputs", on_host)
    found = embed_texts_variants(masked_minilm, sentences[:2], options, variants)
    for variant in variants:
        assert np.array_equal(found[variant], expected[variant])


@pytest.mark.parametrize("softmax", ["exact", "candidates"])
def test_epochs_read_nothing_back_to_the_host(masked_minilm, sentences, monkeypatch, softmax) -> None:
    """Inside the epochs (AdamW steps, exact and candidate gradients) no tensor is read to the host:
    every way a value leaves the device (item, tolist, cpu, numpy, bool/int/float) raises while they run."""
    options = NeuralOptions(HEAD, epochs=3, softmax=softmax, candidates=16)
    expected = embed_texts(masked_minilm, sentences[:2], options)
    inside = [0]
    calls = [0]

    def guarded(function):
        def run(*args, **kwargs):
            inside[0] += 1
            calls[0] += 1
            try:
                return function(*args, **kwargs)
            finally:
                inside[0] -= 1
        return run

    for name in ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__"):
        method = getattr(torch.Tensor, name)

        def refusing(self, *args, _method=method, _name=name, **kwargs):
            if inside[0]:
                raise AssertionError(f"Tensor.{_name} inside the epoch loop: a host round trip")
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, refusing)
    monkeypatch.setattr(batched.BatchedAdamW, "step", guarded(batched.BatchedAdamW.step))
    monkeypatch.setattr(batched, "_exact_gradients", guarded(batched._exact_gradients))
    monkeypatch.setattr(batched.GroupCandidates, "gradients", guarded(batched.GroupCandidates.gradients))
    found = embed_texts(masked_minilm, sentences[:2], options)
    assert calls[0] >= 3 + (2 if softmax == "candidates" else 3)  # the guards did run: steps and gradient epochs
    assert np.array_equal(found, expected)


def test_micro_tuning_runs_without_tf32_and_restores_the_setting(masked_minilm, sentences, monkeypatch) -> None:
    seen: list[str] = []
    original = batched._micro_tune_batched

    def recording(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return original(*args, **kwargs)

    monkeypatch.setattr(batched, "_micro_tune_batched", recording)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # would allow TF32 products on a GPU
    try:
        embed_texts(masked_minilm, sentences[:1], NeuralOptions(HEAD, epochs=1))
        assert seen == ["highest"] and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def _without_sync(function):
    """``function`` run with CUDA's sync debug mode at "error": any host round trip inside it raises."""
    def wrapped(*args, **kwargs):
        torch.cuda.set_sync_debug_mode("error")
        try:
            return function(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    return wrapped


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("softmax", ["exact", "candidates"])
@pytest.mark.crosspath
def test_cuda_agrees_with_cpu_and_never_syncs_in_the_epochs(masked_minilm, sentences, monkeypatch, softmax) -> None:
    options = NeuralOptions(HEAD, epochs=3, softmax=softmax)
    on_cpu = embed_texts(masked_minilm, sentences, options)
    on_cuda_lm = masked_lm_on(masked_minilm, torch.device("cuda"))
    # AdamW's steps and every epoch's gradients (exact, and the candidate epochs after epoch 1 built the sets)
    for owner, name in ((batched.BatchedAdamW, "step"), (batched, "_exact_gradients"), (batched.GroupCandidates, "gradients")):
        monkeypatch.setattr(owner, name, _without_sync(getattr(owner, name)))
    on_cuda = embed_texts(on_cuda_lm, sentences, options)
    assert (cosine(on_cpu, on_cuda) >= 0.9999).all()  # other kernels and transcendental functions (docs/neural.md: measured ≥ 0.9999999)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("softmax", ["exact", "candidates"])
@pytest.mark.crosspath
def test_cuda_text_alone_equals_the_text_in_a_batch(masked_minilm, sentences, softmax) -> None:
    on_cuda_lm = masked_lm_on(masked_minilm, torch.device("cuda"))
    options = NeuralOptions(HEAD, epochs=3, softmax=softmax)
    together = embed_texts(on_cuda_lm, sentences, options)
    alone = np.concatenate([embed_texts(on_cuda_lm, [sentence], options) for sentence in sentences])
    assert (cosine(alone, together) >= TUNED_COSINE_FLOOR).all()  # tuned alone vs in a group
