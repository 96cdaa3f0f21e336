"""A method ready to encode a corpus shard by shard, wherever the shard runs.

Why this exists: some pooled specs fit statistics on the texts of one ``encode`` call (idf over the
target texts, post-processing steps without ``@ref``). Encoding shard by shard would fit each shard on
itself, so the engines fit every such part ONCE on the whole corpus, store the fitted state beside the
shards, and encode every shard (on this process or on a Ray actor) with that state. A pooled part whose
statistics do not depend on the texts (``@ref`` steps, ``normalize``, idf over WikiText-2, or nothing) is
fitted on a single text: its state is the same for any texts, and shipping it to Ray actors spares each
of them the reference corpus.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from embedlab.errors import InputError
from embedlab.methods.base import EmbeddingMethod, VectorMethod
from embedlab.registry import load
from embedlab.pooling.postprocess import make_step


def load_vector_method(spec: str) -> VectorMethod:
    """The method of ``spec``, refused when it has no vectors (pairwise families such as ``match:``)."""
    method = load(spec)
    if method.pairwise or not isinstance(method, VectorMethod):
        raise InputError(f"{method.spec} is a pairwise method: it scores text pairs and has no vectors to embed")
    return method


def fittable_parts(method: EmbeddingMethod) -> list[VectorMethod]:
    """The parts of ``method`` (itself, or the members of a concatenation) that hold fitted statistics."""
    members = getattr(method, "parts", [method])
    return [part for part in members if hasattr(part, "fit") and hasattr(part, "load_fitted")]


def fits_on_target(part: VectorMethod) -> bool:
    """Whether a pooled part's statistics depend on the texts it is fitted on (idf^T, a step without @ref)."""
    pipeline = part.pipeline
    return pipeline.selection.weighting == "idf-target" or any(
        not on_reference and make_step(name).needs_fit for name, on_reference in pipeline.post
    )


def needs_corpus_fit(method: EmbeddingMethod) -> bool:
    return any(fits_on_target(part) for part in fittable_parts(method))


def fit_parts(method: EmbeddingMethod, texts: Sequence[str], batch_size: int) -> list[bytes]:
    """Fit every fittable part (on ``texts`` if it depends on them, else on the first text); each part's
    state as safetensors bytes, in :func:`fittable_parts` order."""
    states = []
    with tempfile.TemporaryDirectory() as folder:
        for index, part in enumerate(fittable_parts(method)):
            part.fit(list(texts) if fits_on_target(part) else [texts[0]], batch_size=batch_size, show_progress_bar=False)
            path = Path(folder) / f"{index}.safetensors"
            part.save_fitted(str(path))
            states.append(path.read_bytes())
    return states


def restore_parts(method: EmbeddingMethod, states: Sequence[bytes]) -> EmbeddingMethod:
    """Give ``method``'s fittable parts the states :func:`fit_parts` produced (checked against spec and model)."""
    parts = fittable_parts(method)
    if len(parts) != len(states):
        raise ValueError(f"{method.spec}: {len(states)} fitted states for {len(parts)} fittable parts")
    with tempfile.TemporaryDirectory() as folder:
        for index, (part, state) in enumerate(zip(parts, states)):
            path = Path(folder) / f"{index}.safetensors"
            path.write_bytes(state)
            part.load_fitted(str(path))
    return method
