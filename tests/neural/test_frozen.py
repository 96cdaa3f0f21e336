"""The frozen forward shared by neural specs with the same features, and in a lower compute."""

import numpy as np
import pytest

from embedlab.evaluation.scoring import cosines
from embedlab.models.precision import native_bf16
from embedlab.neural import frozen
from embedlab.neural.family import NeuralEmbedder, NeuralMethod
from embedlab.registry import parse

needs_native_bf16 = pytest.mark.skipif(not native_bf16("cpu"), reason="this CPU has no native bf16 (AVX-512 BF16 or AMX): torch would emulate it")


@pytest.fixture
def forwarded(monkeypatch):
    """The texts each frozen forward ran over, in order (the forwards counted at their one entry point)."""
    texts: list[int] = []
    original = frozen._forward_states

    def counting(masked_lm, group, *args, **kwargs):
        texts.append(len(group))
        return original(masked_lm, group, *args, **kwargs)

    monkeypatch.setattr(frozen, "_forward_states", counting)
    return texts


def test_specs_differing_after_the_features_share_one_forward(masked_minilm, sentences, isolated_cache, forwarded) -> None:
    exact = NeuralEmbedder("minilm", {"epochs": "2"}).embed(sentences[:2])
    assert forwarded == [2]
    candidates = NeuralEmbedder("minilm", {"epochs": "2", "softmax": "candidates"}).embed(sentences[:2])
    assert forwarded == [2]  # softmax= acts after the features: no second forward
    assert 0.99 < cosines(exact, candidates).min() < 1  # its own tuning, on the shared features
    alone = NeuralEmbedder("minilm", {"epochs": "2"}, use_cache=False).embed(sentences[:2])
    assert np.array_equal(alone, exact)  # features read back are the computed ones, bit for bit (float32 stored as is)
    NeuralEmbedder("minilm", {"epochs": "2", "skip-blueprint": "3"}).embed(sentences[:1])
    NeuralEmbedder("minilm", {"epochs": "2", "params": "block"}).embed(sentences[:1])
    assert forwarded == [2, 2, 1, 1]  # other rows, other features: forwards of their own


def test_fp32_identities_are_those_before_dtype_existed(masked_minilm, sentences) -> None:
    # cache keys and the fingerprint as at c9e6ee2 (strings of content hashes: the same on every machine)
    assert NeuralEmbedder("minilm", {"epochs": "3"}).cache_key(sentences[0]) == "41fa13ccc83d236a46e7eae8e807935e"
    assert NeuralEmbedder("minilm", {"epochs": "3", "softmax": "candidates", "dtype": "fp32"}).cache_key(sentences[0]) == "36526dc97bbe55fa2ebd7df560a370c9"
    plain, bf16 = NeuralMethod(parse("neural:minilm")), NeuralMethod(parse("neural:minilm,dtype=bf16"))
    assert bf16.fingerprint == plain.fingerprint + "-bf16" and "-" in plain.fingerprint and not plain.fingerprint.endswith("fp32")
    assert NeuralEmbedder("minilm", {"epochs": "3", "dtype": "bf16"}).cache_key(sentences[0]) != "41fa13ccc83d236a46e7eae8e807935e"


def test_lower_compute_needs_the_batched_path(masked_minilm, sentences) -> None:
    with pytest.raises(ValueError, match="dtype=bf16 runs on the batched path"):
        NeuralEmbedder("minilm", {"dtype": "bf16", "path": "reference"}, use_cache=False).embed(sentences[:1])
    assert NeuralEmbedder("minilm", {"dtype": "auto", "path": "reference"}).options.compute == "fp32"


@needs_native_bf16
def test_bf16_stays_within_the_budget_of_fp32(masked_minilm, sentences, isolated_cache, forwarded) -> None:
    options = {"epochs": "2", "softmax": "candidates"}
    fp32 = NeuralEmbedder("minilm", options).embed(sentences[:2])
    bf16 = NeuralEmbedder("minilm", {**options, "dtype": "bf16"}).embed(sentences[:2])
    agreement = cosines(fp32, bf16)
    assert agreement.min() > 0.99 and not np.array_equal(fp32, bf16)  # the documented budget; it did run in bf16
    assert forwarded == [2, 2]  # a compute's features are its own


@pytest.mark.parametrize("block_mode", [False, True])
def test_forward_batches_run_one_per_core_with_one_threads_numbers(masked_minilm, sentences, monkeypatch, block_mode) -> None:
    import torch

    from embedlab.neural.inputs import BLUEPRINTS, text_inputs

    group = [text_inputs(text, masked_minilm.tokenizer, masked_minilm.max_length, BLUEPRINTS, "t") for text in sentences]
    streams: list[int] = []
    original = frozen.ordered_map
    monkeypatch.setattr(frozen, "ordered_map", lambda work, items, count, ahead: streams.append(count) or original(work, items, count, ahead))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = frozen.frozen_features(masked_minilm, group, block_mode, need_plain=False).features
        torch.set_num_threads(2)
        together = frozen.frozen_features(masked_minilm, group, block_mode, need_plain=False).features
    finally:
        torch.set_num_threads(threads)
    assert streams == [1, 2]  # three texts of three lengths: three batches, two at a time on two threads
    assert torch.equal(alone, together)  # bit for bit: an op's result does not depend on the threads computing it
