import numpy as np
import pytest
import torch

from embedlab.data.sentences import split_sentences
from embedlab.tokens.templates import TEMPLATES, get_template
from embedlab.tokens.forward import check_max_tokens, length_batches
from embedlab.tokens.store import TokenStateStore


@pytest.mark.crosspath
def test_batching_and_padding_do_not_change_states(minilm, isolated_cache, sts_sentences):
    alone = TokenStateStore(minilm, use_disk_cache=False).compute(sts_sentences[:1])[0]
    batched = TokenStateStore(minilm, use_disk_cache=False).compute(sts_sentences[:16], batch_size=8)[0]
    np.testing.assert_allclose(alone.states, batched.states, atol=1e-4)  # other padding: hidden states (not unit scale) to float32 rounding


def test_batches_are_longest_first_and_bounded_in_rows_and_attention():
    lengths = [10, 500, 40, 300, 12, 250, 11]
    # budget 4 × 128² = 65,536 scores, a batch as wide as its first (longest) row: 500, 300 and 250 each go
    # alone (two rows of 250 would be 125,000); 40, 12, 11, 10 share one (4 × 40² = 6,400), the row cap.
    assert length_batches(lengths, batch_size=4, width=128) == [[1], [3], [5], [2, 4, 6, 0]]
    # two rows of 180 fit the same budget (2 × 180² = 64,800), three do not (97,200)
    assert length_batches([180, 180, 180], batch_size=4, width=128) == [[0, 1], [2]]
    # with short texts only, the row cap is the only limit (the old behaviour)
    assert length_batches([5, 7, 6, 9, 8], batch_size=2) == [[3, 4], [1, 2], [0]]
    assert length_batches([], batch_size=8) == []


@pytest.mark.crosspath
def test_windows_batched_under_the_attention_budget_equal_one_at_a_time(minilm, isolated_cache):
    sentence = "The committee reviewed the proposal and approved a revised budget for the coming year."
    texts = [" ".join([sentence] * repeats) for repeats in (30, 24, 18, 2, 1)]  # windows of ≈ 500, 400, 300, 30, 15 tokens
    together = TokenStateStore(minilm, use_disk_cache=False).compute(texts, batch_size=8)
    for text, states in zip(texts, together):
        [alone] = TokenStateStore(minilm, use_disk_cache=False).compute([text])
        np.testing.assert_allclose(states.states, alone.states, atol=1e-4)  # other batches: float32 rounding at the states' scale


def test_max_tokens_keeps_the_first_input_tokens_as_the_tokenizer_truncates(minilm, isolated_cache, sts_sentences):
    """``max_tokens=N`` runs one sequence of the text's first N input tokens, special tokens included: the
    ids the tokenizer itself gives with ``truncation=True, max_length=N`` (what sentence-transformers runs)."""
    words = "The committee reviewed the proposal and approved a revised budget for the coming year.".split()
    long_text = " ".join(words * 40)
    store = TokenStateStore(minilm, use_disk_cache=False)
    [cut, short] = store.compute([long_text, sts_sentences[0]], layers=(6,), max_tokens=20)
    expected = minilm.tokenizer(long_text, truncation=True, max_length=20)["input_ids"]
    assert cut.token_ids.tolist() == expected and set(cut.chunk_ids.tolist()) == {0}
    [whole] = store.compute([long_text], layers=(6,))
    assert whole.num_tokens > 20 * 10  # without max_tokens nothing is cut
    with torch.inference_mode():
        reference = minilm.model(input_ids=torch.tensor([expected], device=minilm.device)).last_hidden_state[0].cpu().numpy()
    np.testing.assert_allclose(cut.layer(6), reference, atol=1e-5)
    [plain_short] = store.compute([sts_sentences[0]], layers=(6,))
    np.testing.assert_allclose(short.layer(6), plain_short.layer(6), atol=1e-5)  # a text that fits is not changed (padding: last bits)


