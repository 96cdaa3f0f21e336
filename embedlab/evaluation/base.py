"""The task interface of the evaluation harness: what a task declares about itself and how it is built.

A :class:`Task` has a family ``name`` (e.g. ``"sts"``), a ``dataset`` and ``run(method) -> list[Record]``.
Each task class also declares, as data, everything the harness and the reports need to know about it:
its default ``datasets``, the ``options`` it takes from a task selection, whether it reads user files,
its ``headline_metric`` and one :class:`Metric` (description with unit, which direction is better) per
metric it emits. The task registry (``embedlab.evaluation``), the report tables and the summaries read
these declarations, so adding a task is one new module and one line in the task list.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
from threadpoolctl import threadpool_limits

from embedlab.data import DataFormatError
from embedlab.data.reading import special_file_kind
from embedlab.errors import InputError, InputTypeError
from embedlab.evaluation.records import Record, UnitScores
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.settings import solver_thread_count


@runtime_checkable
class Method(Protocol):
    """What the harness needs from an embedding method (``embedlab.load(spec)`` returns one; any object
    with ``encode(texts)`` becomes one through :func:`as_method`)."""

    spec: str
    fingerprint: str
    pairwise: bool

    def encode(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None,
               normalize: bool = False) -> np.ndarray: ...

    def similarity_pairs(self, pairs: list[tuple[str, str]], batch_size: int = 32,
                   show_progress_bar: bool | None = None) -> np.ndarray: ...


# Fixed texts whose encoding identifies a user's own model when it has no fingerprint of its own.
_PROBE_TEXTS = ("A man is playing a guitar.", "The weather is lovely today.", "Stocks fell sharply on Monday.")


class OwnModel:
    """A user's own model (a ``SentenceTransformer``, any object with ``encode``) made a :class:`Method`.

    ``encode(texts)`` is all it needs: the keywords its ``encode`` accepts (``batch_size``,
    ``show_progress_bar``) are passed on, the others dropped. Its fingerprint is the model's own, or a
    hash of its encoding of a few fixed texts; its spec is the model's own, or the class name plus that
    hash, so two different models never share cached encodings or stored results."""

    pairwise = False

    def __init__(self, model: object) -> None:
        self.model = model
        self._accepted = set(inspect.signature(model.encode).parameters)
        self._fingerprint: str | None = getattr(model, "fingerprint", None)
        own_spec = getattr(model, "spec", None)
        self.spec = own_spec if isinstance(own_spec, str) and own_spec else f"{type(model).__name__}@{self.fingerprint[:12]}"

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            probe = np.ascontiguousarray(self.encode(list(_PROBE_TEXTS), show_progress_bar=False), dtype=np.float32)
            self._fingerprint = "probe-" + hashlib.sha256(probe.tobytes()).hexdigest()[:24]
        return self._fingerprint

    def encode(self, texts: list[str], batch_size: int = 32, show_progress_bar: bool | None = None) -> np.ndarray:
        keywords = {"batch_size": batch_size, "show_progress_bar": show_progress_bar}
        if "kwargs" not in self._accepted:
            keywords = {name: value for name, value in keywords.items() if name in self._accepted}
        return np.asarray(self.model.encode(texts, **keywords), dtype=np.float32)


def method_identity(method: Method) -> str:
    """What a method's results depend on: its canonical spec and its fingerprint (the model's content
    fingerprint, plus the fitted-state hash of a fitted method). The one identity of the evaluation cache
    and the results database: a stored value is reused only under the identity that computed it."""
    return cache_key("method", method.spec, method.fingerprint)


def as_method(model: object) -> Method:
    """``model`` itself when it is an embedlab method (spec, fingerprint, pairwise), else :class:`OwnModel`."""
    if all(hasattr(model, name) for name in ("spec", "fingerprint", "pairwise")):
        return model
    if not callable(getattr(model, "encode", None)):
        raise InputTypeError(f"{type(model).__name__} has no encode(texts) method, so it cannot be evaluated")
    return OwnModel(model)


class NotApplicableError(InputError):
    """The task cannot evaluate this kind of method (e.g. a pairwise method where vectors are needed)."""


# The one unit convention: every metric is stored as its scorer reports it, in one of these units. Shares
# (accuracies, error rates, pass rates) are fractions 0–1, never percentages, so classification accuracy
# and clustering accuracy read alike; papers that print percentages are divided by 100 to compare (the
# reproduction report's one mapping of printed forms: embedlab.results.reproduce.PRINTED_SCALES).
UNITS: dict[str, str] = {
    "fraction": "a share from 0 to 1 (accuracy, error rate, pass rate; 0.8920 = 89.20 %)",
    "correlation": "a correlation coefficient from −1 to 1",
    "similarity": "a cosine similarity from −1 to 1 (or a pairwise method's own score)",
    "difference": "a difference of two similarities or distances (margins, Diff columns)",
    "distance": "a distance (normalised Euclidean distance 0–1, or a squared distance)",
    "count": "a whole number of items",
    "score": "a dimensionless score whose range the description states",
    "seconds": "a wall time in seconds (it varies with the machine and its load)",
}


@dataclass(frozen=True)
class Metric:
    """What one emitted metric means: a one-line description, its unit, and which direction is better.

    ``unit`` is a key of :data:`UNITS` (machine-readable: JSON and CSV output and the report carry it, so
    a value can be compared with a paper's number in the paper's own unit).
    ``better`` is ``"higher"``, ``"lower"`` or ``""`` for numbers that are neither (sizes, counts of items).
    ``style`` tells tables how to print it: ``"count"`` (whole numbers with thousands separators),
    ``"rate"`` (small fractions, scientific notation) or ``"number"``.
    """

    description: str
    better: str = "higher"
    style: str = "number"
    unit: str = "score"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unknown metric unit {self.unit!r}; expected one of {', '.join(UNITS)}")

    @property
    def lower_is_better(self) -> bool:
        return self.better == "lower"


UNDECLARED = Metric("", better="")  # a metric the task does not declare: unit unknown ("score")


class Task:
    """One evaluation: ``run(method)`` returns records for ``(method.spec, name, dataset, subset, metric)``.

    Subclasses set the class attributes below; :meth:`create` builds a task from a selection item.
    A dataset's ``"all"`` subset, when it emits one, stands for the whole dataset (e.g. every STS12
    subset concatenated), so summaries take the headline metric from it and from no other subset.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    datasets: ClassVar[tuple[str, ...]] = ()  # run when the family is selected without a dataset
    options: ClassVar[tuple[str, ...]] = ()  # keyword options taken from parse_tasks(**options)
    user_files: ClassVar[bool] = False  # accepts ``family:@FILE``
    parsing_options: ClassVar[tuple[str, ...]] = ()  # the ``options`` that change how a user file is read
    needs_vectors: ClassVar[bool] = True  # False: pairwise methods work through method.similarity_pairs(pairs)
    # True: the task also scores a method against a reference method (:meth:`against_reference`), which
    # evaluate() asks for with ``intersections=True`` (the neural-embeddings paper's Eq. 3 for triplets)
    needs_reference: ClassVar[bool] = False
    # The one number that stands for the task on a dataset: what summaries, plots, ``compare`` and ``choose`` rank
    # methods on (its declared ``better`` direction says which way). Of a dataset with several subsets, the row of
    # the ``all`` subset stands for it when the task emits one, else each subset is ranked on its own. A task whose
    # headline differs by dataset overrides :meth:`headline_of`; None: the task has no number to rank methods on.
    headline_metric: ClassVar[str | None] = None
    metrics: ClassVar[dict[str, Metric]] = {}

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset

    @classmethod
    def create(cls, dataset: str, options: dict) -> Task:
        """The task for one selection item's dataset (``name`` or ``@path``), with the options it takes."""
        keywords = {key: options[key] for key in cls.options if key in options}
        if not dataset.startswith("@"):
            return cls(dataset, **keywords)
        if not cls.user_files:
            raise InputError(f"task {cls.name} does not take a user file ({dataset})")
        path = Path(dataset[1:]).expanduser()
        if not path.exists():  # a folder or an unreadable file fails when hashed, with the OS's reason
            raise FileNotFoundError(f"data file not found: {path.resolve()} (given in --tasks as {cls.name}:{dataset})")
        _refuse_streams(path, f"{cls.name}:{dataset}")
        return cls(cls.user_dataset_name(path, keywords), path=dataset[1:], **keywords)

    @classmethod
    def user_dataset_name(cls, path: Path, options: dict) -> str:
        """``stem@digest``: the file's name for people, plus a short hash of its bytes and of the
        ``parsing_options`` that decide how they are read, so that stored results of one file are never
        served for another file of the same name (or the same file read another way)."""
        defaults = inspect.signature(cls.__init__).parameters
        parsing = {name: options.get(name, defaults[name].default) for name in cls.parsing_options}
        digest = cache_key(hashlib.sha256(path.read_bytes()).hexdigest(), parsing)
        return f"{path.stem}@{digest[:8]}"

    @classmethod
    def headline_of(cls, dataset: str) -> str | None:
        """The metric that stands for the task on ``dataset`` in summaries, plots, ``compare`` and ``choose``."""
        return cls.headline_metric

    @classmethod
    def metric(cls, name: str) -> Metric:
        """The declaration of an emitted metric (``UNDECLARED`` for a name the task does not emit)."""
        return cls.metrics.get(name, UNDECLARED)

    def settings(self) -> dict:
        """The declared ``options`` whose values differ from the defaults of ``__init__`` (stored with the
        records: a stored result is reused only for the same settings, so ``--seed 1`` never gets seed 0's).
        A task keeps each option under an attribute of the same name."""
        defaults = inspect.signature(type(self).__init__).parameters
        return {name: getattr(self, name) for name in self.options if getattr(self, name) != defaults[name].default}

    def reuses(self, stored: list[Record]) -> bool:
        """Whether the rows stored under this task's settings serve this run (a task that must write a file of
        its own, or add rows of another subset, says no)."""
        return True

    def applies_to(self, method: Method) -> bool:
        return not (method.pairwise and self.needs_vectors)

    def check(self, method: Method) -> None:
        if not self.applies_to(method):
            raise NotApplicableError(
                f"task {self.name}/{self.dataset} needs embedding vectors, but {method.spec!r} is a pairwise "
                "method (it only scores text pairs); evaluate it with sts, pairs or correlations"
            )

    def check_data(self) -> None:
        """Read and parse every file this task will run on (errors name file and line). :func:`evaluate`
        calls it for all tasks before the first one runs, so a bad file for the last task fails in seconds,
        not after hours of the others. Tasks with a ``load()`` of their data are checked by it."""
        load = getattr(self, "load", None)
        if callable(load):
            load()

    def run(self, method: Method) -> list[Record]:
        raise NotImplementedError

    def against_reference(self, method: Method, reference: Method) -> Record:
        """``method`` scored against ``reference``, as a record of ``method`` (subset ``vs <reference spec>``);
        only for a task that declares ``needs_reference``."""
        raise NotImplementedError(f"task {self.name} does not compare a method with a reference method")

    def record(self, method: Method, subset: str, metric: str, value: float, n: int,
               units: UnitScores | None = None, note: str | None = None) -> Record:
        """One record; ``units`` are the per-unit scores behind ``value`` (its bootstrap interval), or
        ``note`` says why it has none (a count, a spread, a statistic of the whole set)."""
        return Record(method.spec, self.name, self.dataset, subset, metric, float(value), int(n), units=units,
                      ci_note=note)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dataset!r})"


