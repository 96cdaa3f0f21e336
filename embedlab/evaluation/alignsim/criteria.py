"""The ALIGN-SIM criteria as functions of one dataset's scored items (paper §4, §5.2–5.3): each returns
:class:`Scores`, the rows of its records and its per-item margins, and stores nothing; the task
(:mod:`embedlab.evaluation.alignsim.task`) turns rows into records and keeps the margins.

A scorer that is pairwise (token matching) has no vectors: its own similarity stands in for cosine and NED
is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from embedlab.evaluation.alignsim import metrics
from embedlab.evaluation.alignsim.items import PairItem, PerturbedItem, TripletItem
from embedlab.evaluation.records import UnitScores
from embedlab.evaluation.scoring import PairScorer


# why the records that are not a mean over the items have no interval
COUNT_NOTE = "a count of sentences that could not be perturbed: no interval"
DIFFERENCE_NOTE = "a difference of two means over different pairs: no interval (each mean has one)"
ADJUSTED_NOTE = "a mean rescaled by the adjustment (Eq. 1–2) fitted on other data: the unadjusted mean has an interval"


def item_units(values: np.ndarray) -> UnitScores:
    """The items behind a mean over items (what its bootstrap resamples)."""
    return UnitScores("items", "mean", {"score": np.asarray(values, dtype=np.float64)})


@dataclass
class Scores:
    """What criteria scored: ``rows`` of (subset, metric, value, n, per-item units or None, note or None),
    in the order records list them, and per-item ``margins`` by (subset, metric kind ``sim`` / ``ned``), float32."""

    rows: list[tuple[str, str, float, int, UnitScores | None, str | None]] = field(default_factory=list)
    margins: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)

    def add(self, subset: str, metric: str, value: float, n: int, units: UnitScores | None = None,
            note: str | None = None) -> None:
        self.rows.append((subset, metric, value, n, units, note))

    def mean(self, subset: str, metric: str, values: np.ndarray) -> None:
        """The mean of per-item values, with the items as its units."""
        self.add(subset, metric, np.mean(values), len(values), item_units(values))

    def rate(self, subset: str, kind: str, margins: np.ndarray, epsilons: tuple[float, ...]) -> None:
        """The mean margin and the pass rates over the ε grid (their average and each ε) of one margin kind."""
        margins = margins.astype(np.float32)
        rates = metrics.pass_rates(margins, epsilons)
        self.margins[(subset, kind)] = margins
        passed = np.asarray(margins, dtype=np.float64)[:, None] > np.asarray(epsilons)[None, :]  # items × ε
        self.add(subset, f"{kind}_margin_mean", float(np.mean(margins)), len(margins), item_units(margins))
        self.add(subset, f"{kind}_pass_avg", float(np.mean(rates)), len(margins), item_units(passed.mean(axis=1)))
        for column, (eps, value) in enumerate(zip(epsilons, rates)):
            self.add(subset, f"{kind}_pass@{eps:g}", float(value), len(margins), item_units(passed[:, column]))

    def extend(self, other: Scores) -> None:
        self.rows += other.rows
        self.margins.update(other.margins)


def ned(scorer: PairScorer, pairs: list[tuple[str, str]]) -> np.ndarray | None:
    """Each pair's NED, or None for a pairwise scorer (no vectors)."""
    return None if scorer.pairwise else metrics.ned(*scorer.vectors(pairs))


def c1_pairs(items: Sequence[PairItem], kind: str) -> list[tuple[str, str]]:
    """The criterion-1 pairs of one kind (``positive`` or ``random``)."""
    return [(item.text_a, item.text_b) for item in items if item.kind == kind]


