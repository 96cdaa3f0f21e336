"""Static embedding models on disk in model2vec's format: read any model2vec folder, write one.

A model2vec folder (``StaticModel.save_pretrained``) holds ``tokenizer.json`` (a Hugging Face fast
tokenizer), ``model.safetensors`` (``embeddings``: one row per token, float or int8; optional
``weights``: one scale per token; optional ``mapping``: token id → row, for vocabulary-quantised
models) and ``config.json`` (``normalize``, ``max_length`` …). model2vec encodes a text as

    mean over the text's tokens t (no special tokens, the unknown token dropped) of weights[t]·embeddings[mapping[t]]

then unit-normalises it when the config says ``normalize``. :class:`StaticModelFolder` reads such a
folder into that same arithmetic, checked before any work: a folder without the three files, a table
whose vocabulary or width disagrees with its tokenizer or config, fail with one clear error.

Differences from model2vec's ``encode``, both deliberate: embedlab pools every token of a long text
(model2vec cuts at ``max_length``, 512 tokens by default, and at 512 × the median token length in
characters), so vectors equal ``StaticModel.encode(texts, max_length=None)`` always and the default
``encode`` for texts shorter than that; and a text with no known token is the zero vector in both.

The "unknown token" is model2vec's: the tokenizer model's ``unk_token`` (WordPiece, BPE, WordLevel) or
a Unigram model's ``unk_id`` as written in tokenizer.json, even where that id is not ``<unk>``.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embedlab.errors import InputError
from embedlab.models.fingerprints import model_fingerprint
from embedlab.models.named import ModelNotFoundError, static_model_path
from embedlab.pooling.aggregation import FlatTokens
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.memo import cached

MODEL2VEC_FILES = ("config.json", "model.safetensors", "tokenizer.json")
TOKENIZE_BATCH = 1024  # texts per tokenizer call when many texts are tokenised on a thread pool


def token_ids_in_batches(encode: Callable[[list[str]], list[list[int]]], texts: Sequence[str]) -> list[list[int]]:
    """``encode(texts)`` (a fast tokenizer's batch call: token ids per text), in batches of ``TOKENIZE_BATCH``
    texts on one thread per usable core when there are several batches; the ids come back in text order.

    Why not one call: the Rust tokenizer parallelises a batch itself only while ``TOKENIZERS_PARALLELISM``
    is not ``false``, and that variable is process-wide: model2vec sets it to ``false`` whenever it encodes
    more than 10,000 texts (it runs its own thread pool instead), and users set it around ``fork``. After
    that one call runs on one core, half the speed of model2vec's threads on two cores. The tokenizer releases
    the GIL while it works, so threads parallelise it whatever the variable says.
    """
    texts = list(texts)
    threads = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
                  -(-len(texts) // TOKENIZE_BATCH))
    if threads <= 1:
        return encode(texts)
    batches = [texts[start : start + TOKENIZE_BATCH] for start in range(0, len(texts), TOKENIZE_BATCH)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [ids for batch_ids in pool.map(encode, batches) for ids in batch_ids]


class StaticModelError(InputError):
    """A folder that is not a usable model2vec model (missing files, a table that disagrees with its tokenizer)."""


class TokenizerVocabulary:
    """The few tokenizer answers the pooling stages ask of a static model's tokenizer (vocabulary, unknown
    and special tokens, batch encoding), read from a ``tokenizers.Tokenizer`` without transformers' wrapper."""

    def __init__(self, backend, unk_id: int | None) -> None:
        self.backend = backend
        self.unk_id = unk_id
        self.unk_token = backend.id_to_token(unk_id) if unk_id is not None else None
        self._vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.all_special_ids: list[int] = []  # model2vec adds no special tokens
        self.all_special_tokens: list[str] = []

    def __len__(self) -> int:
        return self._vocab_size

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)

    def __call__(self, texts: Sequence[str], add_special_tokens: bool = False, verbose: bool = False) -> dict[str, list[list[int]]]:
        def encode(batch: list[str]) -> list[list[int]]:
            return [encoding.ids for encoding in self.backend.encode_batch_fast(batch, add_special_tokens=add_special_tokens)]

        return {"input_ids": token_ids_in_batches(encode, texts)}


