"""Token states computed once and cached: a memory LRU in front of the pack store, the model behind both.

The model computes every layer in one run, but a pooling spec reads one or two of them, so what is
kept follows the request: :meth:`TokenStateStore.compute` returns, holds in memory and writes to disk
only the layers it was asked for. A research grid that will pool many layer choices from the same
texts asks for every layer explicitly (``configure(cache_layers="all")`` in :mod:`embedlab.runtime.settings` or
``EMBEDLAB_CACHE_LAYERS=all``): each model run then stores all layers, and later configurations read
them instead of running the model again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from embedlab.errors import InputError
from embedlab.models.loading import LoadedModel
from embedlab.runtime.memo import memo
from embedlab.runtime.reuse import note_computed_texts, note_reused_texts
from embedlab.runtime.settings import (
    cache_budget,
    cache_dir,
    cache_layers,
    cache_root,
    memory_cache_bytes,
    stores_token_states,
)
from embedlab.tokens.entry import TokenStates, entry_key, joined
from embedlab.tokens.forward import check_max_tokens, run_model
from embedlab.tokens.packs import PackStore
from embedlab.tokens.templates import Template

PACK_BYTES = 256 << 20  # new entries are written in packs of about this size (an eighth of a smaller budget)


@dataclass
class _Request:
    """What one :meth:`TokenStateStore.compute` call asked for, and what the caches already held of the
    texts the model must run on (``cached``: text → the requested layers found)."""

    template: Template | None
    layers: tuple[int, ...]
    kept: tuple[int, ...]  # the layers a model run keeps: ``layers``, or every layer for a grid
    max_tokens: int | None
    cached: dict[str, dict[int, TokenStates]]


@dataclass
class _PendingPack:
    """New entries waiting to be written as one pack once they reach ``limit`` bytes."""

    write: Callable[[list[tuple[str, TokenStates]]], None]
    limit: int
    items: list[tuple[str, TokenStates]] = field(default_factory=list)
    nbytes: int = 0

    def add(self, items: list[tuple[str, TokenStates]]) -> None:
        """Add one text's new entries; write the pack when it is full."""
        self.items += items
        self.nbytes += sum(states.states.nbytes for _, states in items)
        if self.items and self.nbytes >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.items:
            self.write(self.items)
            self.items, self.nbytes = [], 0


