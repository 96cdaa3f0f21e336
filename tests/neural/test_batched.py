"""Tests of embedlab.neural.batched: row-wise AdamW and the batched path equal to the per-text reference (Appendix B)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from embedlab.neural.adamw import BatchedAdamW
from embedlab.neural.candidate_epochs import chunk_texts
from embedlab.neural.frozen import frozen_features, same_shape_batches
from embedlab.neural.inputs import BLUEPRINTS, text_inputs
from embedlab.neural.tuning import embed_texts
from embedlab.neural.options import NeuralOptions, resolve_parameter_names
from tolerance import UNIT_ATOL


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_batched_adamw_equals_torch_adamw_per_row() -> None:
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(3, 5, generator=generator)
    grads = [torch.randn(3, 5, generator=generator) for _ in range(6)]
    rows = [torch.nn.Parameter(start[index].clone()) for index in range(3)]
    reference = torch.optim.AdamW(rows, lr=1e-2)
    batched = start.clone()
    optimizer = BatchedAdamW([batched], lr=1e-2)
    for grad in grads:
        for index, row in enumerate(rows):
            row.grad = grad[index].clone()
        reference.step()
        optimizer.step([grad])
    assert torch.equal(torch.stack([row.detach() for row in rows]), batched)


def test_chunks_cut_where_padding_or_size_would_exceed_their_bounds() -> None:
    positions, sizes = [35, 42, 35, 70], [500, 600, 520, 1000]
    # sorted (35, 500), (35, 520), (42, 600): padded 3·42·600 = 75,600 ≤ 1.25 · 60,900 real; adding
    # (70, 1000) would pad to 4·70·1000 = 280,000 > 1.25 · 130,900
    assert chunk_texts(positions, sizes, hidden=384) == [[0, 2, 1], [3]]
    # at most two sets of 600 output embeddings of 384 values per chunk
    assert chunk_texts(positions, sizes, hidden=384, chunk_values=2 * 600 * 384) == [[0, 2], [1], [3]]


@pytest.mark.parametrize("preset", ["head", "block"])
@pytest.mark.crosspath
def test_batched_path_equals_per_text_reference(masked_minilm, sentences, preset: str) -> None:
    # 4 epochs keep the test short; the two paths follow the same steps whatever the epoch count
    options = NeuralOptions(tuple(resolve_parameter_names(preset, masked_minilm.num_layers)), epochs=4)
    reference = embed_texts(masked_minilm, sentences[:2], options, path="reference")
    batched = embed_texts(masked_minilm, sentences[:2], options, path="batched")
    # two implementations of the same steps: AdamW's normalised updates carry float32 rounding on through 4 epochs
    assert (cosine(reference, batched) >= 0.999).all()


@pytest.mark.crosspath
def test_width_norm_reruns_and_batch_composition(masked_minilm, sentences) -> None:
    options = NeuralOptions(tuple(resolve_parameter_names("head", masked_minilm.num_layers)), epochs=4)
    together = embed_texts(masked_minilm, sentences, options)
    assert together.shape == (3, 3 * 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    again = embed_texts(masked_minilm, sentences, options)
    assert np.array_equal(together, again)  # bit-identical by construction: the same grouping, kernels and threads
    alone = embed_texts(masked_minilm, sentences[1:2], options)
    reordered = embed_texts(masked_minilm, [sentences[2], sentences[1]], options)
    # unit vectors tuned in another group: products of other shapes, float32 rounding (docs/neural.md)
    assert np.allclose(alone[0], together[1], atol=UNIT_ATOL, rtol=0)
    assert np.allclose(reordered[1], together[1], atol=UNIT_ATOL, rtol=0)
    # different texts differ
    assert cosine(together[:1], together[1:2])[0] < 0.99


@pytest.mark.parametrize("block_mode", [False, True])
def test_texts_of_equal_length_share_a_frozen_forward_without_changing_their_features(masked_minilm, block_mode: bool) -> None:
    texts = ["Two dogs run through the snow.", "A man is playing a guitar on the stage.", "Two cats walk across the road."]  # 7, 10, 7 tokens
    inputs = [text_inputs(text, masked_minilm.tokenizer, masked_minilm.max_length, BLUEPRINTS, f"text {index}") for index, text in enumerate(texts)]
    assert same_shape_batches(inputs, token_budget=1024) == [[0, 2], [1]]
    together = frozen_features(masked_minilm, inputs, block_mode, need_plain=False)
    alone = [frozen_features(masked_minilm, [text], block_mode, need_plain=False) for text in inputs]
    # the features still come in text order, each text's equal to those of its own forward
    assert together.owner.tolist() == [index for index, part in enumerate(alone) for _ in part.labels]
    assert torch.equal(together.labels, torch.cat([part.labels for part in alone]))
    # equal up to float rounding: a batch of two may take other GEMM blocking than a batch of one (1e-6 on
    # 2 cores, 1.2e-5 measured with 16 threads); a text mixed up with another would differ by O(1)
    assert (together.features - torch.cat([part.features for part in alone])).abs().max() <= 1e-4


@pytest.mark.crosspath
def test_long_text_is_micro_tuned_over_its_chunks_on_both_paths(masked_minilm, sentences) -> None:
    short = dataclasses.replace(masked_minilm, max_length=16)  # 14 text tokens per chunk: three chunks
    text = " ".join(sentences)
    options = NeuralOptions(tuple(resolve_parameter_names("head", short.num_layers)), epochs=3)
    batched = embed_texts(short, [text], options)
    reference = embed_texts(short, [text], options, path="reference")
    assert (cosine(batched, reference) >= 0.999).all()  # as above: the two paths' rounding grows through the AdamW steps
    # the embedding of the whole text is not that of any one chunk alone
    first = embed_texts(short, [sentences[0]], options)
    assert cosine(batched, first)[0] < 0.999
