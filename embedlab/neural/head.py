"""Masked-LM heads: load a model with its real head, or with a head trained for it (paper §2, Appendix A).

The neural-embeddings paper (§2, Appendix A) micro-tunes vectors of BERT's pretrained masked-LM head
(``cls.predictions.transform.*``). all-MiniLM-L6-v2 ships without that head: loading it as
``BertForMaskedLM`` leaves ``cls.predictions.transform.*`` and the output bias freshly initialised
(only the decoder is tied to the word embeddings). This module

* loads any BERT-like model as a masked LM and tells whether its head came from the checkpoint
  (``output_loading_info``); a real head (bert-base-uncased) is used unchanged;
* otherwise installs a head trained by :func:`embedlab.training.mlm_head.train_head` (the shipped MiniLM
  head, matched to the model by content fingerprint), a head file given by path, or a deterministic
  untrained head (BERT's own initialisation, seeded).

Loaded models are kept in the runtime memo ``neural.masked_lm`` (one per model and head choice).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from embedlab import runtime

# The head's own tensors (the decoder weight is tied to the word embeddings and not part of the head).
HEAD_TENSOR_NAMES = (
    "cls.predictions.transform.dense.weight",
    "cls.predictions.transform.dense.bias",
    "cls.predictions.transform.LayerNorm.weight",
    "cls.predictions.transform.LayerNorm.bias",
    "cls.predictions.bias",
)
RESOURCES = Path(__file__).resolve().parent.parent / "resources"
IGNORE_LABEL = -100  # the label of positions without a prediction (cross-entropy's default ignore_index)
_LOADED = runtime.memo("neural.masked_lm")


class HeadError(RuntimeError):
    """A masked-LM head that cannot be found, loaded or matched to its model."""


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report (we inspect the loading info ourselves)."""
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()


def head_hash(model: torch.nn.Module) -> str:
    """Content hash of a masked-LM's head tensors: part of every neural-embedding cache key."""
    digest = hashlib.sha256()
    state = dict(model.named_parameters())
    for name in HEAD_TENSOR_NAMES:
        tensor = state[name].detach().to(torch.float32).contiguous().cpu()
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()[:16]


def untrained_head_tensors(hidden_size: int, vocab_size: int, initializer_range: float, seed: int = 0) -> dict[str, torch.Tensor]:
    """BERT's own initialisation of the head (normal dense weight, zero biases, unit LayerNorm), seeded."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "cls.predictions.transform.dense.weight": torch.randn(hidden_size, hidden_size, generator=generator) * initializer_range,
        "cls.predictions.transform.dense.bias": torch.zeros(hidden_size),
        "cls.predictions.transform.LayerNorm.weight": torch.ones(hidden_size),
        "cls.predictions.transform.LayerNorm.bias": torch.zeros(hidden_size),
        "cls.predictions.bias": torch.zeros(vocab_size),
    }


def install_head(model: torch.nn.Module, tensors: dict[str, torch.Tensor], origin: str) -> None:
    """Copy head tensors into a BertForMaskedLM (shapes checked; output bias kept tied to the decoder)."""
    state = dict(model.named_parameters())
    for name in HEAD_TENSOR_NAMES:
        if name not in tensors:
            raise HeadError(f"head file {origin}: tensor {name!r} is missing")
        target = state[name]
        if tuple(tensors[name].shape) != tuple(target.shape):
            raise HeadError(
                f"head file {origin}: tensor {name!r} has shape {tuple(tensors[name].shape)}, the model needs {tuple(target.shape)}"
            )
        with torch.no_grad():
            target.copy_(tensors[name].to(target.dtype))
    decoder = model.cls.predictions.decoder
    if decoder.bias is not None and decoder.bias.data_ptr() != model.cls.predictions.bias.data_ptr():
        with torch.no_grad():
            decoder.bias.copy_(model.cls.predictions.bias)


def read_head_file(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and metadata of a head safetensors file."""
    from safetensors import safe_open

    if not path.exists():
        raise HeadError(f"head file not found: {path}")
    tensors: dict[str, torch.Tensor] = {}
    with safe_open(str(path), framework="pt") as handle:
        metadata = dict(handle.metadata() or {})
        for key in handle.keys():
            tensors[key] = handle.get_tensor(key)
    return tensors, metadata