def test_a_cut_longer_than_the_model_input_is_refused(minilm):
    with pytest.raises(ValueError, match=f"truncate=600: .* takes 1 to {minilm.max_length} input tokens"):
        check_max_tokens(minilm, 600)
    with pytest.raises(ValueError, match="truncate=600"):
        TokenStateStore(minilm, use_disk_cache=False).compute(["a text"], max_tokens=600)
    check_max_tokens(minilm, None)
    check_max_tokens(minilm, minilm.max_length)


def test_long_text_is_split_into_sentence_packed_chunks(minilm, isolated_cache):
    words = "The committee reviewed the proposal and approved a revised budget for the coming year".split()
    sentences = [" ".join(words[(i % 5) :] ) + f" number {i}." for i in range(400)]
    text = " ".join(sentences)
    assert len(text.split()) >= 5000
    [states] = TokenStateStore(minilm, use_disk_cache=False).compute([text])
    chunks = np.unique(states.chunk_ids)
    assert len(chunks) > 20
    tokenizer = minilm.tokenizer
    sentence_ids = [tokenizer(s, add_special_tokens=False)["input_ids"] for s in split_sentences(text)]
    all_ids = [i for ids in sentence_ids for i in ids]
    boundaries = set(np.cumsum([len(ids) for ids in sentence_ids]).tolist())
    consumed = 0
    for chunk in chunks:
        ids = states.token_ids[states.chunk_ids == chunk]
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert len(ids) <= minilm.max_length
        body = ids[1:-1].tolist()
        assert body == all_ids[consumed : consumed + len(body)]  # nothing dropped or reordered
        consumed += len(body)
        assert consumed in boundaries  # every chunk ends at a sentence end
    assert consumed == len(all_ids)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_mask_positions_are_found_for_every_text(minilm, name, sts_sentences):
    template = get_template(name)
    texts = sts_sentences[:5] + ["a text that itself says [MASK] literally", ""]
    store = TokenStateStore(minilm, use_disk_cache=False)
    for states in store.compute(texts, template=template):
        positions = np.flatnonzero(states.template_mask)
        assert len(positions) == template.num_masks
        assert (states.token_ids[positions] == minilm.tokenizer.mask_token_id).all()
    # the templated sequence is the template string itself, tokenised as a whole
    [states] = store.compute(["Dogs bark."], template=template)
    expected = minilm.tokenizer(template.text.replace("[X]", "Dogs bark.").replace("[MASK]", minilm.tokenizer.mask_token))["input_ids"]
    assert states.token_ids.tolist() == expected


def test_a_lone_batch_runs_on_the_calling_thread_with_every_core_and_the_one_thread_states(minilm, sts_sentences, monkeypatch):
    """A small call (one batch) keeps torch's intra-op threads on the calling thread instead of one stream on
    one thread; several batches still run one per core. The states equal the one-thread run's."""
    import threading

    from embedlab.tokens import forward
    from embedlab.tokens.forward import run_sequences, text_sequences

    texts = sts_sentences[:6]
    encoded = minilm.tokenizer(texts, add_special_tokens=False)["input_ids"]
    sequences = [sequence for index, (text, ids) in enumerate(zip(texts, encoded))
                 for sequence in text_sequences(minilm, index, text, list(ids), None)]
    seen: list[tuple[bool, int]] = []
    original = forward._batch_outputs

    def spy(model, batch, layers):
        seen.append((threading.get_ident() == caller, torch.get_num_threads()))
        return original(model, batch, layers)

    monkeypatch.setattr(forward, "_batch_outputs", spy)
    caller, threads = threading.get_ident(), torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = list(run_sequences(minilm, sequences, 32, False, (6,)))
        torch.set_num_threads(2)
        seen.clear()
        small = list(run_sequences(minilm, sequences, 32, False, (6,)))  # 6 texts: one batch
        assert seen == [(True, 2)]
        seen.clear()
        list(run_sequences(minilm, sequences, 3, False, (6,)))  # two batches: one per core
        assert seen == [(False, 1), (False, 1)]
    finally:
        torch.set_num_threads(threads)
    for (_, expected), (_, states) in zip(alone, small):
        # float32 states of unit-scale activations; intra-op threads split rows, not sums, so they agree to rounding
        np.testing.assert_allclose(states, expected, rtol=0, atol=1e-5)
