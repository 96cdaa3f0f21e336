"""The one owner of embedlab's process state and on-disk caches, one module per job:

* :mod:`~embedlab.runtime.settings`: every setting (``configure()``, then the environment, then the
  default) — data and cache roots, the cache budget, token-state caching; the only module that reads
  the process environment.
* :mod:`~embedlab.runtime.memo`: in-process memos (loaded models, token-state stores, layouts, tables …)
  are :class:`Memo` objects made by :func:`memo` or :func:`cached`; nothing else in the package keeps
  module-level mutable state. :func:`clear` empties them all.
* :mod:`~embedlab.runtime.progress`: every progress bar and status line.
* :mod:`~embedlab.runtime.memory`: malloc tuning for long runs.
* :mod:`~embedlab.runtime.extras`: missing-extra errors and matplotlib for files.
* :mod:`~embedlab.runtime.cache`: atomic writes, the cache budget and eviction, checksummed arrays
  (:class:`ArrayStore`), build locks (:func:`building`) and keys.

Every name is re-exported here, so ``from embedlab import runtime; runtime.cache_dir(...)`` is the way
callers use them.
"""

from embedlab.runtime.cache import (
    BUILD_WAIT_SECONDS,
    ENTRY_SUFFIXES,
    RECOMPUTABLE_MARKER,
    ArrayStore,
    CacheKind,
    atomic_write_bytes,
    atomic_write_text,
    building,
    cache_key,
    cache_kinds,
    cache_size,
    clear_cache,
    evict_to_budget,
    mark_recomputable,
    process_alive,
    record_cache_write,
    record_use,
    remove_orphan_temporaries,
    save_figure,
    texts_digest,
    warn_unwritable,
)
from embedlab.runtime.extras import MissingExtraError, pyplot
from embedlab.runtime.memo import Memo, cached, clear, memo
from embedlab.runtime.memory import keep_large_allocations_apart, release_free_memory
from embedlab.runtime.progress import PROGRESS_MODES, progress_bar, set_progress, show_progress, status
from embedlab.runtime.settings import (
    CACHE_LAYER_CHOICES,
    CACHE_LAYERS_VARIABLE,
    CACHE_MAX_VARIABLE,
    DEFAULT_CACHE_MAX,
    DEFAULT_MEMORY_CACHE_BYTES,
    REPO_ROOT,
    cache_budget,
    cache_dir,
    cache_layers,
    cache_root,
    configure,
    data_path,
    data_root,
    memory_cache_bytes,
    parse_size,
    set_token_state_storing,
    stores_token_states,
    token_states_uncached,
)

__all__ = [
    "BUILD_WAIT_SECONDS", "CACHE_LAYERS_VARIABLE", "CACHE_LAYER_CHOICES", "CACHE_MAX_VARIABLE", "DEFAULT_CACHE_MAX",
    "DEFAULT_MEMORY_CACHE_BYTES", "ENTRY_SUFFIXES", "PROGRESS_MODES", "RECOMPUTABLE_MARKER", "REPO_ROOT", "ArrayStore",
    "CacheKind", "Memo", "MissingExtraError", "atomic_write_bytes", "atomic_write_text", "building", "cache_budget",
    "cache_dir", "cache_key", "cache_kinds", "cache_layers", "cache_root", "cache_size", "cached", "clear", "clear_cache",
    "configure", "data_path", "data_root", "evict_to_budget", "keep_large_allocations_apart", "mark_recomputable", "memo",
    "memory_cache_bytes", "parse_size", "process_alive", "progress_bar", "pyplot", "record_cache_write", "record_use",
    "release_free_memory", "remove_orphan_temporaries", "save_figure", "set_progress", "set_token_state_storing",
    "show_progress", "status", "stores_token_states", "texts_digest", "token_states_uncached", "warn_unwritable",
]
