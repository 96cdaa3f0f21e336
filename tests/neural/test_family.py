"""Tests of embedlab.neural.family: the ``neural`` family's options, its per-text cache and orchestration."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedlab.neural.family import NEURAL_OPTIONS, NeuralEmbedder
from embedlab.neural.inputs import BLUEPRINTS
from embedlab.neural.options import NeuralOptions, block_vectors, resolve_parameter_names
from embedlab.neural.tuning import embed_texts
from embedlab.neural.variants import VARIANTS
from embedlab.runtime.cache.arrays import ArrayStore
from tolerance import UNIT_ATOL


def test_empty_text_is_rejected_with_its_index(masked_minilm) -> None:
    with pytest.raises(ValueError, match="text 3"):
        embed_texts(masked_minilm, ["   "], NeuralOptions(tuple(resolve_parameter_names("head", 6))), indices=[3])


def test_each_group_is_freed_before_the_heap_trim_check(masked_minilm, sentences, monkeypatch) -> None:
    """A long run's memory stays bounded: each group's run is gone when the heap is checked (and trimmed once it has
    grown) after it (SummEval's texts grew a run to 13.4 GB without trims; one trim gave back all but 0.78 GB)."""
    import gc

    from embedlab.neural import tuning
    from embedlab.neural.batched import BatchedRun

    runs_alive: list[int] = []
    monkeypatch.setattr(tuning, "trim_tuning_heap_if_grown", lambda: runs_alive.append(sum(type(item) is BatchedRun for item in gc.get_objects())))
    embed_texts(masked_minilm, sentences, NeuralOptions(tuple(resolve_parameter_names("head", 6)), epochs=1), group_positions=1)
    assert runs_alive == [0, 0, 0]  # one group per text here


def test_load_makes_the_lower_compute_copies_before_the_first_text(masked_minilm, sentences, tmp_path, monkeypatch) -> None:
    """``load()`` makes the bf16 model copy and output embeddings, so a timed run after it never casts them."""
    from embedlab.neural import vocabulary
    from embedlab.runtime.memo import memo

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    for made_once in ("neural.lowered_models", "neural.lowered_decoders"):
        memo(made_once).clear()  # not made by an earlier test
    embedder = NeuralEmbedder("minilm", {"epochs": "1", "dtype": "bf16", "softmax": "candidates"}).load()

    def no_cast(*args, **kwargs):
        raise AssertionError("cast during the run")

    monkeypatch.setattr(vocabulary, "lowered_copy", no_cast)
    monkeypatch.setattr(vocabulary, "lowered_decoder", no_cast)
    assert embedder.embed(sentences[:1]).shape == (1, embedder.dimension)


def test_embedder_options_and_cache(masked_minilm, sentences, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    embedder = NeuralEmbedder("minilm", {"epochs": "3", "skip-layer": "2"})
    assert list(embedder.options.params) == resolve_parameter_names("head", 6)[:2] and embedder.dimension == 768
    first = embedder.embed(sentences[:2] + sentences[:1])
    assert first.shape == (3, 768) and np.array_equal(first[0], first[2])
    files = sorted((tmp_path / "neural").rglob("*.safetensors"))
    assert len(files) == 2
    store = ArrayStore("neural")
    assert np.array_equal(store.load(embedder.cache_key(sentences[0])), first[0])
    assert np.array_equal(store.load(embedder.cache_key(sentences[1])), first[1])
    # a rerun reads the cache: identical numbers even if the model were to change
    second = NeuralEmbedder("minilm", {"epochs": "3", "skip-layer": "2"}).embed(sentences[:2])
    assert np.array_equal(second, first[:2])
    blueprint = NeuralEmbedder("minilm", {"epochs": "3", "skip-blueprint": "3"})
    assert blueprint.options.blueprints == BLUEPRINTS[:3]
    with pytest.raises(ValueError, match="unknown option"):
        NeuralEmbedder("minilm", {"epoch": "3"})
    with pytest.raises(ValueError, match="epochs"):
        NeuralEmbedder("minilm", {"epochs": "-1"})


def test_cache_key_names_options_path_and_text(masked_minilm, sentences) -> None:
    embedder = NeuralEmbedder("minilm", {"epochs": "3"})
    key = embedder.cache_key(sentences[0])
    assert key == NeuralEmbedder("minilm", {"epochs": "3"}).cache_key(sentences[0])
    assert key != embedder.cache_key(sentences[1])
    assert key != NeuralEmbedder("minilm", {"epochs": "4"}).cache_key(sentences[0])
    assert key != NeuralEmbedder("minilm", {"epochs": "3", "path": "reference"}).cache_key(sentences[0])
    assert key != NeuralEmbedder("minilm", {"epochs": "3", "head": "untrained"}).cache_key(sentences[0])


def test_damaged_cache_entry_is_recomputed(masked_minilm, sentences, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    embedder = NeuralEmbedder("minilm", {"epochs": "2"})
    first = embedder.embed(sentences[:1])
    file = ArrayStore("neural").path(embedder.cache_key(sentences[0]))
    payload = bytearray(file.read_bytes())
    payload[-1] ^= 0xFF  # flip bits of the array's last byte: the checksum no longer matches
    file.write_bytes(bytes(payload))
    with pytest.warns(RuntimeWarning, match="damaged cache file"):
        again = embedder.embed(sentences[:1])
    assert np.array_equal(again, first)
    assert np.array_equal(ArrayStore("neural").load(embedder.cache_key(sentences[0])), first[0])


@pytest.mark.crosspath
def test_one_tuning_run_caches_every_appendix_g_variant(masked_minilm, sentences, tmp_path, monkeypatch) -> None:
    import embedlab.neural.family as family

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    block = tuple(block_vectors(masked_minilm.num_layers))
    options = {"params": "block", "epochs": "2"}
    NeuralEmbedder("minilm", {**options, "variant": "cls-diff"}).embed(sentences[:2])
    assert len(list((tmp_path / "neural").rglob("*.safetensors"))) == 2 * 7  # two texts x (neural + six hidden-layer variants)

    # each variant computed on its own run, before micro-tuning is forbidden below
    direct = {variant: embed_texts(masked_minilm, sentences[:2], NeuralOptions(block, epochs=2, variant=variant)) for variant in VARIANTS}

    def no_tuning(*args, **kwargs):
        raise AssertionError("a variant of an already tuned text was micro-tuned again")

    monkeypatch.setattr(family, "embed_texts_variants", no_tuning)
    for variant in VARIANTS:
        cached = NeuralEmbedder("minilm", {**options, "variant": variant}).embed(sentences[:2])
        # unit vectors: the variants tuned in one run vs each in its own: float32 rounding
        assert np.allclose(cached, direct[variant], atol=UNIT_ATOL, rtol=0), variant


def test_options_are_declared_once() -> None:
    assert list(NEURAL_OPTIONS) == ["params", "epochs", "lr", "head", "skip-layer", "skip-blueprint", "variant", "path", "seed", "softmax", "candidates", "device", "dtype", "memory"]
    assert all(option.help for option in NEURAL_OPTIONS.values())
    assert NeuralEmbedder("minilm").values == {key: option.default for key, option in NEURAL_OPTIONS.items()}


def test_neural_family_specs(masked_minilm, sentences, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    from embedlab.registry import load
    from embedlab.spec import SpecError

    method = load("neural:minilm,epochs=2,lr=1e-2,params=head")
    assert method.spec == "neural:minilm,epochs=2"  # defaults dropped, canonical order
    vectors = method.encode(sentences[:2])
    assert vectors.shape == (2, 1152) and vectors.dtype == np.float32
    direct = NeuralEmbedder("minilm", {"epochs": "2"}).embed(sentences[:2])
    assert np.array_equal(vectors, direct)
    both = load("neural:minilm,epochs=2+minilm")
    assert both.encode(sentences[:2]).shape == (2, 1152 + 384)
    assert load("neural:minilm,skip-layer=1").spec == "neural:minilm,skip-layer=1"
    with pytest.raises(SpecError, match="skip-layer"):
        load("neural:minilm,skip-layer=5")


def test_auto_is_fp32_where_lower_compute_does_not_pay_for_micro_tuning() -> None:
    """dtype=auto keeps fp32 on the reference path and on CUDA (lower compute measured slower for micro-tuning on
    an H200: docs/records/bench_neural.md) without timing anything; elsewhere it is measured."""
    import warnings

    from embedlab.neural.family import neural_compute

    def never() -> int:
        raise AssertionError("the compute was measured")

    assert neural_compute("auto", "batched", torch.device("cuda"), never) == "fp32"  # no GPU needed: nothing runs
    assert neural_compute("auto", "reference", torch.device("cpu"), never) == "fp32"
    assert neural_compute("fp32", "batched", torch.device("cpu"), never) == "fp32"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU without native bf16 warns; an explicit dtype is kept as asked
        assert neural_compute("bf16", "batched", torch.device("cpu"), lambda: 384) == "bf16"
