import numpy as np
import pytest

from embedlab.pooling.aggregation import FlatTokens, LayoutMemo, aggregate, layer_matrix, resolve_layers, select_tokens, token_weights
from embedlab.tokens.states import TokenStates

CLS, SEP, MASK = 101, 102, 103


def _states(ids, chunk_ids=None, template_mask=None, layers=2, seed=0):
    ids = np.asarray(ids, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return TokenStates(
        token_ids=ids,
        states=rng.normal(size=(layers, len(ids), 3)).astype(np.float32),
        chunk_ids=np.zeros(len(ids), np.int32) if chunk_ids is None else np.asarray(chunk_ids, np.int32),
        template_mask=np.zeros(len(ids), bool) if template_mask is None else np.asarray(template_mask, bool),
    )


SPECIAL = np.array([CLS, SEP, MASK])


def test_mean_of_one_text_is_the_plain_average():
    states = [_states([CLS, 7, 8, SEP])]
    flat = FlatTokens.from_states(states, SPECIAL)
    matrix = layer_matrix(states, [0])
    keep = select_tokens(flat, include_special=True, excluded_vocab=None)
    weights = token_weights(flat, keep, None)
    np.testing.assert_allclose(weights, [0.25] * 4)
    np.testing.assert_allclose(aggregate(matrix, flat, weights, keep, "mean")[0], states[0].states[1].mean(0), rtol=1e-5, atol=1e-7)


def test_layers_are_averaged():
    states = [_states([CLS, 7, SEP], layers=4)]
    expected = (states[0].states[2] + states[0].states[3]) / 2  # layers 1 and 2
    np.testing.assert_allclose(layer_matrix(states, [1, 2]), expected, rtol=1e-5, atol=1e-7)
    assert resolve_layers("1+last", 6) == (1, 6) and resolve_layers("-1", 6) == (-1,)
    with pytest.raises(ValueError, match="outside -1..6"):
        resolve_layers("7", 6)


def test_idf_weights_sum_to_one_per_text_and_respect_filters():
    states = [_states([CLS, 7, 8, SEP]), _states([CLS, 8, 9, 9, SEP], seed=1)]
    flat = FlatTokens.from_states(states, SPECIAL)
    idf = np.zeros(200)
    idf[[7, 8, 9]] = [2.0, 1.0, 0.5]
    excluded = np.zeros(200, bool)
    excluded[9] = True
    keep = select_tokens(flat, include_special=False, excluded_vocab=excluded)
    weights = token_weights(flat, keep, idf)
    np.testing.assert_allclose(weights[:4], [0, 2 / 3, 1 / 3, 0], rtol=1e-5, atol=1e-7)
    # the second text keeps only token 8 after dropping specials and token 9
    np.testing.assert_allclose(weights[4:], [0, 1, 0, 0, 0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(flat.per_text_sum(weights), [1, 1], rtol=1e-5, atol=1e-7)


def test_fallbacks_never_leave_a_text_empty():
    states = [_states([CLS, SEP]), _states([CLS, 7, SEP], seed=1)]
    flat = FlatTokens.from_states(states, SPECIAL)
    keep = select_tokens(flat, include_special=False, excluded_vocab=None)
    assert keep.tolist() == [True, True, False, True, False]  # text 0 has only specials: all kept
    weights = token_weights(flat, keep, np.zeros(200))  # every idf is 0: uniform over kept tokens
    np.testing.assert_allclose(weights, [0.5, 0.5, 0, 1, 0])


def test_max_cls_and_mask_aggregations():
    first = _states([CLS, 7, SEP, CLS, 8, SEP], chunk_ids=[0, 0, 0, 1, 1, 1])
    second = _states([CLS, 5, MASK, MASK, SEP], template_mask=[0, 0, 1, 1, 0], seed=1)
    flat = FlatTokens.from_states([first, second], SPECIAL)
    matrix = layer_matrix([first, second], [0])
    keep = np.ones(len(flat.token_ids), bool)
    weights = token_weights(flat, keep, None)
    a, b = first.states[1], second.states[1]
    np.testing.assert_allclose(aggregate(matrix, flat, weights, keep, "max"), np.stack([a.max(0), b.max(0)]))
    np.testing.assert_allclose(aggregate(matrix, flat, weights, keep, "cls")[0], (a[0] + a[3]) / 2, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(aggregate(matrix, flat, weights, keep, "cls")[1], b[0], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="text at index 0 has none"):
        aggregate(matrix, flat, weights, keep, "mask")
    only_second = FlatTokens.from_states([second], SPECIAL)
    w = token_weights(only_second, np.ones(5, bool), None)
    np.testing.assert_allclose(aggregate(b, only_second, w, np.ones(5, bool), "mask")[0], (b[2] + b[3]) / 2, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(aggregate(b, only_second, w, np.ones(5, bool), "mean-no-mask")[0], b[[0, 1, 4]].mean(0), rtol=1e-5, atol=1e-7)


def test_weighted_sum_equals_a_direct_sum_per_text():
    states = [_states([CLS, 7, 8, SEP]), _states([CLS, 9, SEP], seed=1), _states([CLS, 7, 7, 9, 8, SEP], seed=2)]
    flat = FlatTokens.from_states(states, SPECIAL)
    matrix = layer_matrix(states, [0])
    weights = np.random.default_rng(5).random(len(flat.token_ids)).astype(np.float32)
    expected = [sum(weights[t] * matrix[t] for t in range(flat.offsets[i], flat.offsets[i + 1])) for i in range(3)]
    np.testing.assert_allclose(flat.weighted_sum(matrix, weights), expected, rtol=1e-5, atol=1e-6)


def test_layout_memo_reuses_work_for_the_same_states_only():
    memo = LayoutMemo()
    states = [_states([CLS, 7, SEP], layers=3), _states([CLS, 8, 9, SEP], layers=3, seed=1)]
    flat, matrix = memo.flat(states, SPECIAL), memo.matrix(states, (0, 1))
    assert memo.flat(list(states), SPECIAL) is flat and memo.matrix(states, (0, 1)) is matrix
    np.testing.assert_array_equal(matrix, layer_matrix(states, (0, 1)))
    assert not matrix.flags.writeable  # shared between configurations, so nobody may change it
    other = [_states([CLS, 7, SEP], layers=3, seed=3)]
    np.testing.assert_array_equal(memo.matrix(other, (0, 1)), layer_matrix(other, (0, 1)))
    assert memo.flat(other, SPECIAL).num_texts == 1
