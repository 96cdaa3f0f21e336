"""embedlab: text embeddings from pretrained transformers without fine-tuning, evaluated on one harness.

>>> import embedlab
>>> method = embedlab.load("minilm")                 # any method spec
>>> vectors = method.encode(["a text", "another"])   # numpy.float32, shape (2, 384)
"""

from __future__ import annotations

__version__ = "0.1.0"


def load(spec: str):
    """The embedding method named by a method spec (see ``embedlab methods``)."""
    from embedlab.methods.registry import load as load_method

    return load_method(spec)


__all__ = ["__version__", "load"]
