"""Tests of embedlab.neural.inputs: Fig. 9/10 masking blueprints and Fig. 8 chunking (Appendix A)."""

from __future__ import annotations

import dataclasses

import torch

from embedlab.neural.head import IGNORE_LABEL
from embedlab.neural.inputs import BLUEPRINTS, blueprint_rows, text_inputs

MASK = -1
# Fig. 9 / Fig. 10 for a 6-token text, derived by hand: K = kept, M = masked; rows in blueprint, shift order.
FIG9_ROWS = [
    "KKMKKM", "MKKMKK", "KMKKMK",  # (2,1), shifts 0, 1, 2
    "KMKMKM", "MKMKMK",  # (1,1)
    "KMMKMM", "MKMMKM", "MMKMMK",  # (1,2)
    "KMMMKM", "MKMMMK", "MMKMMM", "MMMKMM",  # (1,3)
]


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


def test_text_inputs_wrap_rows_in_special_tokens_never_masked(masked_minilm) -> None:
    tokenizer = masked_minilm.tokenizer
    inputs = text_inputs("A man is playing a guitar.", tokenizer, masked_minilm.max_length, BLUEPRINTS, "text 0")
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
    assert inputs.masked_positions == 7 * len(tokens)


def test_one_token_text_still_masks_its_token(masked_minilm) -> None:
    inputs = text_inputs("hello", masked_minilm.tokenizer, masked_minilm.max_length, BLUEPRINTS, "text 0")
    assert (inputs.labels != IGNORE_LABEL).any()


def test_long_text_is_cut_into_sentence_packed_chunks(masked_minilm, sentences) -> None:
    short = dataclasses.replace(masked_minilm, max_length=16)  # 14 text tokens per chunk
    inputs = text_inputs(" ".join(sentences), short.tokenizer, short.max_length, BLUEPRINTS, "text 0")
    assert len(inputs.chunks) == 3  # 10, 7 and 11 tokens: no two sentences fit into 14
    tokenizer = short.tokenizer
    assert [tokenizer.decode(chunk) for chunk in inputs.chunks] == [tokenizer.decode(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sentences]
    assert inputs.input_ids.shape[0] == 3 * 12  # the inputs of all chunks form one micro-tuning set


def test_causal_inputs_keep_the_text_and_weight_next_token_labels_by_blueprint_rows(masked_minilm) -> None:
    import copy

    from embedlab.neural.inputs import causal_text_inputs

    tokenizer = masked_minilm.tokenizer  # a BERT vocabulary: no BOS token
    ids = tokenizer("dogs run fast", add_special_tokens=False)["input_ids"]
    assert len(ids) == 3
    # three tokens, all four blueprints: (2,1) masks each once, (1,1) once, (1,2) twice, (1,3) twice (shifts 0-2 of 4) = 6
    plain = causal_text_inputs("dogs run fast", tokenizer, 32, BLUEPRINTS, "text 0")
    assert plain.input_ids.tolist() == [ids]  # one row, nothing replaced
    assert plain.labels.tolist() == [[ids[1], ids[2], IGNORE_LABEL]]  # position i predicts token i + 1; the first token has no left context
    assert plain.label_weights.tolist() == [[6.0, 6.0, 0.0]]
    with_bos = copy.deepcopy(tokenizer)
    with_bos.bos_token = "[CLS]"
    framed = causal_text_inputs("dogs run fast", with_bos, 32, BLUEPRINTS[:1], "text 0")
    assert framed.input_ids.tolist() == [[with_bos.bos_token_id, *ids]]
    assert framed.labels.tolist() == [[*ids, IGNORE_LABEL]] and framed.label_weights.tolist() == [[1.0, 1.0, 1.0, 0.0]]
    import pytest

    with pytest.raises(ValueError, match="text 4: the text has one token and the tokenizer no BOS token"):
        causal_text_inputs("dogs", tokenizer, 32, BLUEPRINTS, "text 4")