# why the counts of the two counting protocols have no interval
COUNT_NOTE = "a count of the evaluated comparisons, not an estimate: no interval"

# The metrics of the two counting protocols (neural-embeddings paper Eq. 2 and 4), shared by pairs and triplets.
ERROR_COUNT_METRICS = {
    "error": Metric("fraction of comparisons that are wrong (ties count as wrong), 0–1", "lower", "rate", "fraction"),
    "total": Metric("number of comparisons counted", "", "count", "count"),
    "wrong": Metric("number of wrong comparisons", "lower", "count", "count"),
    "same": Metric("mean cosine of the texts that belong together, −1–1", "", unit="similarity"),
    "diff": Metric("mean cosine of the texts that do not belong together, −1–1", "", unit="similarity"),
}
CORRELATION_METRICS = {
    "spearman": Metric("Spearman rank correlation of cosine and human score, −1–1", unit="correlation"),
    "pearson": Metric("Pearson correlation of cosine and human score, −1–1", unit="correlation"),
    "kendall_b": Metric("Kendall τ-b of cosine and human score, −1–1", unit="correlation"),
    "kendall_c": Metric("Kendall τ-c of cosine and human score, −1–1", unit="correlation"),
}


def solver_threads() -> threadpool_limits:
    """Thread limit for scikit-learn fits (BLAS and OpenMP): ``$EMBEDLAB_SOLVER_THREADS``, default 1.

    The classifiers and k-means here solve many small problems; with several threads on shared cores
    the BLAS/OpenMP workers spin-wait and a fit runs ~10x slower than on one thread (measured on 2 cores).
    """
    return threadpool_limits(limits=solver_thread_count())


def _refuse_streams(path: Path, given: str) -> None:
    """A user dataset is read twice, once to hash its content into the dataset's name and once to parse it:
    a pipe (bash's ``<(…)``, a FIFO) can be read only once, and a device (``/dev/zero``) may never end."""
    kind = special_file_kind(path)
    if kind is None:
        return  # a regular file, or a folder (refused when read, with the OS's reason)
    raise DataFormatError(f"{path} (given in --tasks as {given}) is {kind}, not a regular file: a dataset file is read "
                          "twice (its content names the stored results, then it is parsed), and "
                          f"{'a device may never end' if kind == 'a device' else 'a pipe can be read only once'}; "
                          "save it to a file first (e.g. `cmd > pairs.tsv`) and give that file")