def shipped_head_for(*fingerprints: str) -> Path | None:
    """The packaged head file trained for the model with one of these fingerprints (content or weights), if any."""
    from safetensors import safe_open

    wanted = {fingerprint for fingerprint in fingerprints if fingerprint}
    for candidate in sorted(RESOURCES.glob("*_mlm_head.safetensors")):
        with safe_open(str(candidate), framework="pt") as handle:
            if (handle.metadata() or {}).get("model_fingerprint") in wanted:
                return candidate
    return None


@dataclass
class MaskedLM:
    """A masked-LM model ready for micro-tuning, and where its head came from."""

    name: str
    path: Path
    fingerprint: str
    tokenizer: object
    model: torch.nn.Module  # BertForMaskedLM-like: .bert (encoder) and .cls.predictions (head)
    max_length: int
    head_origin: str  # "checkpoint", "shipped:<file>", "file:<path>" or "untrained"
    head_hash: str
    checkpoint_has_head: bool
    weights_fingerprint: str = ""  # what shipped heads record (embedlab.models.weights_fingerprint)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)


def _checkpoint_has_head(missing_keys: set[str]) -> bool:
    """True when the checkpoint holds every head tensor (output bias under either of its tied names)."""
    transform_missing = any(name in missing_keys for name in HEAD_TENSOR_NAMES[:4])
    bias_missing = "cls.predictions.bias" in missing_keys and "cls.predictions.decoder.bias" in missing_keys
    return not transform_missing and not bias_missing


def load_masked_lm(name: str, head: str = "auto") -> MaskedLM:
    """Load ``name`` as a masked LM on CPU in float32, eval mode, with the head chosen by ``head``.

    ``head``: ``auto`` — the checkpoint's own head when it has one (used unchanged), else the shipped
    head trained for this exact model (matched by fingerprint), else an error saying how to train one;
    ``trained`` — same as auto but never the checkpoint's head if missing; ``untrained`` — BERT's
    initialisation, seeded (0), replacing whatever the checkpoint has; or a path to a head file made by
    ``embedlab mlm-head train``. Loaded once per process and ``(name, head)``.
    """
    return _LOADED.get((name, head), lambda: _load_masked_lm(name, head))


def _load_masked_lm(name: str, head: str) -> MaskedLM:
    from transformers import AutoModelForMaskedLM

    from embedlab.models import load_model

    with _quiet_transformers():
        base = load_model(name, device="cpu")
        model, info = AutoModelForMaskedLM.from_pretrained(
            base.path, local_files_only=True, dtype=torch.float32, output_loading_info=True
        )
    if not hasattr(model, "cls") or not hasattr(getattr(model, "cls"), "predictions"):
        raise HeadError(f"model {name!r}: {type(model).__name__} has no BERT-style cls.predictions head; neural embeddings need one")
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    has_head = _checkpoint_has_head(set(info.get("missing_keys", ())))
    config = model.config
    if head == "untrained":
        install_head(model, untrained_head_tensors(config.hidden_size, config.vocab_size, config.initializer_range), "untrained")
        origin = "untrained"
    elif head in ("auto", "trained"):
        if has_head:
            origin = "checkpoint"
        else:
            shipped = shipped_head_for(base.fingerprint, base.weights_fingerprint)
            if shipped is None:
                raise HeadError(
                    f"model {name!r} ({base.path}) has no pretrained masked-LM head and no shipped head matches its "
                    f"fingerprint {base.fingerprint}; train one with `embedlab mlm-head train {name} --out HEAD.safetensors` "
                    "and pass head=HEAD.safetensors (or head=untrained)"
                )
            tensors, _ = read_head_file(shipped)
            install_head(model, tensors, str(shipped))
            origin = f"shipped:{shipped.name}"
    else:
        head_path = Path(head).expanduser()
        tensors, metadata = read_head_file(head_path)
        trained_for = metadata.get("model_fingerprint")
        if trained_for and trained_for not in (base.fingerprint, base.weights_fingerprint):
            raise HeadError(f"head file {head_path} was trained for model fingerprint {trained_for}, not {base.fingerprint} ({name!r})")
        install_head(model, tensors, str(head_path))
        origin = f"file:{head_path}"
    return MaskedLM(
        name=name,
        path=base.path,
        fingerprint=base.fingerprint,
        tokenizer=base.tokenizer,
        model=model,
        max_length=base.max_length,
        head_origin=origin,
        head_hash=head_hash(model),
        checkpoint_has_head=has_head,
        weights_fingerprint=base.weights_fingerprint,
    )
