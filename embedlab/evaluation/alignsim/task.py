"""The five ALIGN-SIM criteria as a task of the harness (paper §4, §5.2–5.3, Appendix A.5).

``AlignSimTask(dataset)`` scores one dataset's perturbation items (QQP, PAWS-Wiki, MRPC: criteria 1,
2, 3, 5; AFIN: criterion 4); ``AlignSimTask("all")`` records the adjustment factors α (Eq. 1) and the
mean random-pair NED (Eq. 2) over the three paraphrase datasets. :func:`embedlab.evaluation.evaluate`
runs them like every other task: same results database, same reuse, same encoding cache.

Every task of one run shares an :class:`AlignSimSetup` (criteria, reported datasets, sampling, ε
grids). It fixes which perturbation kinds each dataset contributes, so each dataset's distinct texts go
to ONE ``encode()`` (the shared scorer, cached on disk): methods that fit statistics on their input
(idf, whitening, quantile post-processing) then see one consistent text population. Criteria 2 and 4
are scaled by α and β, which need the random pairs of all three paraphrase datasets, so those are
scored whenever criterion 2 or 4 is requested, whether or not criterion 1 or the dataset is. Pairwise
methods (token matching) have no vectors: their own similarity stands in for cosine and NED is skipped.

The criteria themselves are functions (:mod:`embedlab.evaluation.alignsim.criteria`) that return record
rows and per-item margins; the task stores the margins (for the ε-histograms) in
``runtime.cache.arrays.ArrayStore("alignsim-margins", recomputable=False)`` beside the records (never evicted under the
cache budget), so a report can be drawn from reused results too.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.evaluation.alignsim import criteria, metrics
from embedlab.evaluation.alignsim.items import PerturbationSet, SamplingConfig
from embedlab.evaluation.alignsim.perturb import N_VALUES, build_perturbation_set
from embedlab.evaluation.alignsim.sources import ALL_DATASETS, PARAPHRASE_DATASETS, read_dataset
from embedlab.evaluation.base import Method, Metric, Task
from embedlab.evaluation.records import Record
from embedlab.evaluation.scoring import PairScorer
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.atomic import atomic_write_bytes, atomic_write_text
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.memo import memo

TASK = "alignsim"
ADJUSTMENT = "all"  # the pseudo-dataset of the α / β adjustment records
CRITERIA = (1, 2, 3, 4, 5)
CRITERION_NAMES = {
    1: "semantic distinction",
    2: "synonym replacement",
    3: "paraphrase vs antonym replacement",
    4: "paraphrase without negation",
    5: "paraphrase vs sentence jumbling",
}
MARGIN_SUBSETS = ("c1", "c3") + tuple(f"c5/n={n}" for n in N_VALUES)
# results, not cache: only the run that scored them can give them again, and later reports draw from them
_MARGINS = ArrayStore("alignsim-margins", recomputable=False)


@dataclass(frozen=True)
class AlignSimSetup:
    """What one ALIGN-SIM run compares; shared by its tasks so each dataset is encoded once.

    ``datasets`` are the reported ones; ``folder``, when given, holds the perturbation sets as JSON lines
    (reused when their sampling matches, else built and written there).
    """

    criteria: tuple[int, ...] = CRITERIA
    datasets: tuple[str, ...] = ALL_DATASETS
    sampling: SamplingConfig = SamplingConfig()
    cosine_epsilons: tuple[float, ...] = metrics.COSINE_EPSILONS
    ned_epsilons: tuple[float, ...] = metrics.NED_EPSILONS
    batch_size: int = 32
    folder: Path | None = None

    def __post_init__(self) -> None:
        unknown = set(self.criteria) - set(CRITERIA)
        if unknown:
            raise InputError(f"unknown ALIGN-SIM criteria {sorted(unknown)}; choose from {list(CRITERIA)}")
        bad = [d for d in self.datasets if d not in ALL_DATASETS]
        if bad:
            raise InputError(f"unknown ALIGN-SIM dataset(s) {bad}; choose from {', '.join(ALL_DATASETS)}")

    @property
    def adjusted(self) -> bool:
        """Whether criteria 2 or 4 are requested, which need α and β."""
        return bool(set(self.criteria) & {2, 4})

    def kinds(self, dataset: str) -> frozenset[str]:
        """The perturbation kinds ``dataset`` contributes: the requested criteria it has, plus criterion 1's
        random pairs of every paraphrase dataset when α / β are needed."""
        kinds = {f"c{c}" for c in self.criteria} if dataset in self.datasets else set()
        if dataset in PARAPHRASE_DATASETS and self.adjusted:
            kinds.add("c1")
        return frozenset(kinds & {"c4"} if dataset == "afin" else kinds - {"c4"})

    def scored_datasets(self) -> list[str]:
        """Every dataset this run scores: the reported ones and those α / β need."""
        extra = [d for d in PARAPHRASE_DATASETS if d not in self.datasets] if self.adjusted else []
        return [d for d in list(self.datasets) + extra if self.kinds(d)]

    def tasks(self) -> list[AlignSimTask]:
        """The harness tasks of this run: one per reported dataset with items, and the adjustment factors."""
        names = [d for d in self.datasets if self.kinds(d)] + ([ADJUSTMENT] if self.adjusted else [])
        return [AlignSimTask(name, setup=self) for name in names]

    def perturbations(self, dataset: str) -> PerturbationSet:
        """The seeded perturbation set of ``dataset`` with the kinds this run needs (memoised per process)."""
        kinds = self.kinds(dataset)
        return memo("alignsim.perturbations", maxsize=8).get(
            (dataset, self.sampling, kinds, self.folder), lambda: self._load_or_build(dataset, kinds))

    def _load_or_build(self, dataset: str, kinds: frozenset[str]) -> PerturbationSet:
        if self.folder is not None:
            try:
                stored = PerturbationSet.load(self.folder, dataset)
            except FileNotFoundError:
                stored = None
            # streams are independent per kind, so a stored superset holds the same items
            if stored is not None and stored.config == self.sampling and kinds <= set(stored.items):
                return stored
        built = build_perturbation_set(dataset, self.sampling, set(kinds))
        if self.folder is not None:
            built.save(self.folder)
        return built

    def scorer(self, method: Method, dataset: str) -> PairScorer:
        """Similarity (and vectors) of every pair ``dataset`` compares, from one encode of its texts."""
        return PairScorer(method, _needed_pairs(self.perturbations(dataset), self.kinds(dataset)),
                          batch_size=self.batch_size)

    def settings(self) -> dict:
        """The fields that change the numbers and differ from the defaults (JSON-able)."""
        default = AlignSimSetup()
        out = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name not in ("batch_size", "folder") and value != getattr(default, item.name):
                out[item.name] = _sampling_settings(value) if isinstance(value, SamplingConfig) else list(value)
        return out


def _sampling_settings(sampling: SamplingConfig) -> dict:
    """The sampling as stored with the records; the default perturbation is left out, so results stored
    before the option existed keep matching."""
    settings = asdict(sampling)
    if settings["perturbation"] == SamplingConfig.perturbation:
        del settings["perturbation"]
    return settings


def _needed_pairs(perturbations: PerturbationSet, kinds: frozenset[str]) -> list[tuple[str, str]]:
    return [pair for kind in sorted(kinds) for item in perturbations.items.get(kind, []) for pair in item.compared_pairs()]


_SIM = "similarity (cosine, or a pairwise method's own score)"
_PASS = "share of items whose margin exceeds ε, 0–1"


class AlignSimTask(Task):
    """One ALIGN-SIM dataset (qqp, paws, mrpc, afin) or ``all``, the α / β adjustment factors."""

    name = TASK
    description = "ALIGN-SIM: five task-free semantic-alignment criteria (Mahajan et al., §4–5)"
    datasets = ALL_DATASETS + (ADJUSTMENT,)
    options = ("seed", "perturbation", "criteria")
    user_files = True  # alignsim:@FILE: own_task.OwnTextsTask reads it (harness.USER_FILE_TASKS)
    needs_vectors = False
    headline_metric = "sim_diff_mean"
    metrics = {
        "sim_pos_mean": Metric(f"C1: mean {_SIM} of paraphrase pairs", "", unit="similarity"),
        "sim_rnd_mean": Metric(f"C1: mean {_SIM} of random pairs", "lower", unit="similarity"),
        "sim_diff_mean": Metric("C1: mean Sim of paraphrases − mean Sim of random pairs (Table 6 Diff)", unit="difference"),
        "ned_pos_mean": Metric("C1: mean NED of paraphrase pairs, 0–1", "", unit="distance"),
        "ned_rnd_mean": Metric("C1: mean NED of random pairs, 0–1", "", unit="distance"),
        "ned_diff_mean": Metric("C1: mean NED of paraphrases − mean NED of random pairs (Table 7 Diff)", "lower", unit="difference"),
        "sim_margin_mean": Metric("C1/3/5/neg: mean similarity margin, positive = aligned with human expectation", unit="difference"),
        "ned_margin_mean": Metric("C1/3/5/neg: mean NED margin, positive = aligned with human expectation", unit="difference"),
        "sim_pass_avg": Metric(f"C1/3/5/neg: {_PASS} (similarity), averaged over the ε grid (Table 3)", unit="fraction"),
        "ned_pass_avg": Metric(f"C1/3/5/neg: {_PASS} (NED), averaged over the ε grid (Table 3)", unit="fraction"),
        "sim_pass@": Metric(f"C1/3/5/neg: {_PASS} (similarity) at this ε", unit="fraction"),
        "ned_pass@": Metric(f"C1/3/5/neg: {_PASS} (NED) at this ε", unit="fraction"),
        "sim_para_mean": Metric(f"C3/5/neg: mean {_SIM} of S and its paraphrase", "", unit="similarity"),
        "sim_perturbed_mean": Metric(f"C3/5/neg: mean {_SIM} of S and its antonym / jumbled / negated version", "lower", unit="similarity"),
        "ned_para_mean": Metric("C3/5/neg: mean NED of S and its paraphrase, 0–1", "", unit="distance"),
        "ned_perturbed_mean": Metric("C3/5/neg: mean NED of S and its antonym / jumbled / negated version, 0–1", "", unit="distance"),
        "sim_mean": Metric(f"C2/4: mean {_SIM} of S and its synonym-replaced / affirmative version", unit="similarity"),
        "sim_adjusted": Metric("C2/4: α × mean similarity (Eq. 1; Tables 4, 5)", unit="similarity"),
        "ned_mean": Metric("C2/4: mean NED of S and its synonym-replaced / affirmative version, 0–1", "lower", unit="distance"),
        "ned_adjusted": Metric("C2/4: β-adjusted NED, 1 − (1 − NED)(1 − r) (Eq. 2; Tables 8, 9)", "lower", unit="distance"),
        "skipped": Metric("sentences that could not be perturbed (no replaceable word, too short; a user file: "
                          "no positive, or criterion 1 without pairs)", "", "count", unit="count"),
        "alpha": Metric("α = 1 − mean random-pair similarity over QQP, PAWS, MRPC, or a user file's own sentences (Eq. 1)",
                        unit="score"),
        "random_ned": Metric("mean random-pair NED over QQP, PAWS, MRPC, or a user file's own sentences (Eq. 2's r), 0–1",
                             unit="distance"),
        "triplet_pass_avg": Metric("a user file's headline: mean over C3, C5 (n = 1–3 averaged) and neg of the share of "
                                   "items whose similarity margin exceeds ε (averaged over the ε grid), 0–1", unit="fraction"),
        "sentences": Metric("a user file: distinct sentences evaluated (n: the distinct sentences it gave)", "", "count",
                            unit="count"),
    }

    def __init__(self, dataset: str, *, seed: int = 0, perturbation: str = "ours", criteria: tuple[int, ...] = CRITERIA,
                 setup: AlignSimSetup | None = None) -> None:
        """``perturbation``: criteria 2 and 3's word replacement, ``ours`` (the paper's text: verbs/adjectives
        tagged in context, synonyms re-inflected) or ``authors`` (the authors' released code: any non-stop-word,
        every sense, uninflected, every occurrence); see :mod:`embedlab.evaluation.alignsim.perturb`.
        ``criteria``: the criteria to score (fewer criteria, fewer texts to encode)."""
        super().__init__(dataset)
        if setup is None:
            setup = AlignSimSetup(criteria=tuple(criteria), sampling=SamplingConfig(seed=seed, perturbation=perturbation))
        self.setup = setup
        if dataset not in self.datasets:
            raise InputError(f"unknown ALIGN-SIM dataset {dataset!r}; expected one of {', '.join(self.datasets)}")
        if dataset == ADJUSTMENT and not self.setup.adjusted:
            raise InputError("the ALIGN-SIM adjustment factors are computed only with criterion 2 or 4")

    @classmethod
    def headline_of(cls, dataset: str) -> str | None:
        if "@" in dataset:  # a user file (``stem@digest``): the triplet criteria's mean pass rate
            return "triplet_pass_avg"
        return {"afin": "sim_adjusted", ADJUSTMENT: "alpha"}.get(dataset, cls.headline_metric)

    @classmethod
    def metric(cls, name: str) -> Metric:
        return super().metric(name.partition("@")[0] + "@" if "@" in name else name)

    def settings(self) -> dict:
        return self.setup.settings()

    def check_data(self) -> None:
        """Read the source pairs this dataset's criteria draw from (the adjustment: QQP, PAWS and MRPC)."""
        for name in PARAPHRASE_DATASETS if self.dataset == ADJUSTMENT else (self.dataset,):
            read_dataset(name)

    def run(self, method: Method) -> list[Record]:
        self.check(method)
        if self.dataset == ADJUSTMENT:
            alpha, random_ned, counts = self.adjustment(method)
            note = "the adjustment level fitted on random pairs (Eq. 1–2): no interval"
            records = [self.record(method, "adjustment", "alpha", alpha, counts[0], note=note)]
            if random_ned is not None:
                records.append(self.record(method, "adjustment", "random_ned", random_ned, counts[1], note=note))
            return records
        scores = self.scores(method)
        for (subset, kind), margins in scores.margins.items():  # for the ε-histograms of reused results too
            _MARGINS.save(self._margin_key(method, subset, kind), margins)
        return [self.record(method, *row) for row in scores.rows]

    def scores(self, method: Method) -> criteria.Scores:
        """Every requested criterion's record rows and margins on this dataset."""
        setup, dataset = self.setup, self.dataset
        perturbations, kinds = setup.perturbations(dataset), setup.kinds(dataset)
        items, skipped = perturbations.items, perturbations.skipped
        scorer = setup.scorer(method, dataset)
        alpha = random_ned = None
        if setup.adjusted and kinds & {"c2", "c4"}:
            alpha, random_ned, _ = self.adjustment(method)
        epsilons = (setup.cosine_epsilons, setup.ned_epsilons)
        scores = criteria.Scores()
        if 1 in setup.criteria and "c1" in kinds:
            scores.extend(criteria.semantic_distinction(scorer, items["c1"], *epsilons))
        for n in N_VALUES if "c2" in kinds else ():
            subset = f"c2/n={n}"
            chosen = [item for item in items["c2"] if item.n == n]
            scores.extend(criteria.perturbed_pairs(scorer, subset, chosen, skipped.get(subset, 0), alpha, random_ned))
        if "c3" in kinds:
            scores.extend(criteria.paraphrase_against_perturbed(scorer, "c3", items["c3"], skipped.get("c3", 0), *epsilons))
        if "c4" in kinds:
            scores.extend(criteria.perturbed_pairs(scorer, "c4", items["c4"], None, alpha, random_ned))
        for n in N_VALUES if "c5" in kinds else ():
            subset = f"c5/n={n}"
            chosen = [item for item in items["c5"] if item.n == n]
            scores.extend(criteria.paraphrase_against_perturbed(scorer, subset, chosen, skipped.get(subset, 0), *epsilons))
        return scores

    def adjustment(self, method: Method) -> tuple[float, float | None, tuple[int, int]]:
        """(α, mean random-pair NED or None for pairwise methods, (pairs behind α, pairs behind the NED))."""
        similarities, distances = [], []
        for dataset in PARAPHRASE_DATASETS:
            scorer = self.setup.scorer(method, dataset)
            random = criteria.c1_pairs(self.setup.perturbations(dataset).items["c1"], "random")
            similarities.append(scorer.similarity(random))
            if (ned := criteria.ned(scorer, random)) is not None:
                distances.append(ned)
        random_ned = metrics.random_ned_level(distances) if distances else None
        counts = (sum(len(s) for s in similarities), sum(len(d) for d in distances))
        return metrics.alpha(similarities), random_ned, counts

    def _margin_key(self, method: Method, subset: str, metric: str) -> str:
        return cache_key(method.spec, method.fingerprint, self.dataset, subset, metric, self.settings())

    def margins(self, method: Method) -> dict[tuple[str, str, str], np.ndarray]:
        """The stored per-item margins of ``method`` on this dataset, by (dataset, subset, metric)."""
        return stored_margins(method.spec, method.fingerprint, self.dataset, self.settings())


