"""ALIGN-SIM perturbation sets (paper §4, §5.1, §5.3 and Appendix A.2).

From each paraphrase dataset (QQP, PAWS-Wiki, MRPC) one seed fixes:

* criterion 1 — ``positive`` pairs (label 1) and ``random`` pairs: label-0 pairs whose second sentences
  are shuffled among themselves (a permutation with no fixed point), so no pair keeps its partner;
* criterion 2 — single sentences (positives first, then negatives, as the paper's sampling) with
  n = 1, 2, 3 verbs/adjectives replaced by WordNet synonyms of the same part of speech;
* criterion 3 — triplets (S, S'_P, S'_A): a positive pair and S with one verb/adjective replaced by a
  WordNet antonym;

  both as the paper's text says (``perturbation="ours"``: verbs/adjectives tagged in context, the synonym
  re-inflected into the slot), or as the authors' released code does (``perturbation="authors"``: any
  whitespace word not in NLTK's stop-word list, synonyms/antonyms of every sense and part of speech,
  uninflected, every occurrence of the chosen word replaced);
* criterion 5 — triplets (S, S'_P, S'_J): a positive pair and S with n = 1, 2, 3 disjoint pairs of
  words swapped;

and AFIN gives criterion 4's (negated sentence, affirmative interpretation) pairs.

Every item records what changed and where (token index, character offset, old and new word). A
sentence that cannot be perturbed (no replaceable word, too few words to swap) is skipped and
counted in ``PerturbationSet.skipped``, never kept unchanged; except in ``perturbation="authors"``,
which keeps every sentence with as many replacements as it has candidates (fewer than n, or none), as
the authors' code scores every sampled sentence. The item types and the JSON-lines files are
:mod:`embedlab.evaluation.alignsim.items`'s.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import partial

import numpy as np

from embedlab.errors import InputError
from embedlab.evaluation.alignsim import lexicon
from embedlab.evaluation.alignsim.items import (Item, PairItem, PerturbationSet, PerturbedItem, SamplingConfig,
                                                TripletItem)
from embedlab.evaluation.alignsim.sources import PARAPHRASE_DATASETS, SentencePair, read_dataset

__all__ = ["N_VALUES", "build_perturbation_set", "stream_rng",
           "derangement", "replacement_options", "replace_words", "replacer", "authors_replace_words", "jumble"]

N_VALUES = (1, 2, 3)
MAX_SWAP_TRIES = 20


def stream_rng(seed: int, *names: object) -> np.random.Generator:
    """An independent random stream per (seed, purpose): adding a dataset or kind never shifts another's draws."""
    keys = [seed] + [zlib.crc32(str(name).encode()) for name in names]
    return np.random.default_rng(keys)


def _sample(items: list, size: int | None, rng: np.random.Generator) -> list:
    if size is None or size >= len(items):
        order = rng.permutation(len(items))
    else:
        order = rng.choice(len(items), size=size, replace=False)
    return [items[int(index)] for index in order]


def derangement(size: int, rng: np.random.Generator) -> np.ndarray:
    """A random permutation with no fixed point (each random pair gets a foreign second sentence)."""
    if size < 2:
        raise ValueError(f"random pairs need at least 2 negative pairs to shuffle, got {size}")
    permutation = rng.permutation(size)
    for index in range(size):
        if permutation[index] == index:  # swap with a neighbour: both positions then differ from their own
            other = (index + 1) % size
            permutation[index], permutation[other] = permutation[other], permutation[index]
    return permutation


# ---------------------------------------------------------------- word replacement (criteria 2 and 3)


def replacement_options(token: lexicon.Token, relation: str) -> list[tuple[str, str, str]]:
    """(inflected replacement, its lemma, the token's lemma) for a verb/adjective token; [] when none.

    ``relation`` is ``synonym`` or ``antonym``. Only content verbs and adjectives qualify (spaCy POS
    VERB/ADJ, not auxiliaries or stop words) whose form we can regenerate for the new word.
    """
    if token.pos not in lexicon.WORDNET_POS or token.tag not in lexicon.INFLECTABLE_TAGS:
        return []
    if not token.is_alpha or token.is_stop or len(token.text) < 2:
        return []
    wordnet_pos = lexicon.WORDNET_POS[token.pos]
    if (token.tag == "JJ") != (wordnet_pos == "a"):
        return []  # tag and coarse POS disagree (e.g. ADJ tagged VBN): leave it alone
    lemma = lexicon.lemma_of(token.text, wordnet_pos)
    if lemma is None:
        return []
    related = lexicon.synonyms(lemma, wordnet_pos) if relation == "synonym" else lexicon.antonyms(lemma, wordnet_pos)
    options = []
    for word in related:
        form = lexicon.inflect(word, token.tag)
        if form is None or form.lower() == token.text.lower():
            continue
        options.append((lexicon.match_case(form, token.text), word, lemma))
    return options