def semantic_distinction(scorer: PairScorer, items: Sequence[PairItem], cosine_epsilons: tuple[float, ...],
                         ned_epsilons: tuple[float, ...]) -> Scores:
    """Criterion 1: paraphrase pairs against random pairs; the margins pair the i-th positive with the i-th
    random pair."""
    scores = Scores()
    positive, random = c1_pairs(items, "positive"), c1_pairs(items, "random")
    similarity_positive, similarity_random = scorer.similarity(positive), scorer.similarity(random)
    count = min(len(positive), len(random))
    scores.mean("c1", "sim_pos_mean", similarity_positive)
    scores.mean("c1", "sim_rnd_mean", similarity_random)
    scores.add("c1", "sim_diff_mean", np.mean(similarity_positive) - np.mean(similarity_random), count, note=DIFFERENCE_NOTE)
    scores.rate("c1", "sim", similarity_positive[:count] - similarity_random[:count], cosine_epsilons)
    ned_positive, ned_random = ned(scorer, positive), ned(scorer, random)
    if ned_positive is not None:
        scores.mean("c1", "ned_pos_mean", ned_positive)
        scores.mean("c1", "ned_rnd_mean", ned_random)
        scores.add("c1", "ned_diff_mean", np.mean(ned_positive) - np.mean(ned_random), count, note=DIFFERENCE_NOTE)
        scores.rate("c1", "ned", ned_random[:count] - ned_positive[:count], ned_epsilons)
    return scores


def perturbed_pairs(scorer: PairScorer, subset: str, items: Sequence[PerturbedItem], skipped: int | None,
                    alpha: float | None, random_ned: float | None) -> Scores:
    """Criteria 2 and 4: S beside its synonym-replaced / affirmative version, the similarity scaled by α
    (Eq. 1) and the NED by the random-pair level (Eq. 2); ``skipped`` (None for criterion 4) counts the
    sentences that could not be perturbed."""
    scores = Scores()
    if not items:
        if skipped is not None:
            scores.add(subset, "skipped", skipped, skipped, note=COUNT_NOTE)
        return scores
    pairs = [(item.original, item.perturbed) for item in items]
    similarities = scorer.similarity(pairs)
    similarity = float(np.mean(similarities))
    scores.mean(subset, "sim_mean", similarities)
    scores.add(subset, "sim_adjusted", metrics.alpha_adjusted(similarity, alpha), len(pairs), note=ADJUSTED_NOTE)
    distances = ned(scorer, pairs)
    if distances is not None:
        scores.mean(subset, "ned_mean", distances)
        scores.add(subset, "ned_adjusted", metrics.beta_adjusted(float(np.mean(distances)), random_ned), len(pairs),
                   note=ADJUSTED_NOTE)
    if skipped is not None:
        scores.add(subset, "skipped", skipped, len(pairs) + skipped, note=COUNT_NOTE)
    return scores


def paraphrase_against_perturbed(scorer: PairScorer, subset: str, items: Sequence[TripletItem], skipped: int,
                                 cosine_epsilons: tuple[float, ...], ned_epsilons: tuple[float, ...]) -> Scores:
    """Criteria 3 and 5: S nearer its paraphrase than its antonym-replaced / jumbled version."""
    scores = Scores()
    if not items:
        scores.add(subset, "skipped", skipped, skipped, note=COUNT_NOTE)
        return scores
    paraphrase = [(item.original, item.paraphrase) for item in items]
    perturbed = [(item.original, item.perturbed) for item in items]
    similarity_paraphrase, similarity_perturbed = scorer.similarity(paraphrase), scorer.similarity(perturbed)
    scores.mean(subset, "sim_para_mean", similarity_paraphrase)
    scores.mean(subset, "sim_perturbed_mean", similarity_perturbed)
    scores.rate(subset, "sim", similarity_paraphrase - similarity_perturbed, cosine_epsilons)
    ned_paraphrase, ned_perturbed = ned(scorer, paraphrase), ned(scorer, perturbed)
    if ned_paraphrase is not None:
        scores.mean(subset, "ned_para_mean", ned_paraphrase)
        scores.mean(subset, "ned_perturbed_mean", ned_perturbed)
        scores.rate(subset, "ned", ned_perturbed - ned_paraphrase, ned_epsilons)
    scores.add(subset, "skipped", skipped, len(items) + skipped, note=COUNT_NOTE)
    return scores
