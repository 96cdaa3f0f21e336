"""ALIGN-SIM's perturbation items built from a user's own sentences (``alignsim:@FILE``, docs/alignsim.md "Your own
texts"), with the perturbation code and seeded streams of the built-in datasets (:mod:`.perturb`).

* ``c2``: S with n = 1, 2, 3 verbs/adjectives replaced by synonyms, as the paper's criterion 2.
* The positive of the triplet criteria: S's paraphrase when the file gives pairs, else S's synonym-replaced
  version (``c2`` at n = 1, which keeps the meaning). A sentence without one gives no triplet (counted).
* ``c3`` (one antonym), ``c5`` (n = 1, 2, 3 swaps of whole words: never a clitic such as ``'s``) and ``neg`` (a negation inserted,
  :mod:`.negation`): triplets (S, positive, perturbed) whose expectation is S nearer its positive.
* ``c1``: the file's positive pairs, when it gives pairs, and ``random`` pairs: S beside another of the file's
  sentences by a seeded derangement (no sentence keeps its own partner). The random pairs give α and the
  random-pair NED (Eq. 1–2) on the user's own domain, whether or not the file gives pairs.

A sentence that cannot be perturbed is skipped and counted in ``PerturbationSet.skipped``, never kept unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from embedlab.data.own_texts import OwnPairs, OwnTexts
from embedlab.evaluation.alignsim import lexicon
from embedlab.evaluation.alignsim.items import PairItem, PerturbationSet, PerturbedItem, SamplingConfig, TripletItem
from embedlab.evaluation.alignsim.negation import negate, parse_sentences
from embedlab.evaluation.alignsim.perturb import N_VALUES, derangement, jumble, replacer, stream_rng

NEGATION = "neg"  # the negation check's kind and subset (never criterion 4's c4)
STREAM = "own"  # the random streams' dataset name


def sentences_of(texts: OwnTexts | None, pairs: OwnPairs | None) -> tuple[list[str], list[str], dict[str, str]]:
    """(sentences S, their sources, S → its paraphrase from the file): the first texts of the positive pairs
    of a pairs file (each once, with the first paraphrase given), or a texts file's sentences."""
    if pairs is None:
        return texts.sentences, [f"{texts.source}:{line}" for line in texts.lines], {}
    paraphrases: dict[str, str] = {}
    sources: dict[str, str] = {}
    for (first, second), keep, line in zip(zip(pairs.first, pairs.second), pairs.positive, pairs.lines):
        if keep and first not in paraphrases:
            paraphrases[first], sources[first] = second, f"{pairs.source}:{line}"
    return list(paraphrases), list(sources.values()), paraphrases


def build_own_set(dataset: str, texts: OwnTexts | None, pairs: OwnPairs | None, config: SamplingConfig) -> PerturbationSet:
    """Every item of a user's file: at most ``config.sentences`` sentences (a seeded sample of a larger file) and
    (for a pairs file) ``config.pairs_per_label`` positive and random pairs; a texts file pairs every sentence."""
    sentences, sources, paraphrases = sentences_of(texts, pairs)
    chosen = [(sentences[index], sources[index]) for index in _drawn(len(sentences), config.sentences, config.seed, "sentences")]
    result = PerturbationSet(dataset, config)
    result.items["c1"] = _pair_items(pairs, [s for s, _ in chosen], dict(chosen), config)
    tagged = dict(zip([s for s, _ in chosen], lexicon.tag_sentences([s for s, _ in chosen])))
    replace = replacer(config, tagged)
    result.items["c2"] = []
    for n in N_VALUES:
        items, result.skipped[f"c2/n={n}"] = _each(
            chosen, lambda text, n=n: replace(text, n=n, relation="synonym", rng=stream_rng(config.seed, STREAM, "c2", n, text)),
            lambda text, source, perturbed, changes, n=n: PerturbedItem(text, perturbed, source, n, changes))
        result.items["c2"] += items
    if not paraphrases:  # no paraphrase in the file: S's one-synonym version is its positive
        paraphrases = {item.original: item.perturbed for item in result.items["c2"] if item.n == 1}
    triplets = [(text, source) for text, source in chosen if text in paraphrases]
    missing = len(chosen) - len(triplets)  # sentences without a positive give no triplet: counted as skipped

    def triplet(fields: Callable[[list[dict]], dict]) -> Callable:
        return lambda text, source, perturbed, changes: TripletItem(text, paraphrases[text], perturbed, source, **fields(changes))

    result.items["c3"], skipped = _each(
        triplets, lambda text: replace(text, n=1, relation="antonym", rng=stream_rng(config.seed, STREAM, "c3", text)),
        triplet(lambda changes: {"changes": changes}))
    result.skipped["c3"] = skipped + missing
    result.items["c5"] = []
    for n in N_VALUES:
        items, skipped = _each(triplets, lambda text, n=n: jumble(tagged[text], n, stream_rng(config.seed, STREAM, "c5", n, text),
                                                                 whole_words=True),
                               triplet(lambda swaps, n=n: {"n": n, "swaps": swaps}))
        result.items["c5"] += items
        result.skipped[f"c5/n={n}"] = skipped + missing
    parsed = dict(zip([text for text, _ in triplets], parse_sentences([text for text, _ in triplets])))
    result.items[NEGATION], skipped = _each(triplets, lambda text: negate(parsed[text]),
                                            triplet(lambda changes: {"changes": changes}))
    result.skipped[NEGATION] = skipped + missing
    return result


def _drawn(size: int, most: int | None, seed: int, purpose: str) -> list[int]:
    """Every index in file order, or a seeded sample of ``most`` of them (kept in file order) when there are more."""
    if most is None or size <= most:
        return list(range(size))
    return sorted(int(index) for index in stream_rng(seed, STREAM, purpose).choice(size, size=most, replace=False))


def _each(chosen: list[tuple[str, str]], perturb: Callable, make: Callable) -> tuple[list, int]:
    """``make(text, source, perturbed, changes)`` for every sentence ``perturb`` can change; the others counted."""
    items, skipped = [], 0
    for text, source in chosen:
        outcome = perturb(text)
        if outcome is None:
            skipped += 1
            continue
        items.append(make(text, source, *outcome))
    return items, skipped


def _pair_items(pairs: OwnPairs | None, sentences: list[str], sources: dict[str, str], config: SamplingConfig) -> list[PairItem]:
    """Criterion 1's positive pairs (a pairs file only) and the random pairs of a seeded derangement: the first
    text of a pair beside another pair's second text, or a sentence beside another sentence."""
    items: list[PairItem] = []
    if pairs is not None:
        rows = [(a, b, f"{pairs.source}:{line}") for a, b, line in zip(pairs.first, pairs.second, pairs.lines)]
        positive = [row for row, keep in zip(rows, pairs.positive) if keep]
        chosen = [positive[index] for index in _drawn(len(positive), config.pairs_per_label, config.seed, "positive")]
        items += [PairItem("positive", a, b, source, source) for a, b, source in chosen]
        drawn = [rows[index] for index in _drawn(len(rows), config.pairs_per_label, config.seed, "random")]
        firsts, seconds = [(a, s) for a, _, s in drawn], [(b, s) for _, b, s in drawn]
    else:
        firsts = seconds = [(text, sources[text]) for text in sentences]  # every sentence used, once on each side
    shuffle = derangement(len(firsts), stream_rng(config.seed, STREAM, "c1", "shuffle"))
    for index, partner in enumerate(shuffle):
        (first, source_a), (second, source_b) = firsts[index], seconds[int(partner)]
        items.append(PairItem("random", first, second, source_a, source_b))
    return items
