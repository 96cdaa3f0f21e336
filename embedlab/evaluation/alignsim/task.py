"""Run the five ALIGN-SIM criteria over one embedding method (paper §4, §5.2–5.3, Appendix A.5).

For each dataset the method's ``encode()`` is called ONCE on every distinct text the requested
criteria compare (originals, paraphrases, perturbed sentences, random pairs): methods that fit
statistics on their input (idf, whitening, quantile post-processing) then see one consistent text
population, and each text is encoded once. Pairwise methods (``method.pairwise``: token matching)
have no vectors: they get one ``similarity()`` call per dataset over every distinct pair, the
similarity criteria use that score, and NED is skipped with a note.

The α (Eq. 1) and β (Eq. 2) adjustments of criteria 2 and 4 need the method's random-pair
similarity on all three paraphrase datasets, so those random pairs are scored whenever criterion 2
or 4 is requested, whether or not criterion 1 is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embedlab.evaluation.alignsim import metrics
from embedlab.evaluation.alignsim.perturb import N_VALUES, PerturbationSet
from embedlab.evaluation.alignsim.sources import PARAPHRASE_DATASETS
from embedlab.evaluation.records import Record

TASK = "alignsim"
CRITERIA = (1, 2, 3, 4, 5)
CRITERION_NAMES = {
    1: "semantic distinction",
    2: "synonym replacement",
    3: "paraphrase vs antonym replacement",
    4: "paraphrase without negation",
    5: "paraphrase vs sentence jumbling",
}


@dataclass
class MethodResult:
    """What one method scored: records for the database, per-item margins for the histograms, notes."""

    method: str
    records: list[Record] = field(default_factory=list)
    margins: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)  # (dataset, subset, metric)
    notes: list[str] = field(default_factory=list)

    def add(self, dataset: str, subset: str, metric: str, value: float, n: int) -> None:
        self.records.append(Record(self.method, TASK, dataset, subset, metric, float(value), int(n)))

    def save(self, folder: Path) -> Path:
        """Write ``<slug>.json`` (records, notes) and ``<slug>.npz`` (margins) so reports can combine runs."""
        folder.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^A-Za-z0-9._+=-]+", "_", self.method)
        keys = sorted(self.margins)
        payload = {
            "method": self.method,
            "records": [r.as_dict() for r in self.records],
            "notes": self.notes,
            "margins": ["|".join(key) for key in keys],
        }
        path = folder / f"{slug}.json"
        path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        np.savez(folder / f"{slug}.npz", **{f"m{index}": self.margins[key] for index, key in enumerate(keys)})
        return path

    @classmethod
    def load(cls, path: Path) -> "MethodResult":
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
        arrays = np.load(Path(path).with_suffix(".npz"), allow_pickle=False)
        margins = {tuple(key.split("|")): arrays[f"m{index}"] for index, key in enumerate(payload["margins"])}
        return cls(payload["method"], [Record(**r) for r in payload["records"]], margins, payload["notes"])

    def value(self, dataset: str, subset: str, metric: str) -> float | None:
        for record in self.records:
            if (record.dataset, record.subset, record.metric) == (dataset, subset, metric):
                return record.value
        return None


class _Scorer:
    """Similarity (and NED for vector methods) of text pairs from one dataset, computed in one pass."""

    def __init__(self, method, pairs: list[tuple[str, str]], batch_size: int, show_progress_bar: bool | None) -> None:
        self.pairwise = bool(getattr(method, "pairwise", False))
        if self.pairwise:
            distinct = list(dict.fromkeys(pairs))
            scores = np.asarray(
                method.similarity(distinct, batch_size=batch_size, show_progress_bar=show_progress_bar), dtype=np.float64
            )
            if scores.shape != (len(distinct),):
                raise ValueError(f"{_spec(method)}: similarity() returned shape {scores.shape} for {len(distinct)} pairs")
            self._pair_scores = dict(zip(distinct, scores))
        else:
            texts = list(dict.fromkeys(text for pair in pairs for text in pair))
            vectors = np.asarray(
                method.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar), dtype=np.float32
            )
            if vectors.ndim != 2 or vectors.shape[0] != len(texts):
                raise ValueError(f"{_spec(method)}: encode() returned shape {vectors.shape} for {len(texts)} texts")
            self._row = {text: row for row, text in enumerate(texts)}
            self._vectors = vectors

    def _rows(self, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        first = self._vectors[[self._row[a] for a, _ in pairs]]
        second = self._vectors[[self._row[b] for _, b in pairs]]
        return first, second

    def similarity(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if self.pairwise:
            return np.array([self._pair_scores[pair] for pair in pairs], dtype=np.float32)
        return metrics.cosine(*self._rows(pairs))

    def ned(self, pairs: list[tuple[str, str]]) -> np.ndarray | None:
        return None if self.pairwise else metrics.ned(*self._rows(pairs))


def _spec(method) -> str:
    return str(getattr(method, "spec", method))


def _needed_pairs(perturbations: PerturbationSet, kinds: set[str]) -> list[tuple[str, str]]:
    pairs = []
    for kind in sorted(kinds):
        for item in perturbations.items.get(kind, []):
            if kind == "c1":
                pairs.append((item["text_a"], item["text_b"]))
            else:
                pairs.append((item["original"], item["perturbed"]))
                if "paraphrase" in item:
                    pairs.append((item["original"], item["paraphrase"]))
    return pairs


def _rate_margins(
    result: MethodResult, dataset: str, subset: str, metric: str, margins: np.ndarray, epsilons: tuple[float, ...]
) -> None:
    rates = metrics.pass_rates(margins, epsilons)
    result.margins[(dataset, subset, metric)] = margins
    result.add(dataset, subset, f"{metric}_margin_mean", float(np.mean(margins)), len(margins))
    result.add(dataset, subset, f"{metric}_pass_avg", float(np.mean(rates)), len(margins))
    for eps, rate in zip(epsilons, rates):
        result.add(dataset, subset, f"{metric}_pass@{eps:g}", float(rate), len(margins))


def run_method(
    method,
    sets: dict[str, PerturbationSet],
    criteria: set[int],
    cosine_epsilons: tuple[float, ...] = metrics.COSINE_EPSILONS,
    ned_epsilons: tuple[float, ...] = metrics.NED_EPSILONS,
    batch_size: int = 32,
    show_progress_bar: bool | None = None,
) -> MethodResult:
    """Score ``method`` on the perturbation ``sets`` for the requested ``criteria`` (subset of 1–5)."""
    unknown = set(criteria) - set(CRITERIA)
    if unknown:
        raise ValueError(f"unknown ALIGN-SIM criteria {sorted(unknown)}; choose from {list(CRITERIA)}")
    result = MethodResult(_spec(method))
    if getattr(method, "pairwise", False):
        result.notes.append(f"{result.method} is a pairwise method: its own similarity stands in for cosine; NED is skipped.")
    needs_adjustment = bool(criteria & {2, 4})
    kinds_by_dataset: dict[str, set[str]] = {}
    for dataset, perturbations in sets.items():
        kinds = {f"c{c}" for c in criteria if f"c{c}" in perturbations.items}
        if needs_adjustment and dataset in PARAPHRASE_DATASETS:
            kinds.add("c1")
        kinds_by_dataset[dataset] = kinds
    if needs_adjustment:
        missing = [d for d in PARAPHRASE_DATASETS if d not in sets or "c1" not in sets[d].items]
        if missing:
            raise ValueError(f"criteria 2 and 4 are adjusted by random pairs of all of {PARAPHRASE_DATASETS}; missing c1 items for {missing}")

    random_similarity: list[np.ndarray] = []
    random_ned: list[np.ndarray] = []
    scorers: dict[str, _Scorer] = {}
    for dataset in sets:  # one encode()/similarity() per dataset, random pairs first: α/β need all of them
        pairs = _needed_pairs(sets[dataset], kinds_by_dataset[dataset])
        if not pairs:
            continue
        scorer = scorers[dataset] = _Scorer(method, pairs, batch_size, show_progress_bar)
        items = sets[dataset].items.get("c1") if "c1" in kinds_by_dataset[dataset] else None
        if not items:
            continue
        positive = [(i["text_a"], i["text_b"]) for i in items if i["kind"] == "positive"]
        random = [(i["text_a"], i["text_b"]) for i in items if i["kind"] == "random"]
        similarity_positive, similarity_random = scorer.similarity(positive), scorer.similarity(random)
        ned_positive, ned_random = scorer.ned(positive), scorer.ned(random)
        random_similarity.append(similarity_random)
        if ned_random is not None:
            random_ned.append(ned_random)
        if 1 not in criteria:
            continue
        count = min(len(positive), len(random))  # margins pair the i-th positive with the i-th random pair
        result.add(dataset, "c1", "sim_pos_mean", np.mean(similarity_positive), len(positive))
        result.add(dataset, "c1", "sim_rnd_mean", np.mean(similarity_random), len(random))
        result.add(dataset, "c1", "sim_diff_mean", np.mean(similarity_positive) - np.mean(similarity_random), count)
        _rate_margins(result, dataset, "c1", "sim", similarity_positive[:count] - similarity_random[:count], cosine_epsilons)
        if ned_positive is not None:
            result.add(dataset, "c1", "ned_pos_mean", np.mean(ned_positive), len(positive))
            result.add(dataset, "c1", "ned_rnd_mean", np.mean(ned_random), len(random))
            result.add(dataset, "c1", "ned_diff_mean", np.mean(ned_positive) - np.mean(ned_random), count)
            _rate_margins(result, dataset, "c1", "ned", ned_random[:count] - ned_positive[:count], ned_epsilons)

    alpha_value = random_level = None
    if needs_adjustment:
        alpha_value = metrics.alpha(random_similarity)
        result.add("all", "adjustment", "alpha", alpha_value, sum(len(s) for s in random_similarity))
        if random_ned:
            random_level = metrics.random_ned_level(random_ned)
            result.add("all", "adjustment", "random_ned", random_level, sum(len(s) for s in random_ned))

    def plain_pairs(dataset: str, subset: str, items: list[dict], skipped: int | None) -> None:
        scorer = scorers[dataset]
        pairs = [(i["original"], i["perturbed"]) for i in items]
        if not pairs:
            result.notes.append(f"{dataset} {subset}: no items (all {skipped} sentences skipped)")
            if skipped is not None:
                result.add(dataset, subset, "skipped", skipped, skipped)
            return
        similarity = scorer.similarity(pairs)
        result.add(dataset, subset, "sim_mean", np.mean(similarity), len(pairs))
        result.add(dataset, subset, "sim_adjusted", metrics.alpha_adjusted(float(np.mean(similarity)), alpha_value), len(pairs))
        distances = scorer.ned(pairs)
        if distances is not None:
            result.add(dataset, subset, "ned_mean", np.mean(distances), len(pairs))
            result.add(dataset, subset, "ned_adjusted", metrics.beta_adjusted(float(np.mean(distances)), random_level), len(pairs))
        if skipped is not None:
            result.add(dataset, subset, "skipped", skipped, len(pairs) + skipped)

    def triplets(dataset: str, subset: str, items: list[dict], skipped: int) -> None:
        scorer = scorers[dataset]
        if not items:
            result.notes.append(f"{dataset} {subset}: no items (all {skipped} sentences skipped)")
            result.add(dataset, subset, "skipped", skipped, skipped)
            return
        paraphrase = [(i["original"], i["paraphrase"]) for i in items]
        perturbed = [(i["original"], i["perturbed"]) for i in items]
        similarity_paraphrase, similarity_perturbed = scorer.similarity(paraphrase), scorer.similarity(perturbed)
        result.add(dataset, subset, "sim_para_mean", np.mean(similarity_paraphrase), len(items))
        result.add(dataset, subset, "sim_perturbed_mean", np.mean(similarity_perturbed), len(items))
        _rate_margins(result, dataset, subset, "sim", similarity_paraphrase - similarity_perturbed, cosine_epsilons)
        ned_paraphrase, ned_perturbed = scorer.ned(paraphrase), scorer.ned(perturbed)
        if ned_paraphrase is not None:
            result.add(dataset, subset, "ned_para_mean", np.mean(ned_paraphrase), len(items))
            result.add(dataset, subset, "ned_perturbed_mean", np.mean(ned_perturbed), len(items))
            _rate_margins(result, dataset, subset, "ned", ned_perturbed - ned_paraphrase, ned_epsilons)
        result.add(dataset, subset, "skipped", skipped, len(items) + skipped)

    for dataset, perturbations in sets.items():
        if dataset not in scorers:
            continue
        if 2 in criteria and "c2" in perturbations.items:
            for n in N_VALUES:
                subset = f"c2/n={n}"
                items = [i for i in perturbations.items["c2"] if i["n"] == n]
                plain_pairs(dataset, subset, items, perturbations.skipped.get(subset, 0))
        if 3 in criteria and "c3" in perturbations.items:
            triplets(dataset, "c3", perturbations.items["c3"], perturbations.skipped.get("c3", 0))
        if 4 in criteria and "c4" in perturbations.items:
            plain_pairs(dataset, "c4", perturbations.items["c4"], None)
        if 5 in criteria and "c5" in perturbations.items:
            for n in N_VALUES:
                subset = f"c5/n={n}"
                items = [i for i in perturbations.items["c5"] if i["n"] == n]
                triplets(dataset, subset, items, perturbations.skipped.get(subset, 0))
    return result
