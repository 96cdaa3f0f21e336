"""embedlab: text embeddings from pretrained transformers without fine-tuning, evaluated on one harness."""

from __future__ import annotations

__version__ = "0.1.0"