def _unknown_token_id(backend) -> int | None:
    """model2vec's rule for the token it drops (see the module docstring)."""
    model = backend.model
    if hasattr(model, "unk_token"):
        return None if model.unk_token is None else backend.token_to_id(model.unk_token)
    return json.loads(backend.to_str())["model"].get("unk_id")


@dataclass(eq=False)
class StaticModelFolder:
    """A model2vec model read from its folder: tokenizer, table, optional token mapping and scales.

    It answers what the pooling stages ask of a model (``name``, ``fingerprint``, ``tokenizer``,
    ``hidden_size``, the special-token frame, which is empty), so the ``static`` family runs through the
    same pipeline as ``avg`` and ``random``.
    """

    name: str
    path: Path
    fingerprint: str
    tokenizer: TokenizerVocabulary
    table: np.ndarray  # (R, d) float32: the embeddings as stored, int8 values as numbers
    mapping: np.ndarray | None  # (V,) int64 token id -> table row, or None (row = token id)
    scales: np.ndarray | None  # (V,) float32 per-token weight, or None
    normalize: bool
    config: dict = field(default_factory=dict)
    stored_dtype: str = "float32"

    num_layers = 0
    max_length = 1 << 62  # no input limit: a static model pools every token
    special_frame: tuple[list[int], list[int]] = ([], [])

    @property
    def hidden_size(self) -> int:
        return int(self.table.shape[1])

    def with_special_tokens(self, token_ids: list[int]) -> list[int]:
        return list(token_ids)

    def lookup(self, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Table rows and scales of ``token_ids``; the unknown token's scale is 0 (model2vec drops it)."""
        rows = token_ids if self.mapping is None else self.mapping[token_ids]
        scales = np.ones(len(token_ids), dtype=np.float32) if self.scales is None else self.scales[token_ids]
        if self.tokenizer.unk_id is not None:
            scales = np.where(token_ids == self.tokenizer.unk_id, np.float32(0), scales)
        return rows, scales

    def flat_tokens(self, texts: Sequence[str]) -> FlatTokens:
        """Texts as model2vec tokenises them, laid flat: no special tokens, the unknown token dropped. A text
        left with no token keeps one unknown token, whose scale 0 makes its vector zero (as in model2vec)."""
        sequences = self.tokenizer(texts)["input_ids"]
        lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
        ids = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum()))
        unk = self.tokenizer.unk_id
        if unk is not None:
            owner = np.repeat(np.arange(len(texts)), lengths)
            known = ids != unk
            ids, lengths = ids[known], np.bincount(owner[known], minlength=len(texts)).astype(np.int64)
        empty = np.flatnonzero(lengths == 0)
        if empty.size and unk is None:
            raise InputError(f"text at index {int(empty[0])} has no tokens (and the tokenizer has no unknown token to stand for it)")
        if empty.size:  # one placeholder token per empty text, inserted at the text's place
            starts = np.concatenate([[0], np.cumsum(lengths)])[empty]
            ids = np.insert(ids, starts, unk)
            lengths[empty] = 1
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        chunk_start = np.zeros(len(ids), dtype=bool)
        chunk_start[offsets[:-1]] = True
        no_token = np.zeros(len(ids), dtype=bool)
        return FlatTokens(ids, offsets, chunk_start, no_token, no_token.copy(), np.zeros(0, dtype=np.int64))

    def token_table(self) -> np.ndarray:
        """(V, d) float32: every token's effective vector, scale applied (the unknown token's is zero)."""
        ids = np.arange(len(self.tokenizer))
        rows, scales = self.lookup(ids)
        return (self.table[rows] * scales[:, None]).astype(np.float32)