def stored_margins(spec: str, fingerprint: str, dataset: str, settings: dict) -> dict[tuple[str, str, str], np.ndarray]:
    """The per-item margins a run stored for one method and dataset, by (dataset, subset, metric); the
    results database holds ``fingerprint`` and ``settings`` beside the records, so a report can find them."""
    found = {}
    for subset in MARGIN_SUBSETS:
        for metric in ("sim", "ned"):
            array = _MARGINS.load(cache_key(spec, fingerprint, dataset, subset, metric, settings))
            if array is not None:
                found[(dataset, subset, metric)] = array
    return found


def _missing_margin_notes(scored: set[tuple[str, str]], margins: dict[tuple[str, str, str], np.ndarray]) -> list[str]:
    """A note for each scored (dataset, subset) whose ε-histogram cannot be drawn: its records are in the
    results database but its margins are not in this cache folder (a run into another cache, a folder
    deleted by hand, or a run from before margins were kept out of the cache budget's reach)."""
    missing = sorted((dataset, subset) for dataset, subset in scored
                     if subset in MARGIN_SUBSETS and (dataset, subset, "sim") not in margins)
    return [f"{dataset} {subset}: no ε-histogram, its per-item margins are not in this cache (the run wrote them "
            "into another cache folder, or they were deleted); --force recomputes them" for dataset, subset in missing]


