"""The pooling paper's method (*Extracting Sentence Embeddings from Pretrained Transformer Models*) as stages.

Token source (:mod:`~embedlab.pooling.sources`, §3.1–3.2) → token selection and weights
(:mod:`~embedlab.pooling.weights`, :mod:`~embedlab.pooling.aggregation`, §3.3) → aggregation (§3.1) →
post-processing (:mod:`~embedlab.pooling.postprocess`, §3.4), composed by :mod:`~embedlab.pooling.pipeline`.
"""
