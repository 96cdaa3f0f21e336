import numpy as np
import pytest

from embedlab.pooling.aggregation import FlatTokens, aggregate, select_tokens, token_weights

CLS, SEP, MASK = 101, 102, 103


SPECIAL = np.array([CLS, SEP, MASK])


def _layer0(states):
    return np.concatenate([item.layer(0) for item in states])


def test_mean_of_one_text_is_the_plain_average(make_states):
    states = [make_states([CLS, 7, 8, SEP])]
    flat = FlatTokens.from_states(states, SPECIAL)
    matrix = _layer0(states)
    keep = select_tokens(flat, include_special=True, excluded_vocab=None)
    weights = token_weights(flat, keep, None)
    np.testing.assert_allclose(weights, [0.25] * 4)
    np.testing.assert_allclose(aggregate(matrix, flat, weights, keep, "mean")[0], states[0].states[1].mean(0), rtol=1e-5, atol=1e-7)


def test_idf_weights_sum_to_one_per_text_and_respect_filters(make_states):
    states = [make_states([CLS, 7, 8, SEP]), make_states([CLS, 8, 9, 9, SEP], seed=1)]
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


def test_fallbacks_never_leave_a_text_empty(make_states):
    states = [make_states([CLS, SEP]), make_states([CLS, 7, SEP], seed=1)]
    flat = FlatTokens.from_states(states, SPECIAL)
    keep = select_tokens(flat, include_special=False, excluded_vocab=None)
    assert keep.tolist() == [True, True, False, True, False]  # text 0 has only specials: all kept
    weights = token_weights(flat, keep, np.zeros(200))  # every idf is 0: uniform over kept tokens
    np.testing.assert_allclose(weights, [0.5, 0.5, 0, 1, 0])


def test_max_cls_and_mask_aggregations(make_states):
    first = make_states([CLS, 7, SEP, CLS, 8, SEP], chunk_ids=[0, 0, 0, 1, 1, 1])
    second = make_states([CLS, 5, MASK, MASK, SEP], template_mask=[0, 0, 1, 1, 0], seed=1)
    flat = FlatTokens.from_states([first, second], SPECIAL)
    matrix = _layer0([first, second])
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


def test_weighted_sum_equals_a_direct_sum_per_text(make_states):
    states = [make_states([CLS, 7, 8, SEP]), make_states([CLS, 9, SEP], seed=1), make_states([CLS, 7, 7, 9, 8, SEP], seed=2)]
    flat = FlatTokens.from_states(states, SPECIAL)
    matrix = _layer0(states)
    weights = np.random.default_rng(5).random(len(flat.token_ids)).astype(np.float32)
    expected = [sum(weights[t] * matrix[t] for t in range(flat.offsets[i], flat.offsets[i + 1])) for i in range(3)]
    np.testing.assert_allclose(flat.weighted_sum(matrix, weights), expected, rtol=1e-5, atol=1e-6)


def test_flat_tokens_from_token_ids_equal_those_from_states_without_chunks_or_template(make_states):
    states = [make_states([CLS, 7, 8, SEP]), make_states([CLS, 9, SEP], seed=1)]
    from_states = FlatTokens.from_states(states, SPECIAL)
    from_ids = FlatTokens.from_token_ids([item.token_ids for item in states], SPECIAL)
    for field in ("token_ids", "offsets", "chunk_start", "template_mask", "special"):
        np.testing.assert_array_equal(getattr(from_ids, field), getattr(from_states, field))
    np.testing.assert_array_equal(from_ids.chunk_start, [True, False, False, False, True, False, False])
    with pytest.raises(ValueError, match="text at index 1 has no tokens"):
        FlatTokens.from_token_ids([np.array([7]), np.array([], dtype=np.int64)], SPECIAL)


def test_last_takes_each_chunks_last_kept_token_and_averages_the_chunks(make_states):
    BOS, EOS = 1, 2
    first = make_states([BOS, 7, 8, EOS, BOS, 9, EOS], chunk_ids=[0, 0, 0, 0, 1, 1, 1])
    second = make_states([5, 6, 4], seed=1)
    special = np.array([BOS, EOS])
    flat = FlatTokens.from_states([first, second], special)
    matrix = _layer0([first, second])
    a, b = first.states[1], second.states[1]
    keep = np.ones(len(flat.token_ids), bool)
    pooled = aggregate(matrix, flat, token_weights(flat, keep, None), keep, "last")
    np.testing.assert_allclose(pooled[0], (a[3] + a[6]) / 2, rtol=1e-5, atol=1e-7)  # each chunk's EOS
    np.testing.assert_allclose(pooled[1], b[2], rtol=1e-5, atol=1e-7)
    keep = select_tokens(flat, include_special=False, excluded_vocab=None)  # special=exclude: the last word
    pooled = aggregate(matrix, flat, token_weights(flat, keep, None), keep, "last")
    np.testing.assert_allclose(pooled[0], (a[2] + a[5]) / 2, rtol=1e-5, atol=1e-7)
