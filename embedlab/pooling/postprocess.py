"""Post-processing of sentence vectors (pooling paper §3.4), as scikit-learn-style fit/transform steps.

Steps: ``zscore`` (Eq. 5), ``quantile-u`` / ``quantile-n`` (quantile normalisation to a uniform / normal
distribution, scikit-learn's QuantileTransformer), ``whiten`` (zero mean, identity covariance: PCA
whitening), ``abtt-D`` (all-but-the-top: remove the top D principal directions after centring, Eq. 6–7),
``normalize`` (unit length). Each step is fitted on the target vectors or, with ``@ref``, on reference-
corpus sentences (the paper's ·^W, §3.4.6). A fitted chain's state is plain arrays, saved with
safetensors: no pickle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save as safetensors_save

from embedlab.errors import InputError
from embedlab.runtime.cache.arrays import sorted_header
from embedlab.runtime.cache.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from sklearn.preprocessing import QuantileTransformer

_ABTT = re.compile(r"^abtt-([1-9][0-9]*)$")
# fewest texts being encoded a per-feature statistic is fitted on (2 give z-score opposites, quantile-u 0/1 corners)
MIN_TARGET_VECTORS = 10


def _svd_solver(vectors: np.ndarray) -> str:
    """Many more vectors than dimensions (the usual case): eigen-decompose the d×d covariance, about twice
    as fast as the full SVD for STS-B's 2,758 × 384 and the same components (tested); otherwise the full SVD."""
    return "covariance_eigh" if vectors.shape[0] >= 2 * vectors.shape[1] else "full"


