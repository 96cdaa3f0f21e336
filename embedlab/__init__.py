"""embedlab: text embeddings from pretrained transformers without fine-tuning, evaluated on one harness.

>>> import embedlab
>>> method = embedlab.load("minilm")                 # any method spec
>>> vectors = method.encode(["a text", "another"])   # numpy.float32, shape (2, 384)
>>> P, R, F = embedlab.bertscore(["a candidate"], ["its reference"])  # as the bert-score package gives them
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``embedlab.__version__``, read from :mod:`embedlab.version` on first use (PEP 562)."""
    if name == "__version__":
        from embedlab.version import __version__

        return __version__
    raise AttributeError(f"module 'embedlab' has no attribute {name!r}")


def load(spec: str):
    """The embedding method named by a method spec (see ``embedlab methods``)."""
    from embedlab.registry import load as load_method

    return load_method(spec)


def bertscore(cands, refs, model="minilm", layer=None, idf=False, rescale=False, batch_size=64, **options):
    """BERTScore (P, R, F1) of each candidate against its reference, equal to the ``bert-score`` package's
    ``score``; float32 arrays. See :func:`embedlab.matching.bertscore.bertscore` for every option."""
    from embedlab.matching.bertscore import bertscore as score

    return score(cands, refs, model=model, layer=layer, idf=idf, rescale=rescale, batch_size=batch_size, **options)


__all__ = ["__version__", "bertscore", "load"]
