import math

import numpy as np

from embedlab.pooling.weights import (
    idf_from_documents,
    most_frequent_tokens,
    punctuation_token_mask,
    subword_token_mask,
)


def test_idf_matches_hand_computation():
    documents = [np.array([1, 2, 2]), np.array([2, 3]), np.array([3, 4])]
    idf = idf_from_documents(documents, vocab_size=6)
    assert math.isclose(idf[1], math.log(3 / 1))
    assert math.isclose(idf[2], math.log(3 / 2))  # repeated inside one document still counts once
    assert math.isclose(idf[3], math.log(3 / 2))
    assert math.isclose(idf[5], math.log(3))  # unseen: as rare as a token seen once


def test_most_frequent_tokens_skip_special_ids():
    counts = np.array([100, 5, 50, 7, 50, 1])
    assert most_frequent_tokens(counts, special_ids=[0], k=3).tolist() == [2, 3, 4]


def test_punctuation_and_subword_masks_on_the_real_vocabulary(minilm):
    tokenizer = minilm.tokenizer
    vocab = tokenizer.get_vocab()
    punctuation = punctuation_token_mask(tokenizer)
    subword = subword_token_mask(tokenizer)
    assert punctuation[[vocab[","], vocab["."], vocab["$"], vocab["##!"] if "##!" in vocab else vocab["!"]]].all()
    assert not punctuation[[vocab["the"], vocab["##ing"], vocab["[CLS]"], vocab["3"]]].any()
    assert subword[[vocab["##ing"], vocab["##s"]]].all()
    assert not subword[[vocab["the"], vocab["[SEP]"], vocab[","]]].any()
