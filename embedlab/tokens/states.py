"""Token states: the layers' token vectors of a text, computed once and cached on disk.

Layers follow the pooling paper (§3.1): -1 = static token embeddings (the word-embedding lookup),
0 = the embedding output, 1…L = the transformer blocks. A text longer than the model's input is split
into sentence-packed chunks (neural-embeddings paper, Appendix A); each chunk is run with its own
special tokens and the chunks' token states are concatenated, so nothing is truncated unless the caller
asks for it: ``max_tokens=N`` keeps each text's first N model-input tokens (special tokens included),
what sentence-transformers' ``max_seq_length`` does (the pooled option ``truncate=N``).

Encoders and decoders run the same way. "Special tokens" are whatever the model's own tokenizer puts
around one sequence (:attr:`LoadedModel.special_frame`): [CLS] … [SEP] for BERT, <s> … </s> for RoBERTa,
a BOS token for Llama-2 or Gemma, nothing at all for GPT-2 and SmolLM2 (their tokenizers add none, and
their models were trained so). Each chunk of a long text gets its own frame, so a decoder's chunk starts
with its own BOS where the tokenizer adds one. Batches are padded on the right with an attention mask: a
causal model's real tokens come before the padding and never attend to it, and their position ids start
at 0 as they would alone, so a text's states do not depend on the batch it ran in, for either kind
(tests/tokens/test_decoder_states.py).

The model computes every layer in one run, but a pooling spec reads one or two of them, so what is
kept follows the request: :meth:`TokenStateStore.compute` returns, holds in memory and writes to disk
only the layers it was asked for. A research grid that will pool many layer choices from the same
texts asks for every layer explicitly (``runtime.configure(cache_layers="all")`` or
``EMBEDLAB_CACHE_LAYERS=all``): each model run then stores all layers, and later configurations read
them instead of running the model again.

The disk cache is keyed by content: model fingerprint, template, text and layer (one entry per text
and layer, float32). Entries are appended to pack files written atomically and found through a SQLite
index (``PackStore``); each carries a checksum and its own key, so an entry that fails to load or
verify, or an index row that points at another entry, is recomputed. A damaged index is moved aside and
a new one built; a cache folder that cannot be written (read-only, full) is warned about once and the
states are computed without caching. Packs count towards the cache budget (``EMBEDLAB_CACHE_MAX``) and
the least recently read are evicted whole (:mod:`embedlab.runtime`); an evicted entry is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load as safetensors_load
from tqdm.auto import tqdm

from embedlab.models import LoadedModel
from embedlab.runtime import (
    atomic_write_bytes,
    cache_budget,
    cache_dir,
    cache_layers,
    cache_root,
    mark_recomputable,
    memo,
    memory_cache_bytes,
    record_cache_write,
    record_use,
    remove_orphan_temporaries,
    stores_token_states,
    warn_unwritable,
)
from embedlab.data.sentences import chunk_token_ids
from embedlab.tokens.templates import Template

logger = logging.getLogger(__name__)

CACHE_FORMAT = "5"  # 4: every entry records its key; 5: one entry per text and layer (older entries never match)
PACK_BYTES = 256 << 20  # new entries are written in packs of about this size (an eighth of a smaller budget)
_SAFETENSORS_DTYPES = {"<f4": "F32", "<i8": "I64", "<i4": "I32", "|u1": "U8"}
# A batch holds at most ``batch_size`` sequences, and its rows × width² (each attention head's scores) stay
# within ``batch_size × BATCH_WIDTH²``: rows of up to 128 tokens batch as before, 256-token windows 8 at a
# time, 512-token windows 2 at a time. Attention memory grows with rows × width² (one MiniLM forward of 32
# windows of 512 tokens took 525 MB more peak memory here, 8 of them 215 MB), so without this bound a
# corpus run's peak was set by whichever slice held the most long texts, and kept rising with the corpus.
BATCH_WIDTH = 128


def length_batches(lengths: Sequence[int], batch_size: int, width: int = BATCH_WIDTH) -> list[list[int]]:
    """Positions of ``lengths`` in batches, longest first: at most ``batch_size`` rows each, and rows ×
    (longest length)² within ``batch_size × width²`` (a longer sequence still gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    budget = batch_size * width * width
    batches: list[list[int]] = []
    for position in order:
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * lengths[batches[-1][0]] ** 2 <= budget:
            batches[-1].append(position)
        else:
            batches.append([position])
    return batches


@dataclass
class TokenStates:
    """Some layers' vectors of one text's tokens (chunks concatenated)."""

    token_ids: np.ndarray  # (N,) int64
    states: np.ndarray  # (k, N, d) float32: states[i] is layer layers[i]
    chunk_ids: np.ndarray  # (N,) int32: which chunk each token came from
    template_mask: np.ndarray  # (N,) bool: the tokens a prompt template marks ([MASK] tokens, echo's second copy)
    layers: tuple[int, ...] = ()  # () = every layer, -1 … L, so states[layer + 1] is layer `layer`

    def __post_init__(self) -> None:
        if not self.layers:
            self.layers = tuple(range(-1, self.states.shape[0] - 1))

    def layer(self, layer: int) -> np.ndarray:
        try:
            return self.states[self.layers.index(layer)]
        except ValueError:
            raise KeyError(f"layer {layer} was not kept for these token states (they hold layers {self.layers})") from None

    def only(self, layer: int, copy: bool = False) -> TokenStates:
        """The states of one layer: a view, or with ``copy`` an array of its own (so that holding it does
        not hold the other layers' memory)."""
        position = self.layers.index(layer)
        states = self.states[position : position + 1]
        return TokenStates(self.token_ids, states.copy() if copy else states, self.chunk_ids, self.template_mask, (layer,))

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    def checksum(self) -> str:
        """CRC-32 over every array: catches damaged entries at a fraction of a cryptographic hash's cost."""
        value = 0
        for array in (self.token_ids, self.states, self.chunk_ids, self.template_mask):
            value = zlib.crc32(np.ascontiguousarray(array), value)
        return f"{value:08x}"

    def to_buffers(self, key: str) -> list[bytes | memoryview]:
        """The entry in the safetensors format as a header plus the arrays' own memory (no copy).

        The layers of a few thousand texts are hundreds of MB; serialising them into one bytes object
        first would copy all of it once more on the way to the disk. ``key`` is recorded so that an
        index row pointing at another (intact) entry is caught when read.
        """
        arrays = {
            "states": np.ascontiguousarray(self.states, dtype=np.float32),
            "token_ids": np.ascontiguousarray(self.token_ids, dtype=np.int64),
            "chunk_ids": np.ascontiguousarray(self.chunk_ids, dtype=np.int32),
            "template_mask": self.template_mask.astype(np.uint8),
        }
        header: dict[str, object] = {"__metadata__": {"format": CACHE_FORMAT, "key": key, "checksum": self.checksum(),
                                                      "layers": ",".join(map(str, self.layers))}}
        offset = 0
        for name, array in arrays.items():
            header[name] = {"dtype": _SAFETENSORS_DTYPES[array.dtype.str], "shape": list(array.shape),
                            "data_offsets": [offset, offset + array.nbytes]}
            offset += array.nbytes
        encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
        encoded += b" " * (-len(encoded) % 8)  # pad as safetensors does, so the data starts 8-byte aligned
        return [len(encoded).to_bytes(8, "little"), encoded, *(memoryview(array).cast("B") for array in arrays.values())]

    @classmethod
    def from_bytes(cls, payload: bytes, key: str | None = None) -> TokenStates:
        """Decode a cache entry; raises ValueError when it is damaged in any way or, given ``key``, when
        it was stored under another key."""
        try:
            tensors = safetensors_load(payload)
            header_length = int.from_bytes(payload[:8], "little")
            metadata = json.loads(payload[8 : 8 + header_length]).get("__metadata__", {})
        except Exception as error:  # noqa: BLE001 - any decoding failure means a damaged entry
            raise ValueError(f"unreadable token-state entry: {error}") from error
        if metadata.get("format") != CACHE_FORMAT:
            raise ValueError("token-state entry has an unknown format")
        if key is not None and metadata.get("key") != key:
            raise ValueError(f"index row points at the entry of another key ({str(metadata.get('key'))[:16]})")
        try:
            layers = tuple(int(layer) for layer in str(metadata.get("layers", "")).split(","))
        except ValueError:
            raise ValueError("token-state entry does not say which layers it holds") from None
        states = cls(
            token_ids=tensors["token_ids"],
            states=tensors["states"],
            chunk_ids=tensors["chunk_ids"],
            template_mask=tensors["template_mask"].astype(bool),
            layers=layers,
        )
        if states.states.ndim != 3 or states.states.shape[1] != states.num_tokens or states.states.shape[0] != len(layers):
            raise ValueError("token-state entry has inconsistent shapes")
        if states.checksum() != metadata.get("checksum"):
            raise ValueError("token-state entry fails its checksum")
        return states


@dataclass
class _Sequence:
    text_index: int
    chunk_index: int
    input_ids: list[int]
    template_positions: list[int]


class TokenStateStore:
    """Computes and caches token states for one model.

    An in-memory LRU (bounded in bytes, ``runtime.configure(memory_cache_bytes=...)``, 256 MiB by default)
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
        pieces = (CACHE_FORMAT, self.model.fingerprint, template.text if template else "", str(layer), text)
        if max_tokens is not None:  # a cut text's states differ from the whole text's (attention sees less)
            pieces += (f"first {max_tokens} tokens",)
        digest = hashlib.sha256()
        for piece in pieces:
            digest.update(piece.encode("utf-8"))
            digest.update(b"\x00")
        return digest.hexdigest()

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

    # -- tokenisation -----------------------------------------------------------------------------
    def _tokenize(self, text: str) -> list[int]:
        # verbose=False: long texts are chunked below, so the tokenizer's length warning does not apply
        return list(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def _sequences(self, text_index: int, text: str, token_ids: list[int], template: Template | None,
                   max_tokens: int | None = None) -> list[_Sequence]:
        """The model inputs of one text: one sequence, one per sentence-packed chunk, or (``max_tokens``) the
        text cut to the sequence whose input, special tokens and template included, is ``max_tokens`` long."""
        tokenizer = self.model.tokenizer
        frame_before, frame_after = self.model.special_frame
        limit = self.model.max_length if max_tokens is None else max_tokens
        overhead, copies = (template.overhead(tokenizer), template.copies) if template is not None else (0, 1)
        budget = (limit - len(frame_before) - len(frame_after) - overhead) // copies  # echo holds each chunk twice
        if budget < 1:
            raise ValueError(f"template {template.name if template else ''} leaves no room for text in {limit} tokens")
        if len(token_ids) <= budget:
            chunks = [token_ids]
        elif max_tokens is not None:
            chunks = [token_ids[:budget]]
        else:
            chunks = chunk_token_ids(text, self._tokenize, budget)
        sequences = []
        for chunk_index, chunk in enumerate(chunks):
            prompt, marked = template.wrap(tokenizer, chunk) if template is not None else (chunk, [])
            input_ids = self.model.with_special_tokens(prompt)
            sequences.append(_Sequence(text_index, chunk_index, input_ids, [len(frame_before) + position for position in marked]))
        return sequences

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
        them all (``runtime.cache_layers() == "all"``). New entries go to the disk cache in packs of up
        to ``PACK_BYTES`` (an eighth of a smaller cache budget), written on this thread while the model
        waits (see ``PackStore`` for why packs, and why not a background thread).
        """
        layers = self.all_layers if layers is None else tuple(layers)
        unknown = [layer for layer in layers if layer not in self.all_layers]
        if unknown or not layers:
            raise ValueError(f"layer {unknown[0] if unknown else '(none)'} is outside -1..{self.model.num_layers} for this model")
        check_max_tokens(self.model, max_tokens)
        kept = self.all_layers if cache_layers() == "all" else layers
        keys = [self.key(text, template, layer, max_tokens) for text in texts for layer in layers]
        found = self._load_cached(keys)
        present = {key for key, states in zip(keys, found) if states is not None}
        results: list[TokenStates | None] = []
        missing: dict[str, int] = {}
        cached_parts: dict[str, dict[int, TokenStates]] = {}
        for index, text in enumerate(texts):
            parts = found[index * len(layers) : (index + 1) * len(layers)]
            if all(part is not None for part in parts):
                results.append(_joined(parts, layers))  # type: ignore[arg-type]
            else:
                results.append(None)
                missing.setdefault(text, index)
                cached_parts[text] = {layer: part for layer, part in zip(layers, parts) if part is not None}
        if not missing:
            return results  # type: ignore[return-value]
        missing_texts = list(missing)
        fresh: dict[str, TokenStates] = {}
        pending: list[tuple[str, TokenStates]] = []
        pending_bytes = 0
        keeping = stores_token_states()  # off for a corpus embedded into shards: each text is read once
        writing = self.use_disk_cache and keeping
        pack_limit = max(1, min(PACK_BYTES, cache_budget() // 8)) if writing else 0

        def ready(position: int, states: TokenStates) -> None:
            nonlocal pending_bytes
            text = missing_texts[position]
            singles = {kept[0]: states} if len(kept) == 1 else {layer: states.only(layer, copy=True) for layer in kept}
            # A layer already cached keeps its cached values: the model ran on another batch then, so the fresh
            # values may differ in the last bits, and a rerun (reading the cache) must give identical numbers.
            cached = cached_parts.get(text, {})
            singles.update(cached)
            if len(layers) == 1:
                fresh[text] = singles[layers[0]]  # the object the memory cache holds: layouts find it again
            else:
                fresh[text] = states if kept == layers and not cached else _joined([singles[layer] for layer in layers], layers)
            for layer, single in singles.items():
                if layer in cached:
                    continue
                key = self.key(text, template, layer, max_tokens)
                if keeping:
                    self._remember(key, single)
                if writing and key not in present:
                    pending.append((key, single))
                    pending_bytes += single.states.nbytes
            if pending and pending_bytes >= pack_limit:
                self._packs().write(pending)
                pending.clear()
                pending_bytes = 0

        self._run_model(missing_texts, template, batch_size, show_progress_bar, ready, kept, max_tokens)
        if pending:
            self._packs().write(pending)
        return [states if states is not None else fresh[text] for text, states in zip(texts, results)]

    @property
    def _no_kv_cache(self) -> dict:
        """A decoder would fill a key/value cache for generation on every forward pass; states need none."""
        return {"use_cache": False} if self.model.is_decoder else {}

    @torch.inference_mode()
    def _run_model(
        self,
        texts: Sequence[str],
        template: Template | None,
        batch_size: int,
        show_progress_bar: bool | None,
        ready: Callable[[int, TokenStates], None],
        layers: tuple[int, ...],
        max_tokens: int | None = None,
    ) -> None:
        """Run the model over all texts' sequences, longest first; call ``ready`` with ``layers`` of each
        text as it completes (the other layers of a batch are dropped as soon as it is done)."""
        encoded = self.model.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        sequences = [
            sequence for index, (text, ids) in enumerate(zip(texts, encoded))
            for sequence in self._sequences(index, text, list(ids), template, max_tokens)
        ]
        remaining = [0] * len(texts)
        for sequence in sequences:
            remaining[sequence.text_index] += 1
        done: list[list[tuple[_Sequence, np.ndarray]]] = [[] for _ in texts]
        model, device = self.model.model, self.model.device
        pad_id = self.model.tokenizer.pad_token_id or 0
        embed = model.get_input_embeddings()
        batches = length_batches([len(sequence.input_ids) for sequence in sequences], batch_size)
        for positions in tqdm(batches, desc="token states", disable=not show_progress_bar):
            batch = [sequences[position] for position in positions]
            width = max(len(sequence.input_ids) for sequence in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            for row, sequence in enumerate(batch):
                input_ids[row, : len(sequence.input_ids)] = torch.tensor(sequence.input_ids)
                attention[row, : len(sequence.input_ids)] = 1
            input_ids, attention = input_ids.to(device), attention.to(device)
            hidden = model(input_ids=input_ids, attention_mask=attention, output_hidden_states=True,
                           **self._no_kv_cache).hidden_states
            outputs = [embed(input_ids) if layer == -1 else hidden[layer] for layer in layers]  # each (b, width, d)
            outputs = [output.float().cpu().numpy() for output in outputs]
            for row, sequence in enumerate(batch):
                # one copy per sequence, straight into its own (k, length, d) array
                length = len(sequence.input_ids)
                states = np.empty((len(outputs), length, outputs[0].shape[-1]), dtype=np.float32)
                for index, output in enumerate(outputs):
                    states[index] = output[row, :length]
                done[sequence.text_index].append((sequence, states))
                remaining[sequence.text_index] -= 1
                if remaining[sequence.text_index] == 0:
                    ready(sequence.text_index, _assemble(done[sequence.text_index], layers))
                    done[sequence.text_index] = []


class PackStore:
    """The disk cache of one model: entries appended to pack files, found through a SQLite index.

    One file per text was the obvious layout, but creating thousands of small files costs the kernel
    about a millisecond each here (≈ 3 s of system time for STS-B test's 2,758 sentences, against
    0.2 s to write the same 480 MB as one file), more than the model run saves. So every batch of new
    entries becomes one pack, written atomically (temporary file, then rename) before the index
    learns of it; each entry keeps its own checksum, so a damaged entry is detected when read and
    recomputed into a new pack, and its index row is replaced. Packs are written on the calling thread:
    a background writer measured no faster here, the model already keeping both cores busy.

    Packs are the unit of the cache budget: reading a pack records its use, eviction deletes whole
    packs, and the index rows of a pack found missing are dropped (its entries are recomputed).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index_path = folder / "index.sqlite"
        if folder.is_dir():
            remove_orphan_temporaries(folder)
            mark_recomputable(folder)

    @contextmanager
    def _index(self) -> Iterator[sqlite3.Connection]:
        """A connection to the index; a damaged index (not SQLite, malformed) is moved aside first."""
        connection = sqlite3.connect(self.index_path, timeout=120)
        try:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, pack TEXT NOT NULL, "
                "offset INTEGER NOT NULL, length INTEGER NOT NULL)"
            )
            yield connection
        except sqlite3.OperationalError:
            raise  # locked, unreadable folder …: not damage, the callers decide
        except sqlite3.DatabaseError as error:
            connection.close()
            self._move_index_aside(error)
            raise _IndexMovedAside from error
        finally:
            connection.close()

    def _move_index_aside(self, error: sqlite3.DatabaseError) -> None:
        """Rename a damaged index (and its journal) to ``index.sqlite.damaged-<time>``, so that the next
        connection starts a new one, and say so: the entries it indexed are recomputed as they are asked for."""
        aside = self.index_path.with_name(f"{self.index_path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            os.replace(self.index_path, aside)
        except FileNotFoundError:
            return  # another process moved it aside first
        for suffix in ("-journal", "-wal", "-shm"):
            sidecar = self.index_path.with_name(self.index_path.name + suffix)
            if sidecar.exists():
                os.replace(sidecar, aside.with_name(aside.name + suffix))
        warnings.warn(f"damaged token-state index {self.index_path} ({error}) moved aside to {aside}; "
                      "a new index is built and its entries are recomputed", RuntimeWarning, stacklevel=5)

    def locations(self, keys: Sequence[str]) -> dict[str, tuple[str, int, int]]:
        """key -> (pack file name, byte offset, byte length) for the keys the index holds."""
        if not self.index_path.exists():
            return {}
        found: dict[str, tuple[str, int, int]] = {}
        try:
            with self._index() as connection:
                for start in range(0, len(keys), 500):  # stay below SQLite's limit on bound parameters
                    chunk = list(keys[start : start + 500])
                    marks = ",".join("?" * len(chunk))
                    for key, pack, offset, length in connection.execute(
                        f"SELECT key, pack, offset, length FROM entries WHERE key IN ({marks})", chunk
                    ):
                        found[key] = (pack, offset, length)
        except _IndexMovedAside:
            return {}
        except sqlite3.OperationalError as error:
            logger.warning("recomputing token states: index %s is unreadable (%s)", self.index_path, error)
            return {}
        return found

    def read(self, keys: Sequence[str]) -> dict[str, TokenStates]:
        """The intact entries among ``keys``; damaged or missing ones are logged and left out."""
        located = self.locations(keys)
        by_pack: dict[str, list[tuple[int, int, str]]] = {}
        for key, (pack, offset, length) in located.items():
            by_pack.setdefault(pack, []).append((offset, length, key))
        entries: dict[str, TokenStates] = {}
        for pack, items in by_pack.items():
            path = self.folder / pack
            try:
                stream = open(path, "rb")
            except FileNotFoundError:  # evicted to keep the cache budget (or deleted by hand)
                logger.info("recomputing %d token-state entries: pack %s was evicted", len(items), path)
                self._forget_pack(pack)
                continue
            except OSError as error:
                logger.warning("recomputing %d token-state entries: pack %s is unreadable (%s)", len(items), path, error)
                continue
            record_use(path)
            with stream:
                for offset, length, key in sorted(items):
                    stream.seek(offset)
                    try:
                        payload = stream.read(length)
                        if len(payload) != length:
                            raise ValueError(f"entry truncated ({len(payload)} of {length} bytes)")
                        entries[key] = TokenStates.from_bytes(payload, key)
                    except (ValueError, OSError) as error:
                        logger.warning("recomputing damaged token-state cache entry %s in %s (%s)", key[:16], path, error)
        return entries

    def write(self, items: Sequence[tuple[str, TokenStates]]) -> None:
        """Append ``items`` as one new pack and point the index at it; a folder that cannot be written
        warns once and the entries stay uncached."""
        buffers: list[bytes | memoryview] = []
        rows = []
        offset = 0
        digest = hashlib.sha256()
        for key, states in items:
            pieces = states.to_buffers(key)
            length = sum(memoryview(piece).nbytes for piece in pieces)
            buffers.extend(pieces)
            rows.append((key, offset, length))
            offset += length
            digest.update(key.encode("ascii"))
        pack = f"{digest.hexdigest()[:32]}.pack"
        rows = [(key, pack, start, length) for key, start, length in rows]
        try:
            atomic_write_bytes(self.folder / pack, buffers)
            try:
                self._insert(rows)
            except _IndexMovedAside:
                self._insert(rows)  # into the new index
        except (OSError, sqlite3.OperationalError) as error:
            warn_unwritable(self.folder, error if isinstance(error, OSError) else OSError(str(error)))
            return
        record_cache_write(offset)

    def _forget_pack(self, pack: str) -> None:
        """Drop the index rows of a pack that is gone, so later reads do not look for it."""
        try:
            with self._index() as connection, connection:
                connection.execute("DELETE FROM entries WHERE pack = ?", (pack,))
        except (_IndexMovedAside, sqlite3.OperationalError):
            pass  # a read-only or locked index: the rows only cost a failed open next time

    def _insert(self, rows: list[tuple[str, str, int, int]]) -> None:
        with self._index() as connection, connection:
            connection.executemany("INSERT OR REPLACE INTO entries (key, pack, offset, length) VALUES (?, ?, ?, ?)", rows)


class _IndexMovedAside(Exception):
    """Raised inside :class:`PackStore` after a damaged index was moved aside (its rows are gone)."""


def _joined(parts: Sequence[TokenStates], layers: tuple[int, ...]) -> TokenStates:
    """One text's states of several layers from its one-layer entries (a single entry is returned as is)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return TokenStates(first.token_ids, np.concatenate([part.states for part in parts]), first.chunk_ids, first.template_mask, layers)


def _assemble(parts: list[tuple[_Sequence, np.ndarray]], layers: tuple[int, ...]) -> TokenStates:
    """One text's token states (of ``layers``) from its chunks' outputs, in chunk order."""
    parts = sorted(parts, key=lambda part: part[0].chunk_index)
    masks = []
    for sequence, _ in parts:
        mask = np.zeros(len(sequence.input_ids), dtype=bool)
        mask[sequence.template_positions] = True
        masks.append(mask)
    return TokenStates(
        token_ids=np.concatenate([np.asarray(sequence.input_ids, dtype=np.int64) for sequence, _ in parts]),
        states=parts[0][1] if len(parts) == 1 else np.concatenate([states for _, states in parts], axis=1),
        chunk_ids=np.concatenate([np.full(len(sequence.input_ids), sequence.chunk_index, dtype=np.int32) for sequence, _ in parts]),
        template_mask=np.concatenate(masks),
        layers=layers,
    )


_SHARED_STORES = memo("token-state stores")


def check_max_tokens(model: LoadedModel, max_tokens: int | None) -> None:
    """A cut longer than the model's input cannot run as one sequence: refuse it, naming the limit."""
    if max_tokens is not None and not 0 < max_tokens <= model.max_length:
        raise ValueError(f"truncate={max_tokens}: {model.name} takes 1 to {model.max_length} input tokens "
                         "(without truncate, long texts are split into sentence-packed chunks)")


def store_for(model: LoadedModel) -> TokenStateStore:
    """One shared store per loaded model, so every method over that model shares the memory cache."""
    return _SHARED_STORES.get((str(model.path), model.fingerprint), lambda: TokenStateStore(model))


def indexed_entries(folder: Path) -> int:
    """Token-state entries (text × layer) the indexes under ``folder`` (``<cache>/token_states``) point at,
    for ``embedlab cache info``; rows of evicted packs are counted until a read drops them."""
    total = 0
    for index_path in sorted(folder.glob("*/index.sqlite")):
        try:
            connection = sqlite3.connect(f"file:{index_path}?mode=ro", uri=True)
            try:
                total += connection.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            finally:
                connection.close()
        except sqlite3.Error:
            continue  # damaged or locked: it is moved aside or read when next used
    return total
