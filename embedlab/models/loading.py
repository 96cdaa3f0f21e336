"""Resolving a model name to a local folder or GGUF file, checking it without loading, its traits, and
loading it (:class:`LoadedModel`), all without network access."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from embedlab.errors import InputError
from embedlab.models.checks import check_loaded_model, quiet_load_report
from embedlab.models.fingerprints import content_sha256, model_fingerprint, weight_files, transformer_fingerprint
from embedlab.models.gguf import check_gguf, convert_gguf, converted_gguf_folder, gguf_header, gguf_in
from embedlab.models.named import NAMED_MODELS, STATIC_MODELS, ModelNotFoundError, unknown_model_message
from embedlab.models.precision import COMPUTES, TORCH_DTYPES, fingerprint_suffix, quantize_linear_int8
from embedlab.runtime.memo import cached


def resolve_model_path(name: str) -> Path:
    """The local folder of a named model, a folder path, or a cached Hugging Face id."""
    if name in NAMED_MODELS:
        try:
            return NAMED_MODELS[name].locate()
        except ModelNotFoundError as error:
            raise ModelNotFoundError(unknown_model_message(name, str(error))) from error
    if name in STATIC_MODELS:
        raise ModelNotFoundError(f"{name!r} is a static (model2vec) model, not a transformer: use it as static:{name}")
    candidate = Path(name).expanduser()
    gguf = gguf_in(candidate) if candidate.exists() else None
    if gguf is not None:
        return gguf.resolve()
    if candidate.is_file():
        raise ModelNotFoundError(unknown_model_message(name, f"{candidate} is a file but not a GGUF model (*.gguf)"))
    if candidate.is_dir():
        if is_model2vec_folder(candidate):
            raise ModelNotFoundError(f"{candidate} is a static (model2vec) model folder, not a transformer: use it as static:{name}")
        if not (candidate / "config.json").exists():
            raise ModelNotFoundError(unknown_model_message(name, f"folder {candidate} has no config.json (and no GGUF file)"))
        if not weight_files(candidate) and not list(candidate.glob("*.index.json")):
            raise ModelNotFoundError(
                f"model {name!r}: folder {candidate} has a config.json but no weights (*.safetensors or *.bin); "
                "give a folder written by save_pretrained, or a GGUF file")
        return candidate.resolve()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as error:  # noqa: BLE001 - any hub failure means "not available offline"
        raise ModelNotFoundError(
            unknown_model_message(name, "not a named model, not a local folder, and not in the local Hugging Face cache")
        ) from error


def is_model2vec_folder(folder: Path) -> bool:
    """A model2vec folder: tokenizer.json, model.safetensors and a config.json whose model_type, if any, is model2vec."""
    if not all((folder / item).is_file() for item in ("config.json", "model.safetensors", "tokenizer.json")):
        return False
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type", "model2vec") == "model2vec"


def check_model(name: str) -> None:
    """Raise the ModelNotFoundError that :func:`load_model` would, without loading anything.

    Specs are checked when a method is built, so a typo fails at ``embedlab.load`` with the list of
    named models, not minutes later at the first encode. Cheap: no weights are read, nothing unpacked.
    """
    named = NAMED_MODELS.get(name)
    if named is not None:
        try:
            named.check_installed()
        except ModelNotFoundError as error:
            raise ModelNotFoundError(unknown_model_message(name, str(error))) from error
    path = resolve_model_path(name) if named is None or named.packaged_gguf else None  # parts are joined at load
    if path is not None and path.is_file() and not (converted_gguf_folder(path) / ".complete").exists():
        check_gguf(path, name)  # header and tensor table only; a converted file was checked before


def _is_decoder_config(config) -> bool:
    """A causal (decoder-only) LM: a type ``transformers`` maps to a causal LM and to no masked LM (GPT-2,
    Llama, Gemma …); BERT-like types have both heads registered and are encoders."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

    model_type = getattr(config, "model_type", "")
    return bool(getattr(config, "is_decoder", False)) or (
        model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES)


@dataclass(frozen=True)
class ModelTraits:
    """What a method needs to know of a model before any work: its kind, whether it has a mask token, its
    number of layers and the input tokens it takes (special tokens included)."""

    kind: str  # "encoder" or "decoder"
    has_mask_token: bool
    num_layers: int | None = None
    max_length: int | None = None
    width: int | None = None  # the hidden size: the pooled vectors' width
    special_tokens: int = 0  # the tokens the tokenizer puts around one sequence ([CLS] … [SEP]: 2)


def model_traits(name: str) -> ModelTraits | None:
    """The kind and mask token of a model, read from its config and tokenizer files (no weights); for a GGUF
    file not converted yet, from its header."""
    path = resolve_model_path(name)
    if path.is_file():
        converted = converted_gguf_folder(path)
        if not (converted / ".complete").exists():
            return _gguf_traits(path, name)
        path = converted
    return _traits_of_folder(str(path))


def _gguf_traits(gguf: Path, name: str) -> ModelTraits | None:
    """The traits a GGUF's header gives before it is converted (layers, input length, width), so a spec is
    checked before minutes of conversion; None for an encoder-decoder (T5), whose kind the header leaves open."""
    header = gguf_header(gguf, name)
    if header.architecture.startswith("t5"):
        return None
    return ModelTraits("decoder", False, header.block_count, header.context_length, header.embedding_length)