class PostProcessor:
    """Base class: ``fit`` learns arrays kept in ``state``; ``transform`` applies them. ``__init__`` does no work.

    A step answers for itself: how a spec spells it, with one help line each (``spellings``), whether it
    is learned from vectors (``needs_fit``), whether once fitted it is an affine map x·Aᵀ + b (``affine``:
    such a step folds into a static model's token table), whether its output rows have unit length
    (``unit_output``: a chain ending in such a step gives unit vectors), and its own state as flat arrays
    (:meth:`tensors`, :meth:`restored`). Every step is registered once, in :data:`STEPS`."""

    name: str = ""
    spellings: ClassVar[dict[str, str]] = {}  # how a spec names the step -> its help line
    needs_fit: ClassVar[bool] = True
    affine: ClassVar[bool] = False
    unit_output: ClassVar[bool] = False

    def __init__(self) -> None:
        self.state: dict[str, np.ndarray] = {}

    @classmethod
    def from_name(cls, name: str) -> PostProcessor | None:
        """A fresh step if a spec's ``name`` names this kind of step, else None."""
        return cls() if name in cls.spellings else None

    def min_target_vectors(self, width: int) -> int:
        """The fewest vectors of ``width`` the step is fitted on when they are the texts being encoded (README)."""
        return MIN_TARGET_VECTORS if self.needs_fit else 0

    def tensors(self, prefix: str) -> dict[str, np.ndarray]:
        """The fitted state as flat arrays, their keys prefixed (a chain saves its steps side by side)."""
        return {f"{prefix}{key}": np.ascontiguousarray(value) for key, value in self.state.items()}

    def restored(self, tensors: dict[str, np.ndarray], prefix: str) -> PostProcessor:
        """This step with the state :meth:`tensors` saved under ``prefix``."""
        self.state = {key[len(prefix) :]: value for key, value in tensors.items() if key.startswith(prefix)}
        return self

    def fit(self, vectors: np.ndarray) -> PostProcessor:
        vectors = np.asarray(vectors, dtype=np.float64)
        count = vectors.shape[0]
        if self.needs_fit and count < 2:
            # one vector has no spread: whitening would keep no direction (a (1, 0) array), z-score give zeros
            raise InputError(
                f"post-processing step {self.name!r} is fitted on the vectors it transforms, and {count} "
                f"vector{'' if count == 1 else 's'} {'has' if count == 1 else 'have'} no spread to fit it on; it needs at least 2: encode "
                f"several texts in one call, call fit(texts) on a sample first, or fit the step on WikiText-2 "
                f"({self.name}@ref)")
        self.state = self._fit(vectors)
        return self

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        if self.needs_fit and not self.state:
            raise RuntimeError(f"post-processing step {self.name!r} is not fitted")
        return self._transform(np.asarray(vectors, dtype=np.float64)).astype(np.float32)

    def fit_transform(self, vectors: np.ndarray) -> np.ndarray:
        return self.fit(vectors).transform(vectors)

    def _fit(self, vectors: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _transform(self, vectors: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ZScore(PostProcessor):
    """Standard score per feature (Eq. 5).

    A feature whose spread is negligible next to the widest one (std below 1e-7 of it) is treated as
    constant and only centred: all-MiniLM-L6-v2, for one, has output features that stay near 1e-32,
    and scaling them to unit variance would turn numerical noise into full-weight features.
    """

    name = "zscore"
    spellings = {"zscore": "standard score per feature (Eq. 5)"}
    affine = True
    relative_tolerance = 1e-7

    def _fit(self, vectors):
        from sklearn.preprocessing import StandardScaler  # scikit-learn (≈ 1 s to import) only where a step is fitted

        scaler = StandardScaler().fit(vectors)
        scale = np.where(scaler.scale_ <= self.relative_tolerance * scaler.scale_.max(), 1.0, scaler.scale_)
        return {"mean": scaler.mean_, "scale": scale}

    def _transform(self, vectors):
        return (vectors - self.state["mean"]) / self.state["scale"]


class QuantileNormalization(PostProcessor):
    """Map every feature through its empirical quantiles onto a uniform (or normal) distribution."""

    spellings = {"quantile-u": "quantile normalisation to a uniform distribution (scikit-learn's QuantileTransformer)",
                 "quantile-n": "quantile normalisation to a normal distribution (scikit-learn's QuantileTransformer)"}

    def __init__(self, output_distribution: str = "uniform") -> None:
        super().__init__()
        self.output_distribution = output_distribution
        self.name = "quantile-u" if output_distribution == "uniform" else "quantile-n"

    @classmethod
    def from_name(cls, name: str) -> PostProcessor | None:
        return {"quantile-u": cls("uniform"), "quantile-n": cls("normal")}.get(name)

    def _estimator(self, n_quantiles: int) -> QuantileTransformer:
        from sklearn.preprocessing import QuantileTransformer

        return QuantileTransformer(n_quantiles=n_quantiles, output_distribution=self.output_distribution, random_state=0)

    subsample = 10_000  # scikit-learn's default: larger inputs are fitted on a random subsample

    def _fit(self, vectors):
        n_quantiles = min(1000, vectors.shape[0])
        if vectors.shape[0] <= self.subsample and not np.isnan(vectors).any():
            # The quantiles scikit-learn's fit computes (np.nanpercentile, one column at a time), from one
            # sort of all columns: bit-identical values (tested) at a fraction of the time.
            references = np.linspace(0, 1, n_quantiles, endpoint=True)
            return {"quantiles": column_percentiles(vectors, references), "references": references}
        estimator = self._estimator(n_quantiles).fit(vectors)
        return {"quantiles": estimator.quantiles_, "references": estimator.references_}

    def _transform(self, vectors):
        estimator = self._estimator(self.state["quantiles"].shape[0])
        estimator.quantiles_ = self.state["quantiles"]
        estimator.references_ = self.state["references"]
        estimator.n_features_in_ = self.state["quantiles"].shape[1]
        return estimator.transform(vectors)


def column_percentiles(vectors: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """``np.percentile(vectors, quantiles * 100, axis=0)`` (linear method), bit for bit, from one sort.

    np.percentile partitions around every requested index, which for a thousand quantiles costs far
    more than sorting each column once and interpolating exactly as numpy does (its ``_lerp``).
    """
    count = vectors.shape[0]
    q = np.true_divide(np.asarray(quantiles, dtype=np.float64) * 100, 100)  # the round trip np.percentile makes
    virtual = (count - 1) * q
    below = np.floor(virtual)
    above = below + 1
    below[virtual >= count - 1] = -1  # numpy takes the last element at and past the top
    above[virtual >= count - 1] = -1
    below[virtual < 0] = 0
    above[virtual < 0] = 0
    below, above = below.astype(np.intp), above.astype(np.intp)
    gamma = (virtual - below)[:, None]
    ordered = np.sort(vectors, axis=0)
    low, high = ordered[below], ordered[above]
    difference = high - low
    result = low + difference * gamma
    np.subtract(high, difference * (1 - gamma), out=result, where=gamma >= 0.5)
    return result


class Whitening(PostProcessor):
    """PCA whitening: the fitted vectors come out with zero mean and identity covariance.

    Directions with (numerically) zero variance, e.g. when there are fewer vectors than dimensions,
    cannot be scaled to unit variance and are dropped, so the output may be narrower than the input.
    """

    name = "whiten"
    spellings = {"whiten": "PCA whitening: zero mean, identity covariance"}
    affine = True

    def min_target_vectors(self, width: int) -> int:  # fewer vectors than dimensions: a singular covariance
        return max(MIN_TARGET_VECTORS, width + 1)

    def _fit(self, vectors):
        return self._fit_with(vectors, _svd_solver(vectors))

    def _fit_with(self, vectors: np.ndarray, solver: str) -> dict[str, np.ndarray]:
        if not np.ptp(vectors, axis=0).any():
            raise ValueError(f"post-processing step 'whiten': the {vectors.shape[0]} vectors it is fitted on are all "
                             "equal (no spread), so no direction can be scaled to unit variance")
        from sklearn.decomposition import PCA

        pca = PCA(whiten=False, svd_solver=solver).fit(vectors)
        keep = pca.explained_variance_ > pca.explained_variance_.max() * 1e-10
        return {
            "mean": pca.mean_,
            "components": pca.components_[keep],
            "scale": 1.0 / np.sqrt(pca.explained_variance_[keep]),
        }

    def _transform(self, vectors):
        return ((vectors - self.state["mean"]) @ self.state["components"].T) * self.state["scale"]


class AllButTheTop(PostProcessor):
    """ABTT-D: centre, then remove the projections on the top D principal directions."""

    spellings = {"abtt-D": "all-but-the-top: remove the top D principal directions after centring (Eq. 6-7)"}
    affine = True

    def __init__(self, directions: int = 2) -> None:
        super().__init__()
        self.directions = directions
        self.name = f"abtt-{directions}"

    @classmethod
    def from_name(cls, name: str) -> PostProcessor | None:
        match = _ABTT.match(name)
        return cls(int(match.group(1))) if match else None

    def min_target_vectors(self, width: int) -> int:  # centred vectors span n − 1 directions: D removed leave n − 1 − D
        return max(MIN_TARGET_VECTORS, self.directions + 2)

    def _fit(self, vectors):
        return self._fit_with(vectors, _svd_solver(vectors))

    def _fit_with(self, vectors: np.ndarray, solver: str) -> dict[str, np.ndarray]:
        if self.directions >= min(vectors.shape):
            raise InputError(f"{self.name} needs more than {self.directions} vectors and dimensions, got {vectors.shape}")
        from sklearn.decomposition import PCA

        pca = PCA(n_components=self.directions, svd_solver=solver).fit(vectors)
        return {"mean": pca.mean_, "components": pca.components_}

    def _transform(self, vectors):
        centred = vectors - self.state["mean"]
        components = self.state["components"]
        return centred - (centred @ components.T) @ components


class Normalize(PostProcessor):
    """Unit length (nothing to fit)."""

    name = "normalize"
    spellings = {"normalize": "unit length"}
    needs_fit = False
    unit_output = True

    def _fit(self, vectors):
        return {}

    def _transform(self, vectors):
        return unit_length(vectors)


def unit_length(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, a zero row left zero, in the rows' own dtype: the one normalisation formula
    (the ``normalize`` step, and ``encode(normalize_embeddings=True)`` through :func:`embedlab.methods.base.unit_rows`)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


# Every post-processing step, registered once: a spec's post= names are read from these classes' spellings.
STEPS: tuple[type[PostProcessor], ...] = (ZScore, QuantileNormalization, Whitening, AllButTheTop, Normalize)
STEP_NAMES = tuple(spelling for kind in STEPS for spelling in kind.spellings)


def make_step(name: str) -> PostProcessor:
    """A fresh (unfitted) step from its spec name."""
    for kind in STEPS:
        step = kind.from_name(name)
        if step is not None:
            return step
    raise InputError(f"unknown post-processing step {name!r}; choose from: {', '.join(STEP_NAMES)} (D a positive integer)")


class ChainStep(NamedTuple):
    """One step of a spec's chain, as :func:`parse_chain` reads it: its name and where it is fitted."""

    name: str
    on_reference: bool = False  # fitted on the reference corpus (``@ref``) instead of the target vectors

    # what the step answers for itself (:class:`PostProcessor`), asked of a fresh one
    needs_fit = property(lambda self: make_step(self.name).needs_fit)
    affine = property(lambda self: make_step(self.name).affine)
    unit_output = property(lambda self: make_step(self.name).unit_output)

    def min_target_vectors(self, width: int) -> int:  # an @ref step is fitted on the reference corpus: none
        return 0 if self.on_reference else make_step(self.name).min_target_vectors(width)


def parse_chain(value: str) -> list[ChainStep]:
    """``"zscore+whiten@ref"`` -> [("zscore", False), ("whiten", True)] (True: fit on the reference corpus)."""
    if value == "none":
        return []
    steps = []
    for item in value.split("+"):
        name, at, where = item.partition("@")
        if at and where != "ref":
            raise InputError(f"post-processing step {item!r}: the only fit source suffix is '@ref'")
        make_step(name)
        steps.append(ChainStep(name, bool(at)))
    return steps


def validate_chain(value: str) -> str:
    parse_chain(value)
    return value


class Chain:
    """Steps applied in order; each is fitted on the previous step's output."""

    def __init__(self, steps: list[PostProcessor]) -> None:
        self.steps = steps

    def fit_transform(self, vectors: np.ndarray) -> np.ndarray:
        for step in self.steps:
            vectors = step.fit_transform(vectors)
        return vectors

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        for step in self.steps:
            vectors = step.transform(vectors)
        return vectors

    def to_tensors(self) -> tuple[dict[str, np.ndarray], dict[str, str]]:
        """The fitted state as flat arrays plus string metadata (for safetensors)."""
        tensors = {key: value for index, step in enumerate(self.steps) for key, value in step.tensors(f"{index}.").items()}
        return tensors, {"steps": json.dumps([step.name for step in self.steps])}

    @classmethod
    def from_tensors(cls, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> Chain:
        return cls([make_step(name).restored(tensors, f"{index}.") for index, name in enumerate(json.loads(metadata["steps"]))])

    def save(self, path: str | Path) -> None:
        tensors, metadata = self.to_tensors()
        atomic_write_bytes(Path(path), sorted_header(safetensors_save(tensors, metadata=metadata)))

    @classmethod
    def load(cls, path: str | Path) -> Chain:
        tensors, metadata = read_safetensors(path)
        return cls.from_tensors(tensors, metadata)


def fit_chain(
    steps: Sequence[ChainStep], vectors: np.ndarray, reference: Callable[[], np.ndarray]
) -> tuple[Chain, np.ndarray]:
    """Fit the steps of :func:`parse_chain` in order; return the chain and ``vectors`` transformed by it.

    A step is fitted on the output of the steps before it: on the target ``vectors``, or with ``@ref``
    on the reference vectors passed through those same earlier steps. ``reference()`` is called only
    when some step needs it (it pools thousands of WikiText-2 sentences). The transformed vectors are
    computed while fitting, not a second time.
    """
    fitted: list[PostProcessor] = []
    current, current_reference = vectors, None
    for name, on_reference in steps:
        step = make_step(name)
        if on_reference and current_reference is None:
            current_reference = Chain(fitted).transform(reference())
        step.fit(current_reference if on_reference else current)
        current = step.transform(current)
        if current_reference is not None:
            current_reference = step.transform(current_reference)
        fitted.append(step)
    return Chain(fitted), current


def read_safetensors(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Arrays and metadata of a safetensors file."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        metadata = dict(handle.metadata() or {})
    return load_file(str(path)), metadata
