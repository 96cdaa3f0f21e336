"""Engines that embed a whole corpus into a resumable folder of shards: ``local`` (this process) and
``ray`` (Ray Data actors, one machine or a cluster). See docs/scale.md.

>>> from embedlab.engines.runner import embed_corpus
>>> from embedlab.engines.shards import read_shards
>>> embed_corpus("minilm", "texts.jsonl", "vectors/", engine="ray")   # doctest: +SKIP
>>> ids, vectors = read_shards("vectors/")                           # float32, C-contiguous

Nothing is re-exported here: import each name from its module (reading shards never imports torch).
"""
