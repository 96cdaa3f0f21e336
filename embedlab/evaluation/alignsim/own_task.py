"""ALIGN-SIM on a user's own unlabelled texts: ``--tasks alignsim:@FILE`` (docs/alignsim.md, "Your own texts").

The criteria that need no labels run on the file's sentences (:mod:`.own_items` builds the items): criterion 2
(synonyms, α- and β-adjusted), criteria 3 and 5 and the negation check ``neg`` (S nearer its positive than its
antonym-replaced / jumbled / negated version), and criterion 1 when the file gives pairs (else one ``skipped``
record whose note says why). α and the random-pair NED come from random pairs of the file's own sentences (a
seeded derangement), never from the built-in datasets: each record that uses them says so in its note.

The headline, :data:`HEADLINE` (``triplet_pass_avg``), is the mean over the label-free triplet criteria (C3,
C5 with its three n averaged, ``neg``) of their ε pass rates (similarity margins, averaged over the ε grid):
higher is better, 0–1. Its interval resamples sentences, so the criteria a sentence takes part in move together.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import ClassVar

import numpy as np

from embedlab.data.own_texts import OwnPairs, OwnTexts, is_pairs_file, read_own_pairs, read_own_texts
from embedlab.evaluation.alignsim import criteria, metrics
from embedlab.evaluation.alignsim.items import PerturbationSet, SamplingConfig, TripletItem
from embedlab.evaluation.alignsim.own_items import NEGATION, build_own_set
from embedlab.evaluation.alignsim.perturb import N_VALUES
from embedlab.evaluation.alignsim.task import AlignSimSetup, AlignSimTask
from embedlab.evaluation.base import Method, Task
from embedlab.evaluation.records import Record, UnitScores
from embedlab.evaluation.scoring import PairScorer
from embedlab.runtime.memo import memo

HEADLINE = "triplet_pass_avg"
HEADLINE_SUBSET = "triplets"
# the triplet criteria the headline averages, each with the subsets it averages first
TRIPLET_CRITERIA = {"c3": ("c3",), "c5": tuple(f"c5/n={n}" for n in N_VALUES), NEGATION: (NEGATION,)}
OWN_RANDOM_NOTE = ("fitted on random pairs of the file's own sentences (a seeded derangement), not on the built-in "
                   "datasets: no interval")
OWN_ADJUSTED_NOTE = ("a mean rescaled by α / the random-pair NED of the file's own sentences (a seeded derangement, "
                     "not the built-in datasets): the unadjusted mean has an interval")
NO_PAIRS_NOTE = "criterion 1 needs paraphrase pairs (two text columns); this file gives single texts, so it is skipped"
SENTENCES_NOTE = "a count of the file's distinct sentences evaluated: no interval"


class OwnTextsTask(AlignSimTask):
    """The label-free ALIGN-SIM criteria on one user file (texts, or pairs with an optional label or score)."""

    options = ("seed", "perturbation")
    user_files = True
    # what comparisons and choices rank this task on (see the module docstring)
    headline_metric: ClassVar[str] = HEADLINE

    def __init__(self, dataset: str, *, path: str, seed: int = 0, perturbation: str = "ours") -> None:
        Task.__init__(self, dataset)
        self.path, self.seed, self.perturbation = path, seed, perturbation
        self.setup = AlignSimSetup(criteria=(1, 2, 3, 5), sampling=SamplingConfig(seed=seed, perturbation=perturbation))

    def settings(self) -> dict:
        return Task.settings(self)

    def check_data(self) -> None:
        """Read and check the file (empty, binary, too few sentences: one error naming it) before any encoding."""
        self.load()

    def load(self) -> tuple[OwnTexts | None, OwnPairs | None]:
        """The file's sentences, or its pairs (read once per process)."""
        def read() -> tuple[OwnTexts | None, OwnPairs | None]:
            if is_pairs_file(Path(self.path).expanduser()):
                return None, read_own_pairs(self.path)
            return read_own_texts(self.path), None

        return memo("alignsim.own_files", maxsize=4).get(self.dataset, read)

    def perturbations(self) -> PerturbationSet:
        """The seeded items of this file (memoised per process)."""
        return memo("alignsim.own_perturbations", maxsize=4).get(
            (self.dataset, self.setup.sampling), lambda: build_own_set(self.dataset, *self.load(), self.setup.sampling))

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        texts, pairs = self.load()
        perturbations = self.perturbations()
        scores = own_scores(method, perturbations, self.setup, pairs is not None)
        # every sampled sentence either gave a one-synonym item or was counted as skipped there
        used = sum(item.n == 1 for item in perturbations.items["c2"]) + perturbations.skipped["c2/n=1"]
        given = len(texts.sentences) if texts is not None else len(set(pairs.first))
        records = [self.record(method, *row) for row in scores.rows]
        records.append(self.record(method, "sentences", "sentences", used, given, note=SENTENCES_NOTE))
        units = headline_units(scores, perturbations, self.setup.cosine_epsilons)
        if units is not None:
            value = float(np.sum(units.arrays["numerator"]) / np.sum(units.arrays["denominator"]))
            records.append(self.record(method, HEADLINE_SUBSET, HEADLINE, value, len(units), units))
        return records


