"""The token-state entry: one text's token vectors of some layers, its cache key and its on-disk format.

Layers follow the pooling paper (§3.1): -1 = static token embeddings (the word-embedding lookup),
0 = the embedding output, 1…L = the transformer blocks. The disk cache is keyed by content: model
fingerprint, template, text and layer (one entry per text and layer, float32). An entry is written in
the safetensors format with its key, the layers it holds and a checksum in its metadata, so that an
entry that fails to decode or verify, or an index row that points at another entry, is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from safetensors.numpy import load as safetensors_load

CACHE_FORMAT = "5"  # 4: every entry records its key; 5: one entry per text and layer (older entries never match)
_SAFETENSORS_DTYPES = {"<f4": "F32", "<i8": "I64", "<i4": "I32", "|u1": "U8"}


def entry_key(fingerprint: str, template_text: str, layer: int, text: str, max_tokens: int | None = None) -> str:
    """The cache key of one text's states of one layer (see :meth:`TokenStateStore.key`)."""
    pieces = (CACHE_FORMAT, fingerprint, template_text, str(layer), text)
    if max_tokens is not None:  # a cut text's states differ from the whole text's (attention sees less)
        pieces += (f"first {max_tokens} tokens",)
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


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
        # flat uint8 views: memoryview cannot cast an array with a zero in its shape (a text with no token,
        # e.g. an empty one on a decoder that adds no BOS), and reshape(-1) of a contiguous array copies nothing
        return [len(encoded).to_bytes(8, "little"), encoded, *(memoryview(array.reshape(-1).view(np.uint8)) for array in arrays.values())]

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


def joined(parts: Sequence[TokenStates], layers: tuple[int, ...]) -> TokenStates:
    """One text's states of several layers from its one-layer entries (a single entry is returned as is)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return TokenStates(first.token_ids, np.concatenate([part.states for part in parts]), first.chunk_ids, first.template_mask, layers)
