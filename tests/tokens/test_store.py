import numpy as np
import pytest
import torch

from embedlab.tokens.entry import TokenStates
from embedlab.tokens.store import TokenStateStore
from embedlab.tokens.templates import get_template


def test_every_layer_is_stored_with_the_right_meaning(minilm, isolated_cache):
    store = TokenStateStore(minilm)
    [states] = store.compute(["A man is playing a guitar."])
    ids = torch.tensor([states.token_ids.tolist()], device=minilm.device)
    assert states.states.shape == (minilm.num_layers + 2, len(states.token_ids), minilm.hidden_size)
    assert states.states.dtype == np.float32
    with torch.inference_mode():
        outputs = minilm.model(input_ids=ids, output_hidden_states=True)
        static = minilm.model.get_input_embeddings()(ids)[0].cpu().numpy()
    np.testing.assert_allclose(states.layer(-1), static, atol=1e-6)
    np.testing.assert_allclose(states.layer(0), outputs.hidden_states[0][0].cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(states.layer(minilm.num_layers), outputs.last_hidden_state[0].cpu().numpy(), atol=1e-4)
    assert states.token_ids[0] == minilm.tokenizer.cls_token_id and states.token_ids[-1] == minilm.tokenizer.sep_token_id


def test_disk_cache_is_reused_and_damaged_entries_are_recomputed(minilm, isolated_cache, sts_sentences):
    texts, last = sts_sentences[:4], (minilm.num_layers,)
    store = TokenStateStore(minilm)
    first = store.compute(texts, layers=last)
    [pack] = sorted(isolated_cache.rglob("*.pack"))  # new entries of one call go into one pack
    located = store._packs().locations([store.key(text, None, minilm.num_layers) for text in texts])
    assert len(located) == 4 and {where[0] for where in located.values()} == {pack.name}
    reread = TokenStateStore(minilm).compute(texts, layers=last)  # a fresh store reads the disk cache
    for a, b in zip(first, reread):
        np.testing.assert_array_equal(a.states, b.states)
    # damage two entries inside the pack: flip a byte of one's data, overwrite the other's header
    (_, offset0, length0), (_, offset1, _) = [located[store.key(text, None, minilm.num_layers)] for text in texts[:2]]
    payload = bytearray(pack.read_bytes())
    payload[offset0 + length0 - 10] ^= 0xFF
    payload[offset1 : offset1 + 16] = b"\xff" * 16
    pack.write_bytes(bytes(payload))
    with pytest.raises(ValueError):
        TokenStates.from_bytes(bytes(payload[offset0 : offset0 + length0]))
    recomputed = TokenStateStore(minilm).compute(texts, layers=last)
    for a, b in zip(first, recomputed):  # recomputed in a smaller batch: equal up to float rounding
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)
    # the two damaged entries were rewritten intact into a new pack; the index points there
    relocated = store._packs().locations([store.key(text, None, minilm.num_layers) for text in texts])
    assert {relocated[store.key(text, None, minilm.num_layers)][0] for text in texts[:2]} != {pack.name}
    again = TokenStateStore(minilm).compute(texts, layers=last)
    for a, b in zip(recomputed, again):
        np.testing.assert_array_equal(a.states, b.states)


def test_a_missing_pack_is_recomputed(minilm, isolated_cache, sts_sentences):
    texts = sts_sentences[4:6]
    first = TokenStateStore(minilm).compute(texts)
    for pack in isolated_cache.rglob("*.pack"):
        pack.unlink()
    again = TokenStateStore(minilm).compute(texts)
    for a, b in zip(first, again):
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)


def test_cache_key_depends_on_model_template_text_and_layer(minilm):
    store = TokenStateStore(minilm, use_disk_cache=False)
    keys = {store.key("a text", None, 6), store.key("a text ", None, 6), store.key("a text", get_template("T0"), 6),
            store.key("a text", None, 5)}
    assert len(keys) == 4
    assert store.key("a text", None, 6, max_tokens=256) not in keys  # a cut text's states are stored apart


def test_methods_over_one_model_share_one_store(minilm):
    from embedlab.runtime.memo import clear
    from embedlab.tokens.store import store_for

    assert store_for(minilm) is store_for(minilm)
    first = store_for(minilm)
    clear()
    assert store_for(minilm) is not first


def test_only_the_requested_layers_are_kept_in_memory_and_on_disk(minilm, isolated_cache, sts_sentences):
    texts = sts_sentences[:3]
    every = TokenStateStore(minilm, use_disk_cache=False).compute(texts)
    store = TokenStateStore(minilm)
    some = store.compute(texts, layers=(1, minilm.num_layers))
    for part, whole in zip(some, every):
        assert part.layers == (1, minilm.num_layers) and part.states.shape == (2, whole.num_tokens, minilm.hidden_size)
        np.testing.assert_allclose(part.layer(1), whole.layer(1), atol=1e-6)
        np.testing.assert_allclose(part.layer(minilm.num_layers), whole.layer(minilm.num_layers), atol=1e-6)
        with pytest.raises(KeyError, match="layer 0 was not kept"):
            part.layer(0)
    packs = store._packs()
    for layer in store.all_layers:
        located = packs.locations([store.key(text, None, layer) for text in texts])
        assert len(located) == (3 if layer in (1, minilm.num_layers) else 0)
    stored = sum(path.stat().st_size for path in isolated_cache.rglob("*.pack"))
    floats = sum(2 * whole.num_tokens * minilm.hidden_size * 4 for whole in every)
    assert floats < stored < floats * 1.2  # float32 layers plus small headers and token ids, nothing more


