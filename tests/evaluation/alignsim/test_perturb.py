"""embedlab.evaluation.alignsim.perturb and lexicon: WordNet-valid synonym/antonym replacement of the right part of
speech, jumbling keeps the multiset of words, skipped sentences are counted, seeds fix the files."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from embedlab.evaluation.alignsim import lexicon
from embedlab.evaluation.alignsim.items import SamplingConfig
from embedlab.evaluation.alignsim.perturb import (
    authors_replace_words,
    build_perturbation_set,
    derangement,
    jumble,
    replace_words,
    stream_rng,
)

SENTENCES = [
    "Fewer than a dozen FBI agents were dispatched to secure and analyze evidence.",
    "The old committee quickly approved a new budget and rejected the costly proposal.",
    "She opened the heavy door and found a small dark room behind it.",
    "Investors were happy when the company announced strong profits.",
]


def _words(text: str) -> list[str]:
    return [token.text for token in lexicon.tag_sentences([text])[0]]


@pytest.fixture(scope="module")
def tagged():
    return lexicon.tag_sentences(SENTENCES)


def test_tokens_rebuild_the_sentence(tagged):
    for sentence, tokens in zip(SENTENCES, tagged):
        assert lexicon.detokenize(tokens) == sentence


def test_spacy_tags_verbs_in_context(tagged):
    dispatched = tagged[0][7]
    assert (dispatched.text, dispatched.pos, dispatched.tag) == ("dispatched", "VERB", "VBN")
    assert tagged[0][6].pos == "AUX"  # "were" is not a content verb: never replaced


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synonyms_are_wordnet_synonyms_of_the_same_part_of_speech(tagged, n, seed):
    wordnet = lexicon.wordnet()
    for tokens in tagged:
        outcome = replace_words(tokens, n, "synonym", stream_rng(seed, "test", n))
        assert outcome is not None, lexicon.detokenize(tokens)
        perturbed, changes = outcome
        assert len(changes) == n and len({c["token"] for c in changes}) == n
        original_words, new_words = [t.text for t in tokens], _words(perturbed)
        assert len(new_words) == len(original_words)
        changed = {index for index, (a, b) in enumerate(zip(original_words, new_words)) if a != b}
        assert changed == {c["token"] for c in changes}  # nothing else moved
        for change in changes:
            token = tokens[change["token"]]
            assert token.pos in ("VERB", "ADJ") and change["pos"] == token.pos
            wn_pos = lexicon.WORDNET_POS[token.pos]
            # the two lemmas share a WordNet synset of that part of speech
            shared = set(wordnet.synsets(change["lemma"], pos=wn_pos)) & set(wordnet.synsets(change["replacement_lemma"], pos=wn_pos))
            assert shared, change
            # the new surface form is an inflection of the new lemma in that part of speech
            assert change["replacement_lemma"] in wordnet._morphy(change["replacement"].lower(), wn_pos)
            assert new_words[change["token"]] == change["replacement"] != token.text


def test_inflection_keeps_the_slot_form():
    assert lexicon.inflect("deploy", "VBN") == "deployed"
    assert lexicon.inflect("send", "VBD") == "sent"  # irregular, from WordNet's verb.exc
    assert lexicon.inflect("stop", "VBG") == "stopping"  # consonant doubling, from verb.exc
    assert lexicon.inflect("carry", "VBZ") == "carries"
    assert lexicon.inflect("happy", "JJR") is None  # comparatives are left alone


def test_antonym_replacement_uses_direct_wordnet_antonyms(tagged):
    wordnet = lexicon.wordnet()
    for tokens in tagged[1:]:
        outcome = replace_words(tokens, 1, "antonym", stream_rng(0, "antonym"))
        assert outcome is not None, lexicon.detokenize(tokens)
        _, (change,) = outcome
        wn_pos = lexicon.WORDNET_POS[change["pos"]]
        opposites = {
            antonym.name()
            for synset in wordnet.synsets(change["lemma"], pos=wn_pos)
            for lemma in synset.lemmas()
            if lemma.name() == change["lemma"]
            for antonym in lemma.antonyms()
        }
        assert change["replacement_lemma"] in opposites


def test_sentence_without_replaceable_word_is_skipped():
    (tokens,) = lexicon.tag_sentences(["The cat on the mat."])
    assert replace_words(tokens, 1, "synonym", stream_rng(0)) is None
    assert replace_words(tokens, 1, "antonym", stream_rng(0)) is None
    (short,) = lexicon.tag_sentences(["Hello world ."])
    assert jumble(short, 2, stream_rng(0)) is None  # 2 swaps need 4 words


@pytest.mark.parametrize("n", [1, 2, 3])
def test_jumbling_keeps_the_multiset_of_words(tagged, n):
    for seed in range(5):
        for tokens in tagged:
            perturbed, swaps = jumble(tokens, n, stream_rng(seed, n))
            original = [t.text for t in tokens]
            # the perturbed text is exactly the original tokens, rearranged by the recorded swaps
            words = list(original)
            for swap in swaps:
                a, b = swap["tokens"]
                assert swap["words"] == [original[a], original[b]] and original[a] != original[b]
                words[a], words[b] = words[b], words[a]
            assert perturbed == "".join(w + t.whitespace for w, t in zip(words, tokens))
            assert Counter(words) == Counter(original)
            assert Counter(perturbed.replace(" ", "")) == Counter(lexicon.detokenize(tokens).replace(" ", ""))
            assert perturbed != lexicon.detokenize(tokens)
            assert len(swaps) == n and len({i for swap in swaps for i in swap["tokens"]}) == 2 * n
            assert all(not tokens[i].is_punct for swap in swaps for i in swap["tokens"])


def test_derangement_has_no_fixed_point():
    for seed in range(20):
        permutation = derangement(7, np.random.default_rng(seed))
        assert sorted(permutation) == list(range(7))
        assert all(permutation[i] != i for i in range(7))


SMALL = dict(pairs_per_label=25, sentences=25, triplets=25)


def test_same_seed_same_files_and_counts(tmp_path):
    first = build_perturbation_set("mrpc", SamplingConfig(seed=3, **SMALL))
    second = build_perturbation_set("mrpc", SamplingConfig(seed=3, **SMALL))
    other = build_perturbation_set("mrpc", SamplingConfig(seed=4, **SMALL))
    paths_a = first.save(tmp_path / "a")
    paths_b = second.save(tmp_path / "b")
    paths_c = other.save(tmp_path / "c")
    assert [p.name for p in paths_a] == [p.name for p in paths_b]
    for a, b in zip(paths_a, paths_b):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert any(a.read_bytes() != c.read_bytes() for a, c in zip(paths_a[:-1], paths_c[:-1]))
    # every sentence is either perturbed or counted as skipped
    for n in (1, 2, 3):
        kept = sum(1 for item in first.items["c2"] if item.n == n)
        assert kept + first.skipped[f"c2/n={n}"] == 25
        assert all(item.perturbed != item.original for item in first.items["c2"])
    assert len(first.items["c3"]) + first.skipped["c3"] == 25
    # random pairs never keep their own partner; positives are label-1 pairs
    kinds = Counter(item.kind for item in first.items["c1"])
    assert kinds == {"positive": 25, "random": 25}
    for item in first.items["c1"]:
        assert (item.source_a == item.source_b) == (item.kind == "positive")
    # the saved files load back to the same items
    loaded = type(first).load(tmp_path / "a", "mrpc")
    assert loaded.items == first.items and loaded.skipped == first.skipped


# ---------------------------------------------------------------- perturbation="authors" (the authors' released code)


def test_authors_lexicon_uses_every_sense_and_part_of_speech_uninflected():
    assert len(lexicon.nltk_stopwords()) == 179 and {"the", "is", "he", "don't"} <= lexicon.nltk_stopwords()
    dispatched = lexicon.authors_synonyms("dispatched")
    # WordNet maps the inflected form to its lemma, which itself counts as a "synonym", uninflected
    assert {"dispatch", "send off", "murder"} <= set(dispatched)  # the send and the kill senses
    assert "dispatched" not in dispatched and not any(word.endswith("ed") for word in dispatched)
    assert {"toilet", "dismiss", "tin"} <= set(lexicon.authors_synonyms("can"))  # nouns and verbs
    assert "dog" in lexicon.authors_synonyms("Dog")  # only the exact word is removed, as in their code
    assert lexicon.authors_synonyms("evidence.") == ()  # punctuation stays attached to whitespace words
    assert {"bad", "evil"} <= set(lexicon.authors_antonyms("good"))


def test_authors_replacement_replaces_every_occurrence():
    # "and"/"the" are stop words and "." has no synset: "cat" is the only candidate
    perturbed, changes = authors_replace_words("cat and cat and the cat .", 1, "synonym", stream_rng(0))
    (change,) = changes
    new = change["replacement"]
    assert change["original"] == "cat" and change["words"] == [0, 2, 5]
    assert new in lexicon.authors_synonyms("cat")
    assert perturbed == f"{new} and {new} and the {new} ."


def test_authors_replacement_keeps_a_sentence_with_fewer_candidates():
    # their loop stops at the end of the candidate list: one candidate and n = 2 gives one replacement ...
    perturbed, (change,) = authors_replace_words("cat and cat and the cat .", 2, "synonym", stream_rng(0))
    assert change["original"] == "cat" and change["replacement"] in lexicon.authors_synonyms("cat")
    assert perturbed == " ".join(change["replacement"] if word == "cat" else word for word in "cat and cat and the cat .".split())
    # ... and no candidate gives the sentence back unchanged, with no changes (their evaluation scores it too)
    assert authors_replace_words("he was there .", 1, "synonym", stream_rng(0)) == ("he was there .", [])
    assert authors_replace_words("he  was\tthere .", 3, "antonym", stream_rng(0)) == ("he was there .", [])


def test_authors_replacement_candidates_are_case_sensitive_non_stop_words():
    # their stop-word check is case-sensitive: "He" is a candidate (WordNet: helium), "he" is not
    assert authors_replace_words("he was there .", 1, "synonym", stream_rng(0))[1] == []
    perturbed, (change,) = authors_replace_words("He was there .", 1, "synonym", stream_rng(0))
    assert change["original"] == "He" and "helium" in lexicon.authors_synonyms("He")
    assert perturbed == f"{change['replacement']} was there ."
    perturbed, (change,) = authors_replace_words("they were dispatched", 1, "synonym", stream_rng(1))
    assert change["original"] == "dispatched" and perturbed == f"they were {change['replacement']}"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_authors_replacement_changes_n_distinct_words(seed):
    sentence = "Fewer than a dozen FBI agents were dispatched to secure and analyze evidence ."
    for n in (1, 2, 3):
        perturbed, changes = authors_replace_words(sentence, n, "synonym", stream_rng(seed, n))
        originals = [change["original"] for change in changes]
        assert len(set(originals)) == n and not set(originals) & lexicon.nltk_stopwords()
        expected = {change["original"]: change["replacement"] for change in changes}
        assert perturbed == " ".join(expected.get(word, word) for word in sentence.split())


def test_perturbation_mode_is_part_of_the_sampling(tmp_path):
    with pytest.raises(ValueError, match="unknown ALIGN-SIM perturbation"):
        SamplingConfig(perturbation="paper")
    config = SamplingConfig(seed=3, perturbation="authors", **SMALL)
    built = build_perturbation_set("mrpc", config, {"c2", "c3"})
    stopwords = lexicon.nltk_stopwords()

    def candidates(sentence: str, lookup) -> int:
        return sum(1 for word in set(sentence.split()) if word not in stopwords and lookup(word))

    for n in (1, 2, 3):
        items = [item for item in built.items["c2"] if item.n == n]
        # the authors' mode keeps every sampled sentence, with min(n, candidates) words replaced
        assert len(items) == 25 and built.skipped[f"c2/n={n}"] == 0
        assert all(len(item.changes) == min(n, candidates(item.original, lexicon.authors_synonyms)) for item in items)
    assert len(built.items["c3"]) == 25 and built.skipped["c3"] == 0
    for item in built.items["c3"]:  # one antonym where the sentence has a candidate; unchanged where it has none
        assert len(item.changes) == min(1, candidates(item.original, lexicon.authors_antonyms))
        if not item.changes:
            assert item.perturbed == " ".join(item.original.split())
    assert all(change["replacement"] in lexicon.authors_antonyms(change["original"])
               for item in built.items["c3"] for change in item.changes)
    built.save(tmp_path)
    assert type(built).load(tmp_path, "mrpc").config == config


def test_whole_word_jumbling_never_moves_a_clitic():
    sentence = "A woman measures another woman's ankle, and he doesn't mind it at all."
    tokens = lexicon.tag_sentences([sentence])[0]
    words = Counter(word.strip(",.") for word in sentence.split())
    for seed in range(10):
        text, swaps = jumble(tokens, 2, stream_rng(seed, "clitics"), whole_words=True)
        # whole words change places ("woman's" and "doesn't" stay whole), so the words between spaces are the same
        assert Counter(word.strip(",.") for word in text.split()) == words and text != sentence
        assert not {"'s", "n't", "does"} & {word for swap in swaps for word in swap["words"]}