def replace_words(
    tokens: list[lexicon.Token], n: int, relation: str, rng: np.random.Generator
) -> tuple[str, list[dict]] | None:
    """Replace ``n`` distinct verb/adjective tokens by WordNet synonyms/antonyms; None if fewer than n qualify."""
    candidates = []
    for index, token in enumerate(tokens):
        options = replacement_options(token, relation)
        if options:
            candidates.append((index, options))
    if len(candidates) < n:
        return None
    chosen = sorted(int(i) for i in rng.choice(len(candidates), size=n, replace=False))
    replacements, changes = {}, []
    for candidate in chosen:
        index, options = candidates[candidate]
        form, new_lemma, old_lemma = options[int(rng.integers(len(options)))]
        token = tokens[index]
        replacements[index] = form
        changes.append(
            {
                "token": index,
                "start": token.start,
                "original": token.text,
                "replacement": form,
                "pos": token.pos,
                "tag": token.tag,
                "lemma": old_lemma,
                "replacement_lemma": new_lemma,
            }
        )
    return lexicon.detokenize(tokens, replacements), changes


def authors_replace_words(sentence: str, n: int, relation: str, rng: np.random.Generator) -> tuple[str, list[dict]]:
    """Replace up to ``n`` distinct words as the authors' ``WordReplacer.sentence_replacement`` does.

    Words are the whitespace-split tokens (punctuation stays attached, so ``evidence.`` finds no synonym); a
    candidate is a distinct word not in NLTK's stop words (case-sensitive, as theirs: ``Is`` is a candidate)
    with at least one WordNet synonym/antonym (:func:`lexicon.authors_synonyms`); the replacement is a random
    one of them, uninflected, and replaces every occurrence of the word; the words are joined by single
    spaces. A sentence with fewer than n candidates gets them all replaced (none: it comes back unchanged
    with no changes), because their loop stops at the end of the candidate list and their evaluation scores
    every sampled sentence; the caller keeps it, so the mean covers the same sentences as theirs.
    """
    words = sentence.split()
    lookup = lexicon.authors_synonyms if relation == "synonym" else lexicon.authors_antonyms
    stopwords = lexicon.nltk_stopwords()
    candidates = [(word, options) for word in dict.fromkeys(words)
                  if word not in stopwords and (options := lookup(word))]
    replacements, changes = {}, []
    chosen = rng.choice(len(candidates), size=min(n, len(candidates)), replace=False) if candidates else []
    for candidate in sorted(int(i) for i in chosen):
        word, options = candidates[candidate]
        replacements[word] = options[int(rng.integers(len(options)))]
        changes.append({"original": word, "replacement": replacements[word],
                        "words": [index for index, other in enumerate(words) if other == word]})
    return " ".join(replacements.get(word, word) for word in words), changes


# ---------------------------------------------------------------- jumbling (criterion 5)


def jumble(tokens: list[lexicon.Token], n: int, rng: np.random.Generator,
           whole_words: bool = False) -> tuple[str, list[dict]] | None:
    """Swap ``n`` disjoint pairs of different words (punctuation stays put); None if the sentence is too short.

    ``whole_words``: swap only tokens that stand alone between spaces or punctuation, never one glued to a word
    (the ``'s`` of ``woman's``, the ``n't`` of ``don't``): moved, it would fuse with its new neighbour
    (``another 'swoman``) and change the words a tokenizer sees, not only their order. ``alignsim:@FILE`` sets
    it; the built-in datasets keep the committed behaviour (False)."""
    words = [index for index, token in enumerate(tokens) if not token.is_punct and not token.text.isspace()
             and not (whole_words and _glued(tokens, index))]
    if len(words) < 2 * n or len({tokens[i].text for i in words}) < 2:
        return None
    for _ in range(MAX_SWAP_TRIES):
        picked = [words[int(i)] for i in rng.choice(len(words), size=2 * n, replace=False)]
        pairs = [(picked[2 * k], picked[2 * k + 1]) for k in range(n)]
        if all(tokens[a].text != tokens[b].text for a, b in pairs):  # a swap of equal words changes nothing
            break
    else:
        return None
    replacements, swaps = {}, []
    for a, b in sorted(tuple(sorted(pair)) for pair in pairs):
        replacements[a], replacements[b] = tokens[b].text, tokens[a].text
        swaps.append({"tokens": [a, b], "starts": [tokens[a].start, tokens[b].start], "words": [tokens[a].text, tokens[b].text]})
    return lexicon.detokenize(tokens, replacements), swaps


def _glued(tokens: list[lexicon.Token], index: int) -> bool:
    """Whether token ``index`` touches a neighbouring word with no space between (``woman`` + ``'s``)."""
    before = index > 0 and not tokens[index - 1].whitespace and not tokens[index - 1].is_punct
    after = index + 1 < len(tokens) and not tokens[index].whitespace and not tokens[index + 1].is_punct
    return before or after


# ---------------------------------------------------------------- building a dataset's sets


