"""The neural-embeddings paper's method (*Neural Embeddings for Text*): micro-tune a masked-LM head on one text.

In data-flow order: ``head`` (masked-LM loading) → ``inputs`` (Fig. 8–10) → ``options`` (what is tuned)
→ ``reference`` / ``batched`` (the two exact micro-tuning paths) → ``variants`` (Eq. 1, Appendix G)
→ ``family`` (the ``neural`` method family, its cache and orchestration).
"""
