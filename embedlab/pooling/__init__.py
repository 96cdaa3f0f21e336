"""The pooling paper's method (*Extracting Sentence Embeddings from Pretrained Transformer Models*).

Token states → token selection and weights (§3.2–3.3) → aggregation (§3.1) → post-processing (§3.4).
"""