class TokenStateStore:
    """Computes and caches token states for one model.

    An in-memory LRU (bounded in bytes, ``settings.configure(memory_cache_bytes=...)``, 256 MiB by default)
    sits in front of the disk cache so that several pooling configurations over the same texts in one
    process do not even re-read the disk. Both caches hold one entry per text and layer.
    """

    def __init__(self, model: LoadedModel, use_disk_cache: bool = True, memory_limit_bytes: int | None = None) -> None:
        self.model = model
        self.use_disk_cache = use_disk_cache
        self.memory_limit_bytes = memory_cache_bytes() if memory_limit_bytes is None else memory_limit_bytes
        self._memory: OrderedDict[str, TokenStates] = OrderedDict()
        self._memory_bytes = 0

    @property
    def all_layers(self) -> tuple[int, ...]:
        """-1 (static token embeddings), 0 (embedding output), 1 … L."""
        return tuple(range(-1, self.model.num_layers + 1))

    # -- keys and cache -------------------------------------------------------------------------
    def key(self, text: str, template: Template | None, layer: int, max_tokens: int | None = None) -> str:
        return entry_key(self.model.fingerprint, template.text if template else "", layer, text, max_tokens)

    def _remember(self, key: str, states: TokenStates) -> None:
        if key in self._memory:
            self._memory.move_to_end(key)
            return
        if states.states.nbytes > self.memory_limit_bytes:
            return  # would evict everything and still not fit
        self._memory[key] = states
        self._memory_bytes += states.states.nbytes
        while self._memory_bytes > self.memory_limit_bytes:
            _, dropped = self._memory.popitem(last=False)
            self._memory_bytes -= dropped.states.nbytes

    def _packs(self) -> PackStore:
        try:
            folder = cache_dir("token_states", self.model.fingerprint)
        except OSError:  # a read-only cache root: nothing stored yet, and writes will warn once
            folder = cache_root(create=False) / "token_states" / self.model.fingerprint
        return PackStore(folder)

    def _write_pack(self, items: list[tuple[str, TokenStates]]) -> None:
        self._packs().write(items)

    def _load_cached(self, keys: Sequence[str]) -> list[TokenStates | None]:
        """Entries from memory, else from the disk cache; None where absent or damaged (to recompute)."""
        found: list[TokenStates | None] = [None] * len(keys)
        wanted: dict[str, list[int]] = {}
        for position, key in enumerate(keys):
            if key in self._memory:
                self._memory.move_to_end(key)
                found[position] = self._memory[key]
            elif self.use_disk_cache:
                wanted.setdefault(key, []).append(position)
        if wanted:
            for key, states in self._packs().read(list(wanted)).items():
                self._remember(key, states)
                for position in wanted[key]:
                    found[position] = states
        return found

    # -- computation -----------------------------------------------------------------------------
    def compute(
        self,
        texts: Sequence[str],
        template: Template | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        layers: Sequence[int] | None = None,
        max_tokens: int | None = None,
    ) -> list[TokenStates]:
        """Token states of ``layers`` (default: every layer) for every text, from the caches where
        present, else from the model; ``max_tokens`` cuts each text to its first ``max_tokens`` input tokens.

        A text runs through the model when any of its requested layers is missing; what is kept of the
        run, in memory and on disk, is the requested layers, or every layer when the process asked for
        them all (``settings.cache_layers() == "all"``). New entries go to the disk cache in packs of up
        to ``PACK_BYTES`` (an eighth of a smaller cache budget), written on this thread while the model
        waits (see ``PackStore`` for why packs, and why not a background thread).
        """
        layers = self._checked_layers(layers)
        check_max_tokens(self.model, max_tokens)
        keys = [self.key(text, template, layer, max_tokens) for text in texts for layer in layers]
        results, cached = _split_found(texts, self._load_cached(keys), layers)
        # a cost being measured is told which texts the caches served and which run now (runtime.reuse)
        note_reused_texts(text for text, states in zip(texts, results) if states is not None)
        note_computed_texts(cached)
        if not cached:
            return results  # type: ignore[return-value]
        kept = self.all_layers if cache_layers() == "all" else layers
        request = _Request(template, layers, kept, max_tokens, cached)
        fresh = self._run_missing(request, batch_size, show_progress_bar)
        return [states if states is not None else fresh[text] for text, states in zip(texts, results)]

    def _checked_layers(self, layers: Sequence[int] | None) -> tuple[int, ...]:
        layers = self.all_layers if layers is None else tuple(layers)
        unknown = [layer for layer in layers if layer not in self.all_layers]
        if unknown or not layers:
            raise InputError(f"layer {unknown[0] if unknown else '(none)'} is outside -1..{self.model.num_layers} for this model")
        return layers

    def _run_missing(self, request: _Request, batch_size: int, show_progress_bar: bool | None) -> dict[str, TokenStates]:
        """Run the model over the texts the caches lack; keep and write what each text's run gives."""
        keeping = stores_token_states()  # off for a corpus embedded into shards: each text is read once
        writing = self.use_disk_cache and keeping
        pending = _PendingPack(self._write_pack, max(1, min(PACK_BYTES, cache_budget() // 8))) if writing else None
        missing_texts = list(request.cached)
        fresh: dict[str, TokenStates] = {}
        for position, states in self._run_model(missing_texts, request.template, batch_size, show_progress_bar,
                                                request.kept, request.max_tokens):
            text = missing_texts[position]
            fresh[text], new_entries = self._fresh_entries(request, text, states)
            if keeping:
                for key, single in new_entries:
                    self._remember(key, single)
            if pending is not None:
                pending.add(new_entries)
        if pending is not None:
            pending.flush()
        return fresh

    def _fresh_entries(self, request: _Request, text: str, states: TokenStates) -> tuple[TokenStates, list[tuple[str, TokenStates]]]:
        """A text's result from its model run, and its new one-layer entries (key, states) for the caches.

        A layer already cached keeps its cached values: the model ran on another batch then, so the fresh
        values may differ in the last bits, and a rerun (reading the cache) must give identical numbers."""
        kept, layers = request.kept, request.layers
        singles = {kept[0]: states} if len(kept) == 1 else {layer: states.only(layer, copy=True) for layer in kept}
        cached = request.cached[text]
        new_entries = [(self.key(text, request.template, layer, request.max_tokens), single)
                       for layer, single in singles.items() if layer not in cached]
        singles.update(cached)
        if len(layers) == 1:
            result = singles[layers[0]]  # the object the memory cache holds: layouts find it again
        else:
            result = states if kept == layers and not cached else joined([singles[layer] for layer in layers], layers)
        return result, new_entries

    def _run_model(self, texts: Sequence[str], template: Template | None, batch_size: int, show_progress_bar: bool | None,
                   layers: tuple[int, ...], max_tokens: int | None = None) -> Iterator[tuple[int, TokenStates]]:
        """``(text index, states of layers)`` of each text as its model run completes (:func:`forward.run_model`)."""
        return run_model(self.model, texts, template, batch_size, show_progress_bar, layers, max_tokens)


def _split_found(texts: Sequence[str], found: list[TokenStates | None], layers: tuple[int, ...],
                 ) -> tuple[list[TokenStates | None], dict[str, dict[int, TokenStates]]]:
    """Each text's result where the caches held every requested layer (else None), and, for each text
    the model must run on (in first-seen order), the requested layers the caches did hold."""
    results: list[TokenStates | None] = []
    cached: dict[str, dict[int, TokenStates]] = {}
    for index, text in enumerate(texts):
        parts = found[index * len(layers) : (index + 1) * len(layers)]
        if all(part is not None for part in parts):
            results.append(joined(parts, layers))  # type: ignore[arg-type]
        else:
            results.append(None)
            cached[text] = {layer: part for layer, part in zip(layers, parts) if part is not None}
    return results, cached


_SHARED_STORES = memo("token-state stores")


def store_for(model: LoadedModel) -> TokenStateStore:
    """One shared store per loaded model, so every method over that model shares the memory cache."""
    # the input length is in the key: BERTScore runs the same weights at the tokenizer's 512 (bertscore_scoring)
    return _SHARED_STORES.get((str(model.path), model.fingerprint, model.max_length), lambda: TokenStateStore(model))