@dataclass
class MethodResult:
    """What one method scored on ALIGN-SIM: records, per-item margins for the histograms, notes."""

    method: str
    records: list[Record] = field(default_factory=list)
    margins: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)  # (dataset, subset, metric)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def collect(cls, method: Method, records: list[Record], tasks: list[AlignSimTask]) -> MethodResult:
        """The ALIGN-SIM records of ``method`` among ``records`` (e.g. an evaluate() run), with the margins
        its tasks stored and notes on what could not be scored."""
        mine = [r for r in records if r.method == method.spec and r.task == TASK]
        result = cls(method.spec, mine)
        for task in tasks:
            result.margins.update(task.margins(method))
        if method.pairwise:
            result.notes.append(f"{method.spec} is a pairwise method: its own similarity stands in for cosine; NED is skipped.")
        scored = {(r.dataset, r.subset) for r in mine if r.metric != "skipped"}
        for r in mine:
            if r.metric == "skipped" and (r.dataset, r.subset) not in scored:
                result.notes.append(f"{r.dataset} {r.subset}: no items (all {int(r.value)} sentences skipped)")
        result.notes += _missing_margin_notes(scored, result.margins)
        return result

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
        atomic_write_text(path, json.dumps(payload, indent=1) + "\n")
        arrays = io.BytesIO()
        np.savez(arrays, **{f"m{index}": self.margins[key] for index, key in enumerate(keys)})
        atomic_write_bytes(folder / f"{slug}.npz", arrays.getbuffer())
        return path

    @classmethod
    def load(cls, path: Path) -> MethodResult:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
        arrays = np.load(Path(path).with_suffix(".npz"), allow_pickle=False)
        margins = {tuple(key.split("|")): arrays[f"m{index}"] for index, key in enumerate(payload["margins"])}
        return cls(payload["method"], [Record(**r) for r in payload["records"]], margins, payload["notes"])

    def value(self, dataset: str, subset: str, metric: str) -> float | None:
        for record in self.records:
            if (record.dataset, record.subset, record.metric) == (dataset, subset, metric):
                return record.value
        return None
