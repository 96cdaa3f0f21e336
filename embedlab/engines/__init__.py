"""Engines that embed a whole corpus into a resumable folder of shards: ``local`` (this process) and
``ray`` (Ray Data actors, one machine or a cluster). See docs/scale.md.

>>> from embedlab.engines import embed_corpus, read_shards
>>> embed_corpus("minilm", "texts.jsonl", "vectors/", engine="ray")   # doctest: +SKIP
>>> ids, vectors = read_shards("vectors/")                           # float32, C-contiguous
"""

from __future__ import annotations

from embedlab.engines.runner import DEFAULT_SHARD_SIZE, ENGINES, EmbedResult, embed_corpus
from embedlab.engines.shards import OutputFolderError, read_shards

__all__ = ["DEFAULT_SHARD_SIZE", "ENGINES", "EmbedResult", "OutputFolderError", "embed_corpus", "read_shards"]
