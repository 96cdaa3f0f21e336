"""Everything embedlab keeps on disk: atomic writes (``atomic``), the budget and eviction (``budget``),
checksummed arrays (``arrays``), build locks (``locks``) and keys (``hashing``). Where the cache is and
how big it may grow are settings (:mod:`embedlab.runtime.settings`)."""

from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.atomic import (
    atomic_write_bytes,
    atomic_write_text,
    process_alive,
    remove_orphan_temporaries,
    save_figure,
    warn_unwritable,
)
from embedlab.runtime.cache.budget import (
    ENTRY_SUFFIXES,
    RECOMPUTABLE_MARKER,
    CacheKind,
    cache_kinds,
    cache_size,
    clear_cache,
    evict_to_budget,
    mark_recomputable,
    record_cache_write,
    record_use,
)
from embedlab.runtime.cache.hashing import array_digest, cache_key, texts_digest
from embedlab.runtime.cache.locks import BUILD_WAIT_SECONDS, building

__all__ = [
    "BUILD_WAIT_SECONDS", "ENTRY_SUFFIXES", "RECOMPUTABLE_MARKER", "ArrayStore", "CacheKind", "array_digest",
    "atomic_write_bytes", "atomic_write_text", "building", "cache_key", "cache_kinds", "cache_size", "clear_cache",
    "evict_to_budget", "mark_recomputable", "process_alive", "record_cache_write", "record_use",
    "remove_orphan_temporaries", "save_figure", "texts_digest", "warn_unwritable",
]
