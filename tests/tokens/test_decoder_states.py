"""Token states of decoder LLMs: tiny random GPT-2 and Llama folders (tests/decoder_helpers.py)."""

import numpy as np
import pytest
import torch

from decoder_helpers import tiny_decoder
from embedlab.models.loading import load_model
from embedlab.tokens.store import TokenStateStore
from embedlab.tokens.templates import get_template

TEXTS = ["A dog runs.", "The capital of France is Paris and the children read books in the library every morning.",
         "She cooked.", "Two women are talking about the weather on the green field."]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request, tmp_path_factory):
    folder = tiny_decoder(tmp_path_factory.mktemp(request.param), request.param, add_bos=request.param == "llama")
    return load_model(str(folder))


def test_a_tiny_decoder_is_known_as_one(decoder, minilm):
    assert decoder.kind == "decoder" and decoder.is_decoder
    assert minilm.kind == "encoder"


def test_states_equal_a_plain_forward_pass(decoder, isolated_cache):
    states = TokenStateStore(decoder, use_disk_cache=False).compute(TEXTS[:1])[0]
    inputs = decoder.tokenizer(TEXTS[0], return_tensors="pt")
    with torch.no_grad():
        outputs = decoder.model(**inputs, output_hidden_states=True)
    np.testing.assert_array_equal(states.token_ids, inputs["input_ids"][0].numpy())
    np.testing.assert_allclose(states.layer(decoder.num_layers), outputs.last_hidden_state[0].numpy(), atol=1e-5)


@pytest.mark.crosspath
def test_a_text_alone_and_in_a_padded_batch_has_the_same_states(decoder, isolated_cache):
    for text in TEXTS:
        alone = TokenStateStore(decoder, use_disk_cache=False).compute([text])[0]
        batched = TokenStateStore(decoder, use_disk_cache=False).compute(TEXTS, batch_size=4)[TEXTS.index(text)]
        assert np.abs(alone.states - batched.states).max() <= 1e-4  # other padding: float32 rounding at the states' scale


def test_long_texts_are_chunked_each_chunk_with_its_own_frame(decoder, isolated_cache):
    text = " ".join(["The children read books in the library every morning."] * 12)  # ≈ 130 tokens, model input 64
    states = TokenStateStore(decoder, use_disk_cache=False).compute([text])[0]
    chunks = np.unique(states.chunk_ids)
    assert len(chunks) > 1
    before, _ = decoder.special_frame
    for chunk in chunks:
        ids = states.token_ids[states.chunk_ids == chunk]
        assert len(ids) <= decoder.max_length
        assert list(ids[: len(before)]) == before  # Llama-like: every chunk starts with its own BOS


def test_echo_marks_the_second_copy(decoder, isolated_cache):
    template = get_template("echo")
    states = TokenStateStore(decoder, use_disk_cache=False).compute(["A dog runs."], template=template)[0]
    text_ids = decoder.tokenizer("A dog runs.", add_special_tokens=False)["input_ids"]
    marked = states.token_ids[states.template_mask]
    assert list(marked) == text_ids
    assert list(states.token_ids[-len(text_ids):]) == text_ids  # the second copy ends the prompt


def test_mask_templates_are_refused_without_a_mask_token(decoder):
    with pytest.raises(ValueError, match="needs a model with a mask token.*prompteol"):
        TokenStateStore(decoder, use_disk_cache=False).compute(["A dog runs."], template=get_template("T0"))


def test_an_empty_text_is_cached_and_then_refused_by_index_where_the_model_adds_no_token(decoder, isolated_cache):
    """GPT-2 adds no BOS, so an empty text has no token at all (SentEval's CR keeps four empty lines): its
    empty states are cached like any other entry, and pooling names the text instead of averaging nothing.
    The Llama-style decoder puts its BOS before every text, so the same text has one token and is pooled."""
    import embedlab
    from embedlab.errors import InputError

    texts = ["A dog runs.", ""]
    adds_nothing = decoder.model.config.model_type == "gpt2"
    states = TokenStateStore(decoder).compute(texts)
    assert states[1].token_ids.size == (0 if adds_nothing else 1)
    assert TokenStateStore(decoder).compute(texts)[1].token_ids.size == states[1].token_ids.size  # read back from disk
    method = embedlab.load(f"{decoder.name}:pool=mean")
    if adds_nothing:
        with pytest.raises(InputError, match="text at index 1 has no tokens"):
            method.encode(texts)
    else:
        assert np.isfinite(method.encode(texts)).all()