def resolve_static_path(name: str) -> Path:
    """The folder of a named static model (``tokenlearn``) or a path; checks that the folder is model2vec's."""
    try:
        folder = static_model_path(name)
    except ModelNotFoundError as error:
        raise StaticModelError(str(error)) from None
    if folder is None:
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise StaticModelError(f"static model {name!r}: no such folder (give a model2vec model folder or a named static model: tokenlearn)")
    missing = [item for item in MODEL2VEC_FILES if not (folder / item).is_file()]
    if missing:
        raise StaticModelError(f"{folder} is not a model2vec model: it has no {', '.join(missing)} "
                               f"(a model2vec folder holds {', '.join(MODEL2VEC_FILES)})")
    try:
        config = json.loads((folder / "config.json").read_text())
    except ValueError as error:
        raise StaticModelError(f"{folder / 'config.json'}: not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise StaticModelError(f"{folder / 'config.json'}: expected a JSON object")
    if config.get("model_type", "model2vec") != "model2vec":
        raise StaticModelError(f"{folder} is a transformer model folder (config.json names model_type "
                               f"{config.get('model_type')!r}), not a model2vec static model; use it as a model "
                               f"(e.g. avg:{folder}) or export a static model from it with embedlab export-static")
    return folder.resolve()


def check_static_model(name: str) -> None:
    """Raise the error :func:`load_static_model` would for a wrong folder, without reading the table."""
    resolve_static_path(name)


def load_static_model(name: str) -> StaticModelFolder:
    """Read a model2vec folder (or a named static model), checking the table against its tokenizer.

    Remembered per folder and file stamps: a folder rewritten in place is read again."""
    folder = resolve_static_path(name)
    stamp = tuple((item, (folder / item).stat().st_size, (folder / item).stat().st_mtime_ns) for item in MODEL2VEC_FILES)
    return _load_static_model(name, str(folder), stamp)


@cached("static model folders", maxsize=2)
def _load_static_model(name: str, path: str, stamp: tuple) -> StaticModelFolder:
    from safetensors import SafetensorError, safe_open
    from tokenizers import Tokenizer

    folder = Path(path)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise StaticModelError(f"{folder / 'config.json'}: not JSON ({error})") from None
    weights_file = folder / "model.safetensors"
    try:
        with safe_open(str(weights_file), framework="numpy") as handle:
            arrays = {key: handle.get_tensor(key) for key in handle.keys()}
    except (SafetensorError, OSError) as error:
        raise StaticModelError(f"{weights_file}: not a readable safetensors file ({error})") from None
    if "embeddings" not in arrays:
        raise StaticModelError(f"{weights_file} holds no 'embeddings' table (it has: {', '.join(sorted(arrays)) or 'nothing'})")
    try:
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as error:  # noqa: BLE001 - the tokenizers library raises a bare Exception on a bad file
        raise StaticModelError(f"{folder / 'tokenizer.json'}: not a Hugging Face fast tokenizer ({error})") from None
    backend.no_truncation()  # a truncation or padding setting saved in tokenizer.json must not cut or pad texts
    backend.no_padding()
    tokenizer = TokenizerVocabulary(backend, _unknown_token_id(backend))
    embeddings, mapping, scales = arrays["embeddings"], arrays.get("mapping"), arrays.get("weights")
    _check_table(folder, embeddings, mapping, scales, len(tokenizer), config)
    return StaticModelFolder(
        name=name,
        path=folder,
        fingerprint=model_fingerprint(folder),
        tokenizer=tokenizer,
        table=np.ascontiguousarray(embeddings, dtype=np.float32),
        mapping=None if mapping is None else mapping.astype(np.int64),
        scales=None if scales is None else scales.astype(np.float32),
        normalize=bool(config.get("normalize", False)),
        config=config,
        stored_dtype=np.dtype(embeddings.dtype).name,
    )


def _check_table(folder: Path, embeddings: np.ndarray, mapping: np.ndarray | None, scales: np.ndarray | None,
                 vocab_size: int, config: dict) -> None:
    where = folder / "model.safetensors"
    if embeddings.ndim != 2 or embeddings.shape[1] == 0:
        raise StaticModelError(f"{where}: 'embeddings' must be a (tokens, width) table, got shape {embeddings.shape}")
    if not (np.issubdtype(embeddings.dtype, np.floating) or np.issubdtype(embeddings.dtype, np.integer)):
        raise StaticModelError(f"{where}: 'embeddings' has dtype {embeddings.dtype}, not a number type")
    rows, width = embeddings.shape
    if mapping is None and rows != vocab_size:
        raise StaticModelError(f"{where}: the table has {rows} rows but tokenizer.json has {vocab_size} tokens "
                               "(and there is no 'mapping' from tokens to rows)")
    if mapping is not None:
        if not np.issubdtype(mapping.dtype, np.integer):  # model2vec refuses it; a cast would cut 9.99 to row 9
            raise StaticModelError(f"{where}: 'mapping' has dtype {mapping.dtype}; token rows must be integers")
        if mapping.shape != (vocab_size,):
            raise StaticModelError(f"{where}: 'mapping' has shape {mapping.shape}; tokenizer.json has {vocab_size} tokens")
        if mapping.size and (mapping.min() < 0 or mapping.max() >= rows):
            raise StaticModelError(f"{where}: 'mapping' points outside the table's {rows} rows")
    if scales is not None and scales.shape != (vocab_size,):
        raise StaticModelError(f"{where}: 'weights' has shape {scales.shape}; tokenizer.json has {vocab_size} tokens")
    _check_config_types(folder / "config.json", config)
    quantised = config.get("vocabulary_quantization")
    if quantised is not None and int(quantised) != rows:
        raise StaticModelError(f"{folder / 'config.json'}: vocabulary_quantization is {quantised} but the table has {rows} rows")
    hidden = config.get("hidden_dim")
    if hidden is not None and int(hidden) != width:
        raise StaticModelError(f"{folder / 'config.json'}: hidden_dim is {hidden} but the table is {width} wide")
    if not np.isfinite(embeddings.astype(np.float32)).all() or (scales is not None and not np.isfinite(scales).all()):
        raise StaticModelError(f"{where}: the table or its weights hold NaN or infinite values")


def _check_config_types(where: Path, config: object) -> None:
    """config.json's values of the types model2vec reads: an object, ``normalize`` true/false, the sizes whole numbers."""
    if not isinstance(config, dict):
        raise StaticModelError(f"{where}: not a JSON object")
    for key, kind, wanted in (("normalize", bool, "true or false"), ("hidden_dim", int, "a whole number"),
                              ("vocabulary_quantization", int, "a whole number")):
        value = config.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise StaticModelError(f"{where}: {key!r} is {value!r}; model2vec reads {wanted}")


def plain_tokenizer_json(tokenizer_json: str) -> str:
    """The tokenizer without the truncation and padding settings a transformers tokenizer may carry (a model
    trained with 256-token inputs saves truncation at 256): a static model pools every token."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer_json)
    backend.no_truncation()
    backend.no_padding()
    return backend.to_str()


def write_static_folder(folder: Path, table: np.ndarray, tokenizer_json: str, config: dict) -> None:
    """Write a model2vec folder: ``model.safetensors`` (float32 ``embeddings``), ``tokenizer.json``,
    ``config.json`` and sentence-transformers' ``modules.json``, so that ``StaticModel.from_pretrained``
    (and sentence-transformers' StaticEmbedding) load it unchanged."""
    from safetensors.numpy import save as safetensors_save

    folder.mkdir(parents=True, exist_ok=True)
    table = np.ascontiguousarray(table, dtype=np.float32)
    config = {**config, "embedding_dtype": "float32", "hidden_dim": int(table.shape[1])}
    modules = [{"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"}]
    if config.get("normalize"):
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": "sentence_transformers.models.Normalize"})
    atomic_write_bytes(folder / "model.safetensors", safetensors_save({"embeddings": table}))
    atomic_write_bytes(folder / "tokenizer.json", plain_tokenizer_json(tokenizer_json).encode("utf-8"))
    atomic_write_bytes(folder / "config.json", (json.dumps(config, indent=2) + "\n").encode("utf-8"))
    atomic_write_bytes(folder / "modules.json", (json.dumps(modules, indent=2) + "\n").encode("utf-8"))