@cached("model traits")
def _traits_of_folder(path: str) -> ModelTraits:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    layers, width = getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)
    before, after = special_frame(tokenizer)
    return ModelTraits("decoder" if _is_decoder_config(config) else "encoder", tokenizer.mask_token_id is not None,
                       int(layers) if layers is not None else None, _max_length(Path(path), tokenizer, config),
                       int(width) if width is not None else None, len(before) + len(after))


def special_frame(tokenizer: object) -> tuple[list[int], list[int]]:
    """The special token ids ``tokenizer`` puts before and after one sequence (e.g. [CLS] … [SEP])."""
    probe = "hello"
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe)["input_ids"])
    for offset in range(len(full) - len(bare) + 1):
        if full[offset : offset + len(bare)] == bare:
            return full[:offset], full[offset + len(bare) :]
    raise ValueError(f"cannot locate the special-token frame of tokenizer {type(tokenizer).__name__}")


@dataclass
class LoadedModel:
    """A tokenizer and encoder ready for inference, with what the caches need to know about them."""

    name: str
    path: Path
    fingerprint: str
    tokenizer: object
    model: torch.nn.Module
    max_length: int  # tokens per input, special tokens included
    transformer_fingerprint: str = ""  # see transformer_fingerprint(): what shipped heads and token weights match
    compute: str = "fp32"  # fp32, bf16, fp16 or int8 (models/precision.py); the fingerprint carries any but fp32

    @property
    def parameter_count(self) -> int:
        """The encoder's parameters (every weight tensor's elements; what the cost of an evaluation reports)."""
        return int(sum(parameter.numel() for parameter in self.model.parameters()))

    @property
    def fp32_fingerprint(self) -> str:
        """The fingerprint of the same model computing in fp32: what learned resources (token weights) match."""
        return self.fingerprint.removesuffix(fingerprint_suffix(self.compute))

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def is_decoder(self) -> bool:
        """Whether the model is a causal (decoder-only) language model: each token sees only those before it."""
        return _is_decoder_config(self.model.config)

    @property
    def kind(self) -> str:
        """``decoder`` (causal LM) or ``encoder``: what token selection and pooling refuse or allow."""
        return "decoder" if self.is_decoder else "encoder"

    @functools.cached_property
    def special_frame(self) -> tuple[list[int], list[int]]:
        """The special token ids the tokenizer puts before and after one sequence (e.g. [CLS] … [SEP])."""
        return special_frame(self.tokenizer)

    @property
    def special_tokens(self) -> int:
        """How many tokens the frame adds to each sequence."""
        before, after = self.special_frame
        return len(before) + len(after)

    def with_special_tokens(self, token_ids: list[int]) -> list[int]:
        """One input sequence: ``token_ids`` inside the model's special-token frame."""
        before, after = self.special_frame
        return before + list(token_ids) + after


def _max_length(path: Path, tokenizer, config) -> int:
    """Sentence-transformers' max_seq_length when the folder defines one, else the model's own limit."""
    st_config = path / "sentence_bert_config.json"
    if st_config.exists():
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    limit = int(getattr(config, "max_position_embeddings", 512))
    if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "mpnet", "camembert"}:
        limit -= 2  # these models reserve position ids for padding
    tokenizer_limit = int(getattr(tokenizer, "model_max_length", limit) or limit)
    return min(limit, tokenizer_limit)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_model(name: str, device: str | None = None, compute: str = "fp32") -> LoadedModel:
    """Load a model's tokenizer and encoder (eval mode) without network access, computing in ``compute``
    (:mod:`embedlab.models.precision`: fp32 by default; bf16/fp16 weights are cast as they are read; int8
    quantises the linear layers, on CPU). Any compute but fp32 is appended to the fingerprint. Loaded once
    per process for each name, device and compute."""
    if compute not in COMPUTES:
        raise InputError(f"model {name!r}: compute {compute!r} is not one of {', '.join(COMPUTES)}")
    return _load_model(name, device, compute)


@cached("loaded models", maxsize=4)
def _load_model(name: str, device: str | None, compute: str) -> LoadedModel:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path = resolve_model_path(name)
    fingerprint = None
    if path.is_file():  # a GGUF file: dequantised once into a cached folder, fingerprinted by the file's content
        fingerprint = "gguf-" + content_sha256(path)[:11]
        path = convert_gguf(path, name)
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"model {name!r}: embedlab needs a fast tokenizer (tokenizer.json) in {path}")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the per-tensor loading bar is noise for a local folder
    with quiet_load_report():  # its report is checked just below and raised as one error
        model, info = AutoModel.from_pretrained(path, local_files_only=True, dtype=TORCH_DTYPES[compute], output_loading_info=True)
    check_loaded_model(model, info, tokenizer, f"model {name!r} ({path})")
    model.eval()
    # dynamic int8 kernels are CPU kernels: an int8 model stays on the CPU whatever the default device
    model = quantize_linear_int8(model) if compute == "int8" else model.to(torch.device(device) if device else default_device())
    return LoadedModel(
        name=name,
        path=path,
        fingerprint=(fingerprint or model_fingerprint(path)) + fingerprint_suffix(compute),
        tokenizer=tokenizer,
        model=model,
        max_length=_max_length(path, tokenizer, config),
        transformer_fingerprint=transformer_fingerprint(path),
        compute=compute,
    )
