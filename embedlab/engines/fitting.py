"""A method ready to encode a corpus shard by shard, wherever the shard runs.

Why this exists: some pooled specs fit statistics on the texts of one ``encode`` call (idf over the
target texts, post-processing steps without ``@ref``). Encoding shard by shard would fit each shard on
itself, so the engines fit the method ONCE on the whole corpus (:meth:`~embedlab.methods.base.EmbeddingMethod.fit_for_corpus`),
store its fitted state (:meth:`~embedlab.methods.base.EmbeddingMethod.fitted_state`) beside the shards, and
encode every shard (on this process or on a Ray actor) with that state restored. A part whose statistics do
not depend on the texts (``@ref`` steps, ``normalize``, idf over WikiText-2, or nothing) is fitted on a
single text: its state is the same for any texts, and shipping it to Ray actors spares each of them the
reference corpus. The method answers every question itself; this module only loads it.
"""

from __future__ import annotations

from embedlab.errors import InputError
from embedlab.methods.base import VectorMethod
from embedlab.registry import load


def load_vector_method(spec: str) -> VectorMethod:
    """The method of ``spec``, refused when it has no vectors (pairwise families such as ``match:``)."""
    method = load(spec)
    if method.pairwise or not isinstance(method, VectorMethod):
        raise InputError(f"{method.spec} is a pairwise method: it scores text pairs and has no vectors to embed")
    return method
