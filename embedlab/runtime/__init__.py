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

Callers import each name from the module that defines it (``from embedlab.runtime.settings import
cache_dir``); this package re-exports nothing, so a name's home is where its import says.
"""