def test_a_grid_asks_for_every_layer_and_then_runs_the_model_once(minilm, isolated_cache, sts_sentences, monkeypatch):
    from embedlab.runtime.settings import configure

    texts = sts_sentences[:3]
    configure(cache_layers="all")
    try:
        store = TokenStateStore(minilm)
        first = store.compute(texts, layers=(minilm.num_layers,))
        monkeypatch.setattr(TokenStateStore, "_run_model", lambda *args: pytest.fail("the model ran again"))
        for fresh in (store, TokenStateStore(minilm)):  # from memory, then from disk
            again = fresh.compute(texts, layers=(0, 1))
            assert [states.layers for states in again] == [(0, 1)] * 3
        for a, b in zip(first, store.compute(texts, layers=(minilm.num_layers,))):
            assert a is b  # the same object: many configurations share one layout of it
    finally:
        configure()


def test_a_bad_layer_is_refused(minilm):
    with pytest.raises(ValueError, match="layer 7 is outside -1..6"):
        TokenStateStore(minilm, use_disk_cache=False).compute(["a text"], layers=(7,))


def test_the_memory_cache_is_bounded_in_bytes(minilm, sts_sentences):
    store = TokenStateStore(minilm, use_disk_cache=False, memory_limit_bytes=200_000)
    states = store.compute(sts_sentences[:20], layers=(minilm.num_layers,))
    assert 0 < store._memory_bytes <= 200_000 < sum(item.states.nbytes for item in states)
    assert TokenStateStore(minilm, use_disk_cache=False).memory_limit_bytes == 256 << 20  # the default


def test_eviction_keeps_the_budget_and_evicted_entries_are_recomputed(minilm, isolated_cache, sts_sentences):
    from embedlab.runtime.cache.budget import cache_size, evict_to_budget
    from embedlab.runtime.settings import configure

    last = (minilm.num_layers,)
    groups = [sts_sentences[start : start + 4] for start in (0, 4, 8)]
    clean = [TokenStateStore(minilm, use_disk_cache=False).compute(group, layers=last) for group in groups]
    store = TokenStateStore(minilm, memory_limit_bytes=0)
    packs = []
    for group in groups:
        store.compute(group, layers=last)
        packs.append(max(isolated_cache.rglob("*.pack"), key=lambda path: path.stat().st_mtime_ns))
    assert len(set(packs)) == 3
    store.compute(groups[0], layers=last)  # read back: the first pack is now the most recently used
    evict_to_budget(cache_size() - 1)
    assert packs[0].exists() and not packs[1].exists() and packs[2].exists()  # the least recently used went
    evicted = [store.key(text, None, minilm.num_layers) for text in groups[1]]
    assert len(store._packs().locations(evicted)) == 4 and store._packs().read(evicted) == {}
    assert store._packs().locations(evicted) == {}  # the rows of a pack found gone are dropped

    budget = cache_size() + packs[2].stat().st_size // 2  # not room for another pack
    configure(cache_max=budget)
    try:
        store = TokenStateStore(minilm, memory_limit_bytes=0)
        again = store.compute(groups[1], layers=last)  # recomputed, written, and the oldest pack evicted
        assert cache_size() <= budget
        assert packs[0].exists() and not packs[2].exists()  # the third pack was used less recently than the first
        for a, b in zip(again, clean[1]):
            np.testing.assert_allclose(a.states, b.states, atol=1e-6)
        for group, expected in zip(groups, clean):  # whatever was evicted is recomputed to the same values
            for a, b in zip(TokenStateStore(minilm, memory_limit_bytes=0).compute(group, layers=last), expected):
                np.testing.assert_allclose(a.states, b.states, atol=1e-6)
            assert cache_size() <= budget
    finally:
        configure()


def test_a_layer_already_cached_keeps_its_values_when_another_layer_is_computed(minilm, isolated_cache, sts_sentences):
    # the model runs on other batches the second time (other texts beside it, other padding), so fresh values
    # of the cached layer could differ in the last bits; reruns must read exactly what the cache holds
    last = minilm.num_layers
    [cached] = TokenStateStore(minilm).compute(sts_sentences[:1], layers=(last,))
    store = TokenStateStore(minilm)
    both = store.compute(sts_sentences[:9], layers=(1, last), batch_size=4)
    np.testing.assert_array_equal(both[0].layer(last), cached.layer(last))
    again = TokenStateStore(minilm).compute(sts_sentences[:9], layers=(1, last))
    for first, second in zip(both, again):
        np.testing.assert_array_equal(first.states, second.states)


def test_texts_read_from_the_cache_are_counted_for_a_cost_being_measured(minilm, isolated_cache):
    from embedlab.runtime.reuse import counting_reuse

    texts = ["A man is playing a guitar.", "Two dogs run through the snow."]
    store = TokenStateStore(minilm)
    with counting_reuse() as first:
        store.compute(texts[:1], layers=(minilm.num_layers,))
    with counting_reuse() as second:  # the first text's states from the memory cache, the second's from the model
        store.compute(texts, layers=(minilm.num_layers,))
        store.compute(texts[1:], layers=(minilm.num_layers,))  # computed in this measurement: its own work
    assert (first.texts, second.texts) == (0, 1) and second.computed == {texts[1]}
