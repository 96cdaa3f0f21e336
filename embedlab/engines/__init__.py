"""Engines that embed a whole corpus into a resumable folder of shards: ``local`` (this process) and
``ray`` (Ray Data actors, one machine or a cluster). See docs/scale.md.

>>> from embedlab.engines import embed_corpus, read_shards
>>> embed_corpus("minilm", "texts.jsonl", "vectors/", engine="ray")   # doctest: +SKIP
>>> ids, vectors = read_shards("vectors/")                           # float32, C-contiguous
"""

from __future__ import annotations

from embedlab.engines.shards import DEFAULT_SHARD_SIZE, ENGINES, OutputFolderError, read_shards

__all__ = ["DEFAULT_SHARD_SIZE", "ENGINES", "EmbedResult", "OutputFolderError", "embed_corpus", "read_shards"]


def __getattr__(name: str):
    """The runner's names on first use: reading shards, or the CLI's argument parser, never imports the
    models (torch) that only a run needs."""
    if name in ("EmbedResult", "embed_corpus"):
        from embedlab.engines import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
