"""Everything embedlab keeps on disk: atomic writes (``atomic``), the budget and eviction (``budget``),
checksummed arrays (``arrays``), build locks (``locks``) and keys (``hashing``). Where the cache is and
how big it may grow are settings (:mod:`embedlab.runtime.settings`). Nothing is re-exported here:
import each name from its module."""
