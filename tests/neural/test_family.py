"""Tests of embedlab.neural.core and embedlab.neural.family (neural-embeddings paper §2, Eq. 1, Appendix A, G)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from embedlab.neural.head import IGNORE_LABEL, load_masked_lm
from embedlab.neural.core import (
    BLUEPRINTS,
    BatchedAdamW,
    NeuralOptions,
    block_vectors,
    blueprint_rows,
    embed_texts,
    resolve_parameter_names,
    shared_run_variants,
    text_inputs,
    weight_change_embedding,
)
from embedlab.neural.family import NeuralEmbedder

MASK = -1
# Fig. 9 / Fig. 10 for a 6-token text, derived by hand: K = kept, M = masked; rows in blueprint, shift order.
FIG9_ROWS = [
    "KKMKKM", "MKKMKK", "KMKKMK",  # (2,1), shifts 0, 1, 2
    "KMKMKM", "MKMKMK",  # (1,1)
    "KMMKMM", "MKMMKM", "MMKMMK",  # (1,2)
    "KMMMKM", "MKMMMK", "MMKMMM", "MMMKMM",  # (1,3)
]

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Two dogs run through the snow.",
    "The stock market fell sharply on Tuesday after the announcement.",
]


@pytest.fixture(scope="module")
def minilm():
    return load_masked_lm("minilm")


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_blueprint_rows_match_figure_9_for_six_tokens() -> None:
    tokens = [11, 12, 13, 14, 15, 16]
    rows = blueprint_rows(tokens, BLUEPRINTS, MASK)
    assert len(rows) == 12
    for (inputs, labels), pattern in zip(rows, FIG9_ROWS):
        assert "".join("M" if token == MASK else "K" for token in inputs) == pattern
        for token, original, label in zip(inputs, tokens, labels):
            assert label == (original if token == MASK else IGNORE_LABEL)


def test_short_texts_get_fewer_rows() -> None:
    # 2 tokens: (2,1) shifts 0,1; (1,1) 0,1; (1,2) 0,1; (1,3) 0,1 -> 8 rows (Fig. 10: S_max = min(P, len)).
    assert len(blueprint_rows([5, 6], BLUEPRINTS, MASK)) == 8
    assert len(blueprint_rows([5, 6, 7, 8], BLUEPRINTS, MASK)) == 12


def test_text_inputs_wrap_rows_in_special_tokens_never_masked(minilm) -> None:
    tokenizer = minilm.tokenizer
    inputs = text_inputs("A man is playing a guitar.", tokenizer, minilm.max_length, BLUEPRINTS, "text 0")
    tokens = tokenizer("A man is playing a guitar.", add_special_tokens=False)["input_ids"]
    assert inputs.input_ids.shape == (12, len(tokens) + 2)
    assert (inputs.input_ids[:, 0] == tokenizer.cls_token_id).all()
    assert (inputs.input_ids[:, -1] == tokenizer.sep_token_id).all()
    assert (inputs.labels[:, 0] == IGNORE_LABEL).all() and (inputs.labels[:, -1] == IGNORE_LABEL).all()
    masked = inputs.input_ids[:, 1:-1] == tokenizer.mask_token_id
    assert torch.equal(masked, inputs.labels[:, 1:-1] != IGNORE_LABEL)
    assert torch.equal(inputs.labels[:, 1:-1][masked], torch.tensor(tokens).expand(12, -1)[masked])
    # every token is masked n(b) - k(b) times per blueprint: 1 + 1 + 2 + 3 = 7 times in all
    assert (masked.sum(dim=0) == 7).all()


def test_one_token_text_still_masks_its_token(minilm) -> None:
    inputs = text_inputs("hello", minilm.tokenizer, minilm.max_length, BLUEPRINTS, "text 0")
    assert (inputs.labels != IGNORE_LABEL).any()


def test_empty_text_is_rejected_with_its_index(minilm) -> None:
    with pytest.raises(ValueError, match="text 3"):
        embed_texts(minilm, ["   "], NeuralOptions(tuple(resolve_parameter_names("head", 6))), indices=[3])


def test_eq1_weight_change_embedding_by_hand() -> None:
    changes = [torch.tensor([3.0, 4.0]), torch.tensor([0.0, 2.0, 0.0])]
    # normalised: [0.6, 0.8] and [0, 1, 0]; concatenated norm sqrt(2)
    expected = np.array([0.6, 0.8, 0.0, 1.0, 0.0]) / np.sqrt(2)
    assert np.allclose(weight_change_embedding(changes).numpy(), expected)
    with pytest.raises(ValueError, match="unchanged"):
        weight_change_embedding([torch.zeros(3)], "text 1")


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


@pytest.mark.parametrize("preset", ["head", "block"])
def test_batched_path_equals_per_text_reference(minilm, preset: str) -> None:
    # 4 epochs keep the test short; the two paths follow the same steps whatever the epoch count
    options = NeuralOptions(tuple(resolve_parameter_names(preset, minilm.num_layers)), epochs=4)
    reference = embed_texts(minilm, SENTENCES[:2], options, path="reference")
    batched = embed_texts(minilm, SENTENCES[:2], options, path="batched")
    assert (cosine(reference, batched) >= 0.999).all()


def test_width_norm_reruns_and_batch_composition(minilm) -> None:
    options = NeuralOptions(tuple(resolve_parameter_names("head", minilm.num_layers)), epochs=4)
    together = embed_texts(minilm, SENTENCES, options)
    assert together.shape == (3, 3 * 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    again = embed_texts(minilm, SENTENCES, options)
    assert np.array_equal(together, again)
    alone = embed_texts(minilm, SENTENCES[1:2], options)
    reordered = embed_texts(minilm, [SENTENCES[2], SENTENCES[1]], options)
    assert np.allclose(alone[0], together[1], atol=1e-6)
    assert np.allclose(reordered[1], together[1], atol=1e-6)
    # different texts differ
    assert cosine(together[:1], together[1:2])[0] < 0.99


def test_long_text_is_micro_tuned_over_sentence_packed_chunks(minilm) -> None:
    short = dataclasses.replace(minilm, max_length=16)  # 14 text tokens per chunk
    text = " ".join(SENTENCES)
    inputs = text_inputs(text, short.tokenizer, short.max_length, BLUEPRINTS, "text 0")
    assert len(inputs.chunks) == 3  # 10, 7 and 11 tokens: no two sentences fit into 14
    tokenizer = short.tokenizer
    assert [tokenizer.decode(chunk) for chunk in inputs.chunks] == [tokenizer.decode(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in SENTENCES]
    assert inputs.input_ids.shape[0] == 3 * 12  # the inputs of all chunks form one micro-tuning set
    options = NeuralOptions(tuple(resolve_parameter_names("head", short.num_layers)), epochs=3)
    batched = embed_texts(short, [text], options)
    reference = embed_texts(short, [text], options, path="reference")
    assert (cosine(batched, reference) >= 0.999).all()
    # the embedding of the whole text is not that of any one chunk alone
    first = embed_texts(short, [SENTENCES[0]], options)
    assert cosine(batched, first)[0] < 0.999


def test_reference_path_accepts_other_parameters(minilm) -> None:
    names = ("bert.encoder.layer.4.output.dense.bias",)
    options = NeuralOptions(names, epochs=2)
    vectors = embed_texts(minilm, SENTENCES[:1], options, path="reference")
    assert vectors.shape == (1, 384) and np.isclose(np.linalg.norm(vectors), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="batched path does not cover"):
        embed_texts(minilm, SENTENCES[:1], options, path="batched")
    with pytest.raises(ValueError, match="only 1-D"):
        embed_texts(minilm, SENTENCES[:1], NeuralOptions(("cls.predictions.transform.dense.weight",)), path="reference")
    with pytest.raises(ValueError, match="no parameter"):
        embed_texts(minilm, SENTENCES[:1], NeuralOptions(("cls.nothing.bias",)), path="reference")
    # the model is left exactly as it was
    state = dict(minilm.model.named_parameters())
    assert not state[names[0]].requires_grad


def test_hidden_variants_of_appendix_g(minilm) -> None:
    from embedlab.models import load_model

    block = tuple(block_vectors(minilm.num_layers))
    avg = embed_texts(minilm, SENTENCES[:2], NeuralOptions(block, epochs=2, variant="avg"))
    cls = embed_texts(minilm, SENTENCES[:2], NeuralOptions(block, epochs=2, variant="cls"))
    # untuned 'avg'/'cls' are the plain encoder outputs: mean over all tokens, and the [CLS] state
    base = load_model("minilm", device="cpu")
    for row, sentence in enumerate(SENTENCES[:2]):
        encoded = base.tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            states = base.model(**encoded).last_hidden_state[0]
        assert np.allclose(avg[row], states.mean(dim=0).numpy(), atol=1e-5)
        assert np.allclose(cls[row], states[0].numpy(), atol=1e-5)
    tuned = embed_texts(minilm, SENTENCES[:2], NeuralOptions(block, epochs=2, variant="avg-tuned"))
    diff = embed_texts(minilm, SENTENCES[:2], NeuralOptions(block, epochs=2, variant="avg-diff"))
    assert np.allclose(diff, tuned - avg, atol=1e-5)
    assert np.abs(diff).max() > 1e-3
    with pytest.raises(ValueError, match="must tune the last block"):
        embed_texts(minilm, SENTENCES[:1], NeuralOptions(tuple(resolve_parameter_names("head", 6)), variant="cls-tuned"))


def test_embedder_options_and_cache(minilm, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    embedder = NeuralEmbedder("minilm", {"epochs": "3", "skip-layer": "2"})
    assert list(embedder.options.params) == resolve_parameter_names("head", 6)[:2] and embedder.dimension == 768
    first = embedder.embed(SENTENCES[:2] + SENTENCES[:1])
    assert first.shape == (3, 768) and np.array_equal(first[0], first[2])
    files = sorted(tmp_path.rglob("*.npy"))
    assert len(files) == 2
    assert np.array_equal(np.load(files[0], allow_pickle=False), first[0]) or np.array_equal(np.load(files[0], allow_pickle=False), first[1])
    # a rerun reads the cache: identical numbers even if the model were to change
    second = NeuralEmbedder("minilm", {"epochs": "3", "skip-layer": "2"}).embed(SENTENCES[:2])
    assert np.array_equal(second, first[:2])
    blueprint = NeuralEmbedder("minilm", {"epochs": "3", "skip-blueprint": "3"})
    assert blueprint.options.blueprints == BLUEPRINTS[:3]
    with pytest.raises(ValueError, match="unknown option"):
        NeuralEmbedder("minilm", {"epoch": "3"})


def test_one_tuning_run_caches_every_appendix_g_variant(minilm, tmp_path, monkeypatch) -> None:
    import embedlab.neural.family as family

    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    block = tuple(block_vectors(minilm.num_layers))
    options = {"params": "block", "epochs": "2"}
    NeuralEmbedder("minilm", {**options, "variant": "cls-diff"}).embed(SENTENCES[:2])
    assert len(list(tmp_path.rglob("*.npy"))) == 2 * 7  # two texts x (neural + six hidden-layer variants)

    def no_tuning(*args, **kwargs):
        raise AssertionError("a variant of an already tuned text was micro-tuned again")

    monkeypatch.setattr(family, "embed_texts_variants", no_tuning)
    for variant in ("neural", "cls", "avg", "cls-tuned", "avg-tuned", "cls-diff", "avg-diff"):
        cached = NeuralEmbedder("minilm", {**options, "variant": variant}).embed(SENTENCES[:2])
        # the same numbers as each variant computed on its own run
        direct = embed_texts(minilm, SENTENCES[:2], NeuralOptions(block, epochs=2, variant=variant))
        assert np.allclose(cached, direct, atol=1e-6), variant
    # a head-tuned run has no hidden-layer variants to share; an untuned one only its untuned sibling
    assert shared_run_variants(NeuralOptions(tuple(resolve_parameter_names("head", 6))), 6) == ("neural",)
    assert shared_run_variants(NeuralOptions(block, variant="avg"), 6) == ("cls", "avg")


def test_neural_family_specs(minilm, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    import embedlab.neural.family  # noqa: F401  (registers the family)
    from embedlab.methods.registry import load
    from embedlab.spec import SpecError

    method = load("neural:minilm,epochs=2,lr=1e-2,params=head")
    assert method.spec == "neural:minilm,epochs=2"  # defaults dropped, canonical order
    vectors = method.encode(SENTENCES[:2])
    assert vectors.shape == (2, 1152) and vectors.dtype == np.float32
    direct = NeuralEmbedder("minilm", {"epochs": "2"}).embed(SENTENCES[:2])
    assert np.array_equal(vectors, direct)
    both = load("neural:minilm,epochs=2+minilm")
    assert both.encode(SENTENCES[:2]).shape == (2, 1152 + 384)
    assert load("neural:minilm,skip-layer=1").spec == "neural:minilm,skip-layer=1"
    with pytest.raises(SpecError, match="skip-layer"):
        load("neural:minilm,skip-layer=5")