def _criterion1(pairs: list[SentencePair], config: SamplingConfig, dataset: str) -> list[PairItem]:
    positives = [pair for pair in pairs if pair.label == 1]
    negatives = [pair for pair in pairs if pair.label == 0]
    items = [PairItem("positive", p.text_a, p.text_b, p.source, p.source)
             for p in _sample(positives, config.pairs_per_label, stream_rng(config.seed, dataset, "c1", "positive"))]
    sampled_negatives = _sample(negatives, config.pairs_per_label, stream_rng(config.seed, dataset, "c1", "random"))
    shuffle = derangement(len(sampled_negatives), stream_rng(config.seed, dataset, "c1", "shuffle"))
    for index, partner in enumerate(shuffle):
        first, second = sampled_negatives[index], sampled_negatives[int(partner)]
        items.append(PairItem("random", first.text_a, second.text_b, first.source, second.source))
    return items


def _unique_first_sentences(pairs: list[SentencePair]) -> list[SentencePair]:
    seen, unique = set(), []
    for pair in pairs:
        if pair.text_a not in seen:
            seen.add(pair.text_a)
            unique.append(pair)
    return unique


def _criterion2_originals(pairs: list[SentencePair], config: SamplingConfig, dataset: str) -> list[SentencePair]:
    """Positives first, negatives only to fill up (the paper's sampling), one item per distinct sentence."""
    positives = _unique_first_sentences([p for p in pairs if p.label == 1])
    positive_texts = {p.text_a for p in positives}
    negatives = _unique_first_sentences([p for p in pairs if p.label == 0 and p.text_a not in positive_texts])
    originals = _sample(positives, config.sentences, stream_rng(config.seed, dataset, "c2", "positive"))
    if len(originals) < config.sentences:
        originals += _sample(negatives, config.sentences - len(originals), stream_rng(config.seed, dataset, "c2", "negative"))
    return originals


def _perturb_each(pairs: list[SentencePair], perturb: Callable, make: Callable) -> tuple[list[Item], int]:
    """``make(pair, perturbed, changes)`` for every pair whose first sentence ``perturb`` can change; the
    others are counted."""
    items, skipped = [], 0
    for pair in pairs:
        outcome = perturb(pair.text_a)
        if outcome is None:
            skipped += 1
            continue
        items.append(make(pair, *outcome))
    return items, skipped


def replacer(config: SamplingConfig, tagged: dict[str, list[lexicon.Token]]) -> Callable:
    """``replace(text, n, relation, rng)``: the word replacement ``config.perturbation`` names."""
    if config.perturbation == "authors":
        return authors_replace_words
    return lambda text, n, relation, rng: replace_words(tagged[text], n, relation, rng)


def build_perturbation_set(dataset: str, config: SamplingConfig, kinds: set[str] | None = None) -> PerturbationSet:
    """Sample and perturb one dataset's items for the criteria in ``kinds`` (default: all that apply)."""
    pairs = read_dataset(dataset)
    result = PerturbationSet(dataset, config)
    if dataset == "afin":
        if kinds is None or "c4" in kinds:
            chosen = _sample(pairs, config.afin_pairs, stream_rng(config.seed, dataset, "c4"))
            result.items["c4"] = [PerturbedItem(p.text_a, p.text_b, p.source) for p in chosen]
        return result
    if dataset not in PARAPHRASE_DATASETS:
        raise InputError(f"unknown ALIGN-SIM dataset {dataset!r}")
    kinds = kinds if kinds is not None else {"c1", "c2", "c3", "c5"}
    if "c1" in kinds:
        result.items["c1"] = _criterion1(pairs, config, dataset)
    originals = _criterion2_originals(pairs, config, dataset) if "c2" in kinds else []
    triplets: list[SentencePair] = []
    if kinds & {"c3", "c5"}:
        positives = _unique_first_sentences([p for p in pairs if p.label == 1])
        triplets = _sample(positives, config.triplets, stream_rng(config.seed, dataset, "triplets"))
    texts = list(dict.fromkeys([p.text_a for p in originals] + [p.text_a for p in triplets]))
    tagged = dict(zip(texts, lexicon.tag_sentences(texts)))
    replace = replacer(config, tagged)
    if "c2" in kinds:
        result.items["c2"] = []
        for n in N_VALUES:
            rng = stream_rng(config.seed, dataset, "c2", n)
            items, result.skipped[f"c2/n={n}"] = _perturb_each(
                originals, partial(replace, n=n, relation="synonym", rng=rng),
                lambda pair, perturbed, changes, n=n: PerturbedItem(pair.text_a, perturbed, pair.source, n, changes))
            result.items["c2"] += items
    if "c3" in kinds:
        result.items["c3"], result.skipped["c3"] = _perturb_each(
            triplets, partial(replace, n=1, relation="antonym", rng=stream_rng(config.seed, dataset, "c3")),
            lambda pair, perturbed, changes: TripletItem(pair.text_a, pair.text_b, perturbed, pair.source, changes=changes))
    if "c5" in kinds:
        result.items["c5"] = []
        for n in N_VALUES:
            rng = stream_rng(config.seed, dataset, "c5", n)
            items, result.skipped[f"c5/n={n}"] = _perturb_each(
                triplets, lambda text, n=n, rng=rng: jumble(tagged[text], n, rng),
                lambda pair, perturbed, swaps, n=n: TripletItem(pair.text_a, pair.text_b, perturbed, pair.source, n, swaps=swaps))
            result.items["c5"] += items
    return result
