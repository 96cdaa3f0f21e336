from embedlab.data.sentences import chunk_token_ids, pack_sentences, split_sentences


def test_split_sentences_handles_abbreviations():
    assert split_sentences("Dr. Smith arrived at 5 p.m. today. He left! Why?") == [
        "Dr. Smith arrived at 5 p.m. today.",
        "He left!",
        "Why?",
    ]
    assert split_sentences("   ") == []


def test_pack_sentences_is_greedy_and_keeps_sentences_whole():
    sentences = [[1] * 3, [2] * 4, [3] * 2, [4] * 5]
    assert pack_sentences(sentences, budget=7) == [[1, 1, 1, 2, 2, 2, 2], [3, 3, 4, 4, 4, 4, 4]]


def test_over_long_sentence_is_cut_not_dropped():
    chunks = pack_sentences([[1, 1], list(range(10, 22)), [2]], budget=5)
    assert chunks == [[1, 1], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19], [20, 21], [2]]
    assert sum(len(chunk) for chunk in chunks) == 15


def test_short_text_is_one_chunk():
    tokenize = lambda text: [len(word) for word in text.split()]  # noqa: E731 - a stand-in tokenizer
    assert chunk_token_ids("one two three.", tokenize, budget=10) == [[3, 3, 6]]
    assert chunk_token_ids("One two. Three four. Five.", tokenize, budget=4) == [[3, 4, 5, 5], [5]]


def test_splitting_a_corpus_on_several_processes_equals_one_process():
    from embedlab.data.sentences import split_sentences_of_texts
    from embedlab.data.wikitext import wikitext2_paragraphs

    paragraphs = wikitext2_paragraphs("valid")[:120]
    one_process = [sentence for paragraph in paragraphs for sentence in split_sentences(paragraph)]
    assert split_sentences_of_texts(paragraphs, processes=1) == one_process
    assert split_sentences_of_texts(paragraphs, processes=2, parallel_min_chars=0) == one_process
    assert len(one_process) > len(paragraphs)  # paragraphs of several sentences: the order is checked


def test_the_segmenter_gives_pysbds_own_segments():
    """Our segmenter finds each sentence in the text without a regular expression per sentence; pysbd's own
    Segmenter is the reference, on WikiText-2 paragraphs and on texts where the search could go wrong: a
    sentence repeated or first seen inside an earlier one, Unicode and trailing whitespace, line breaks."""
    import pysbd

    from embedlab.data.sentences import _segmenter
    from embedlab.data.wikitext import wikitext2_paragraphs

    reference = pysbd.Segmenter(language="en", clean=False, char_span=False)
    texts = [*wikitext2_paragraphs("valid")[:150],
             "It rained. It rained. It rained.", "Go. Go now. Go.", "He said no.\u00a0\u2003 She said yes.\u3000",
             "Yes.  Yes.\n\nYes?  ", "Mr. Brown met Dr. Green at 10 a.m. on Jan. 5. They talked.\tThen they left. ",
             "no end at all", "Wait... what?! Really?!? OK."]
    for text in texts:
        assert _segmenter().segment(text) == reference.segment(text), text
