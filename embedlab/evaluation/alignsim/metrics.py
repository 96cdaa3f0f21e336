"""ALIGN-SIM metrics: NED, the α/β adjustments and ε margins (paper §4, §5.2, A.5).

* NED(u, v) = ½·‖(u−ū) − (v−v̄)‖² / (‖u−ū‖² + ‖v−v̄‖²), ū the mean of u's components. It lies in
  [0, 1]: 0 for vectors equal up to a constant shift, ½ for orthogonal centred vectors, 1 for
  opposite ones; for centred vectors of equal norm it is (1 − cos)/2, half the cosine scale.
* Eq. 1: α = 1 − mean random-pair similarity (the mean over datasets of each dataset's mean), and an
  adjusted similarity is α × mean similarity (criteria 2 and 4).
* Eq. 2: β-adjusted NED = 1 − (1 − NED)·(1 − r), r the mean random-pair NED over datasets.
* Criteria 1, 3, 5: per-item margins, oriented so that positive means "aligned with human
  expectation"; a criterion holds at ε when the margin exceeds ε. Pass rates are reported over an
  ε grid and averaged (Table 3). The paper does not print its grid: :func:`fit_epsilon_grid` searches
  grids {0, step, …, E} for the one that comes closest to given averages.

Similarity is the harness's cosine (``embedlab.evaluation.scoring``). Per-item arrays are float32
(the project's public-array convention); arithmetic is float64.
"""

from __future__ import annotations

import numpy as np

from embedlab.errors import InputError

# ε grids: NED lives on half the cosine scale (see above), so its default grid is half as wide.
COSINE_EPSILONS = tuple(round(0.1 * step, 2) for step in range(10))  # 0.0 … 0.9
NED_EPSILONS = tuple(round(0.05 * step, 2) for step in range(10))  # 0.0 … 0.45


def _as_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 1:
        a, b = a[None, :], b[None, :]
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"expected two (n, d) arrays of the same shape, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        bad = np.flatnonzero(~(np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)))
        raise InputError(f"non-finite embedding values in row(s) {bad[:10].tolist()}")
    return a, b


def ned(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise normalised Euclidean distance (paper's NED), in [0, 1]."""
    a, b = _as_rows(a, b)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denominator = (a * a).sum(axis=1) + (b * b).sum(axis=1)
    if (denominator == 0).any():
        bad = np.flatnonzero(denominator == 0)[:10].tolist()
        raise InputError(f"NED undefined: both vectors constant in row(s) {bad}")
    return (0.5 * ((a - b) ** 2).sum(axis=1) / denominator).astype(np.float32)


def alpha(random_similarities: list[np.ndarray]) -> float:
    """Eq. 1: 1 − the mean over datasets of the mean random-pair similarity."""
    if not random_similarities or any(len(s) == 0 for s in random_similarities):
        raise ValueError("α needs random-pair similarities from at least one dataset, none empty")
    return float(1.0 - np.mean([np.mean(np.asarray(s, dtype=np.float64)) for s in random_similarities]))


def alpha_adjusted(similarity: float, alpha_value: float) -> float:
    """Eq. 1 applied: the similarity scaled by α (penalises methods that find random pairs similar)."""
    return float(similarity * alpha_value)


def random_ned_level(random_neds: list[np.ndarray]) -> float:
    """Eq. 2's inner mean: the mean over datasets of the mean random-pair NED."""
    if not random_neds or any(len(s) == 0 for s in random_neds):
        raise ValueError("β needs random-pair NEDs from at least one dataset, none empty")
    return float(np.mean([np.mean(np.asarray(s, dtype=np.float64)) for s in random_neds]))


def beta_adjusted(ned_value: float, random_ned: float) -> float:
    """Eq. 2: 1 − (1 − NED)·(1 − mean random-pair NED)."""
    return float(1.0 - (1.0 - ned_value) * (1.0 - random_ned))


def pass_rates(margins: np.ndarray, epsilons: tuple[float, ...]) -> np.ndarray:
    """Fraction of items whose margin exceeds each ε (float32, one per ε)."""
    margins = np.asarray(margins, dtype=np.float64)
    if margins.size == 0:
        raise ValueError("no margins to rate")
    return np.array([(margins > eps).mean() for eps in epsilons], dtype=np.float32)


def epsilon_grid(end: float, step: float) -> tuple[float, ...]:
    """{0, step, 2·step, …, end} (``end`` a multiple of ``step``), rounded so 0.1 + 0.2 prints as 0.3."""
    count = int(round(end / step))
    if count < 0 or not np.isclose(count * step, end):
        raise ValueError(f"ε grid end {end} is not a non-negative multiple of the step {step}")
    return tuple(round(step * k, 10) for k in range(count + 1))


def fit_epsilon_grid(margins: dict[str, np.ndarray], targets: dict[str, float], *, step: float = 0.05,
                     largest: float = 0.9) -> tuple[float, dict[str, float]]:
    """The grid {0, step, …, E}, E ≤ ``largest``, whose averaged pass rates (Table 3's summary) come closest in
    least squares to ``targets`` over all the given datasets jointly; returns E and those averages by dataset.

    One grid for every dataset: a single fitted number for several cells, so how close the other cells come
    says whether one grid explains them (ties go to the smaller E)."""
    missing = sorted(set(targets) - set(margins))
    if missing or not targets:
        raise ValueError(f"no margins for {missing or 'any dataset'} to fit the ε grid to")
    best: tuple[float, float, dict[str, float]] | None = None
    for end in epsilon_grid(largest, step):
        grid = epsilon_grid(end, step)
        averages = {name: float(np.mean(pass_rates(margins[name], grid))) for name in targets}
        error = sum((averages[name] - targets[name]) ** 2 for name in targets)
        if best is None or error < best[0] - 1e-12:
            best = (error, end, averages)
    return best[1], best[2]
