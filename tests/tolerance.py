"""The suite's one rule for comparing what two code paths computed (docs/testing.md, *Comparing two code paths*).

Two paths are either bit-identical by construction (the same texts in the same batches through the same
kernels with the same thread count: compare with ``==`` / ``array_equal`` and say why in one line), or they
differ by float32 rounding (other batches or padding, another library's order of operations, another CPU's
kernels): compare within these tolerances, which are float32 arithmetic's, not one CPU's."""

from __future__ import annotations

import numpy as np

# float32 carries 24 bits (eps 1.19e-7): a unit-scale value that went through a 6-layer transformer in other
# batches or kernels moves by a few ulp per layer. Seen: 9e-7 (all-MiniLM-L6-v2 under forced AVX2 kernels,
# docs/records/test_second_kernels.md), 1.1e-6 (shards vs one encode on an AVX-512-FP16 Intel). 1e-5 is
# ~80 ulp at 1.0: ten times what was seen, and still a thousand times below what any real bug moves.
UNIT_ATOL = 1e-5
# the same for directions: 1 - cos of two float32 vectors that agree to UNIT_ATOL in their elements
COSINE_FLOOR = 1 - 1e-6
# micro-tuned (neural) vectors of a text tuned in another group: each step's products of other shapes round
# differently and the gradient steps carry that on (docs/neural.md, "what is and is not bit-identical")
TUNED_COSINE_FLOOR = 1 - 1e-5


def scaled_atol(reference: np.ndarray) -> float:
    """UNIT_ATOL relative to the largest magnitude of ``reference`` (at least 1): for vectors or scores
    that are not at unit scale (sums of hundreds of token vectors, unnormalised int8-scale tables)."""
    return UNIT_ATOL * max(1.0, float(np.abs(np.asarray(reference, dtype=np.float64)).max(initial=0.0)))