def own_scores(method: Method, perturbations: PerturbationSet, setup: AlignSimSetup, pairs_given: bool) -> criteria.Scores:
    """Every criterion's record rows and margins on a user's file, from one encode of its distinct texts."""
    items, skipped = perturbations.items, perturbations.skipped
    compared = [pair for kind in sorted(items) for item in items[kind] for pair in item.compared_pairs()]
    scorer = PairScorer(method, compared, batch_size=setup.batch_size)
    random = criteria.c1_pairs(items["c1"], "random")
    alpha = metrics.alpha([scorer.similarity(random)])
    distances = criteria.ned(scorer, random)
    random_ned = metrics.random_ned_level([distances]) if distances is not None else None
    scores = criteria.Scores()
    scores.add("adjustment", "alpha", alpha, len(random), note=OWN_RANDOM_NOTE)
    if random_ned is not None:
        scores.add("adjustment", "random_ned", random_ned, len(random), note=OWN_RANDOM_NOTE)
    epsilons = (setup.cosine_epsilons, setup.ned_epsilons)
    if pairs_given:
        scores.extend(criteria.semantic_distinction(scorer, items["c1"], *epsilons))
    else:
        sentences = len({item.text_a for item in items["c1"]})
        scores.add("c1", "skipped", sentences, sentences, note=NO_PAIRS_NOTE)
    for n in N_VALUES:
        subset = f"c2/n={n}"
        chosen = [item for item in items["c2"] if item.n == n]
        scores.extend(criteria.perturbed_pairs(scorer, subset, chosen, skipped[subset], alpha, random_ned))
    for subset in ("c3",) + TRIPLET_CRITERIA["c5"] + (NEGATION,):
        scores.extend(criteria.paraphrase_against_perturbed(scorer, subset, triplet_items(items, subset), skipped[subset],
                                                            *epsilons))
    scores.rows = [(subset, metric, value, n, units, OWN_ADJUSTED_NOTE if metric.endswith("_adjusted") else note)
                   for subset, metric, value, n, units, note in scores.rows]
    return scores


def triplet_items(items: dict[str, list], subset: str) -> list[TripletItem]:
    """The triplets of one subset (``c3``, ``c5/n=2``, ``neg``), in the order their margins are scored."""
    kind, _, n = subset.partition("/n=")
    return [item for item in items.get(kind, []) if not n or item.n == int(n)]


def headline_units(scores: criteria.Scores, perturbations: PerturbationSet, epsilons: tuple[float, ...]) -> UnitScores | None:
    """The headline's per-sentence units: Σ numerator / Σ denominator over the sentences is the mean over the
    triplet criteria that have items of each one's mean ε pass rate (C5: the mean over its n). Each item weighs
    1 / (criteria × the criterion's subsets × the subset's items), so every criterion counts equally; a sentence
    holds the weighted passes (numerator) and weights (denominator) of its items. None when no criterion has items."""
    present = {name: [s for s in subsets if (s, "sim") in scores.margins] for name, subsets in TRIPLET_CRITERIA.items()}
    present = {name: subsets for name, subsets in present.items() if subsets}
    if not present:
        return None
    numerator: dict[str, float] = defaultdict(float)
    denominator: dict[str, float] = defaultdict(float)
    grid = np.asarray(epsilons, dtype=np.float64)
    for subsets in present.values():
        for subset in subsets:
            margins = np.asarray(scores.margins[(subset, "sim")], dtype=np.float64)
            passed = (margins[:, None] > grid[None, :]).mean(axis=1)  # each item's pass rate over the ε grid
            weight = 1.0 / (len(present) * len(subsets) * len(margins))
            for item, rate in zip(triplet_items(perturbations.items, subset), passed):
                numerator[item.original] += weight * rate
                denominator[item.original] += weight
    sentences = list(numerator)
    return UnitScores("sentences", "ratio", {"numerator": np.array([numerator[s] for s in sentences]),
                                             "denominator": np.array([denominator[s] for s in sentences])})
