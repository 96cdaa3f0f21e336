import numpy as np
import pytest

from embedlab.pooling.sources import (
    ContextualTokens,
    MixedTokens,
    RandomTokens,
    StaticTokens,
    TokenLayout,
    layer_matrix,
    layout_of,
    resolve_layers,
    special_token_ids,
    tokenized_texts,
)
from embedlab.pooling.static import random_token_table
from embedlab.tokens.store import TokenStateStore

CLS, SEP, MASK = 101, 102, 103
SPECIAL = np.array([CLS, SEP, MASK])


def test_layers_are_averaged(make_states):
    states = [make_states([CLS, 7, SEP], layers=4)]
    expected = (states[0].states[2] + states[0].states[3]) / 2  # layers 1 and 2
    np.testing.assert_allclose(layer_matrix(states, [1, 2]), expected, rtol=1e-5, atol=1e-7)
    assert resolve_layers("1+last", 6) == (1, 6) and resolve_layers("-1", 6) == (-1,)
    with pytest.raises(ValueError, match="outside -1..6"):
        resolve_layers("7", 6)


def test_a_layout_computes_each_flat_view_and_layer_matrix_once(make_states):
    states = [make_states([CLS, 7, SEP], layers=3), make_states([CLS, 8, 9, SEP], layers=3, seed=1)]
    layout = TokenLayout(states)
    flat, matrix = layout.flat(SPECIAL), layout.matrix((0, 1))
    assert layout.flat(SPECIAL.copy()) is flat and layout.matrix([0, 1]) is matrix
    np.testing.assert_array_equal(matrix, layer_matrix(states, (0, 1)))
    assert not matrix.flags.writeable  # shared between configurations, so nobody may change it


def test_the_layout_memo_serves_the_same_states_only(make_states):
    states = [make_states([CLS, 7, SEP], layers=3)]
    assert layout_of(list(states)) is layout_of(states)
    other = [make_states([CLS, 7, SEP], layers=3, seed=3)]
    np.testing.assert_array_equal(layout_of(other).matrix((0, 1)), layer_matrix(other, (0, 1)))
    assert layout_of(states) is not layout_of(other)


def test_tokenized_texts_are_the_tokenizer_ids_with_special_tokens(minilm):
    texts = ["the cat sat", "", "a dog"]
    flat = tokenized_texts(minilm, texts)
    expected = [minilm.tokenizer(text)["input_ids"] for text in texts]
    assert flat.token_ids.tolist() == [token for ids in expected for token in ids]
    assert np.diff(flat.offsets).tolist() == [len(ids) for ids in expected]
    assert flat.chunk_start.sum() == 3 and not flat.template_mask.any()
    assert tokenized_texts(minilm, list(texts)) is flat  # remembered for the next configuration


@pytest.mark.crosspath
def test_contextual_tokens_are_the_stored_states_of_the_chosen_layers(minilm, sts_sentences):
    texts = sts_sentences[:3]
    flat, matrix = ContextualTokens(minilm, (1, 6)).token_vectors(texts, 32, False)
    states = TokenStateStore(minilm, use_disk_cache=False).compute(texts)
    # batched token vectors vs the store's per-text states in other batches: hidden states, not unit scale (1e-4 ≈ 1e-5 × their size)
    np.testing.assert_allclose(matrix, np.concatenate([(s.layer(1) + s.layer(6)) / 2 for s in states]), atol=1e-4)
    assert flat.token_ids.tolist() == np.concatenate([s.token_ids for s in states]).tolist()
    np.testing.assert_array_equal(flat.special_ids, special_token_ids(minilm))


def test_random_tokens_look_up_the_seeded_table(minilm):
    flat, matrix = RandomTokens(minilm, seed=2, std=0.3).token_vectors(["the cat"], 32, False)
    table = random_token_table(len(minilm.tokenizer), minilm.hidden_size, seed=2, std=0.3)
    np.testing.assert_array_equal(matrix, table[flat.token_ids])


def test_each_source_answers_its_width_and_whether_it_takes_a_template(minilm):
    """The pooled method's dimension and a prompt ask the source, never its class: the width is that of the
    vectors it gives, and only contextual states run through a template a prompt may replace."""
    contextual = ContextualTokens(minilm, (6,))
    narrow, full = RandomTokens(minilm, seed=1, std=1.0, dim=48), RandomTokens(minilm, seed=1, std=1.0)
    mixed = MixedTokens(contextual, full, 0.5)
    for source in (contextual, narrow, full, mixed):
        assert source.token_vectors(["the cat sat"], 32, False)[1].shape[1] == source.width
    assert (contextual.width, narrow.width, mixed.width) == (minilm.hidden_size, 48, minilm.hidden_size)
    assert contextual.templated and not narrow.templated and not mixed.templated


class _ConstantTokens(StaticTokens):
    """A static source whose every token vector is ``value`` (any static table mixes the same way)."""

    def __init__(self, model, value: float) -> None:
        self.model, self.value = model, value

    def vectors(self, token_ids, show_progress_bar=None):
        return np.full((len(token_ids), self.model.hidden_size), self.value, dtype=np.float32)


def test_mixed_tokens_follow_eq_10_for_any_static_source(minilm, sts_sentences):
    contextual = ContextualTokens(minilm, (6,))
    flat, plain = contextual.token_vectors(sts_sentences[:2], 32, False)
    for w in (0.25, -0.5):
        mixed_flat, mixed = MixedTokens(contextual, _ConstantTokens(minilm, 2.0), w).token_vectors(sts_sentences[:2], 32, False)
        assert mixed_flat is flat
        np.testing.assert_allclose(mixed, (1 - w) * plain + w * 2.0, rtol=1e-6, atol=1e-6)
