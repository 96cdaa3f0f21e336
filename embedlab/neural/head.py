"""Masked-LM heads: load a model with its real head, or train one for encoders shipped without it.

The neural-embeddings paper (§2, Appendix A) micro-tunes vectors of BERT's pretrained masked-LM head
(``cls.predictions.transform.*``). all-MiniLM-L6-v2 ships without that head: loading it as
``BertForMaskedLM`` leaves ``cls.predictions.transform.*`` and the output bias freshly initialised
(only the decoder is tied to the word embeddings). This module

* loads any BERT-like model as a masked LM and tells whether its head came from the checkpoint
  (``output_loading_info``); a real head (bert-base-uncased) is used unchanged;
* otherwise installs a head trained by :func:`train_head` (the shipped MiniLM head, matched to the
  model by content fingerprint), a head file given by path, or a deterministic untrained head;
* trains such a head with the encoder frozen on WikiText-2 train (15% masking, 80/10/10), seeded,
  resumable, and reports masked-token top-1/top-5 accuracy on WikiText-2 valid.

Because the encoder is frozen, the encoder runs once over a fixed masking of the training tokens and
only the hidden states at the masked positions are kept; every epoch then trains the head on those.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from embedlab.runtime import atomic_write_bytes, cache_dir, data_path

HEAD_PREFIX = "cls.predictions."
# The head's own tensors (the decoder weight is tied to the word embeddings and not part of the head).
HEAD_TENSOR_NAMES = (
    "cls.predictions.transform.dense.weight",
    "cls.predictions.transform.dense.bias",
    "cls.predictions.transform.LayerNorm.weight",
    "cls.predictions.transform.LayerNorm.bias",
    "cls.predictions.bias",
)
RESOURCES = Path(__file__).resolve().parent.parent / "resources"
IGNORE_LABEL = -100


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


def shipped_head_for(fingerprint: str) -> Path | None:
    """The packaged head file trained for the model with this content fingerprint, if any."""
    from safetensors import safe_open

    for candidate in sorted(RESOURCES.glob("*_mlm_head.safetensors")):
        with safe_open(str(candidate), framework="pt") as handle:
            if (handle.metadata() or {}).get("model_fingerprint") == fingerprint:
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


_MASKED_LM_CACHE: dict[tuple[str, str], MaskedLM] = {}


def load_masked_lm(name: str, head: str = "auto") -> MaskedLM:
    """Load ``name`` as a masked LM on CPU in float32, eval mode, with the head chosen by ``head``.

    ``head``: ``auto`` — the checkpoint's own head when it has one (used unchanged), else the shipped
    head trained for this exact model (matched by fingerprint), else an error saying how to train one;
    ``trained`` — same as auto but never the checkpoint's head if missing; ``untrained`` — BERT's
    initialisation, seeded (0), replacing whatever the checkpoint has; or a path to a head file made by
    ``embedlab mlm-head train``.
    """
    key = (name, head)
    if key in _MASKED_LM_CACHE:
        return _MASKED_LM_CACHE[key]
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
            shipped = shipped_head_for(base.fingerprint)
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
        if trained_for and trained_for != base.fingerprint:
            raise HeadError(f"head file {head_path} was trained for model fingerprint {trained_for}, not {base.fingerprint} ({name!r})")
        install_head(model, tensors, str(head_path))
        origin = f"file:{head_path}"
    loaded = MaskedLM(
        name=name,
        path=base.path,
        fingerprint=base.fingerprint,
        tokenizer=base.tokenizer,
        model=model,
        max_length=base.max_length,
        head_origin=origin,
        head_hash=head_hash(model),
        checkpoint_has_head=has_head,
    )
    _MASKED_LM_CACHE[key] = loaded
    return loaded


# ----------------------------------------------------------------------------------------------
# Training a head on WikiText-2 with the encoder frozen.

_WIKITEXT_JOINERS = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))


def detokenize_wikitext(line: str, unk_token: str) -> str:
    """Undo WikiText's tokenisation marks: ``@-@``-style joiners and ``<unk>`` -> the tokenizer's unknown token."""
    for marked, plain in _WIKITEXT_JOINERS:
        line = line.replace(marked, plain)
    return line.replace("<unk>", unk_token).strip()


def wikitext_paragraphs(split: str, unk_token: str) -> list[str]:
    """Article paragraphs of a WikiText-2 split (headings ``= … =`` and blank lines left out)."""
    file = data_path("corpus", "wikitext-2", f"{split}.txt")
    paragraphs = []
    for line in file.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("=") and stripped.endswith("=")):
            continue
        paragraphs.append(detokenize_wikitext(stripped, unk_token))
    return paragraphs


def token_blocks(tokenizer, paragraphs: list[str], block_tokens: int, max_tokens: int) -> torch.Tensor:
    """The first ``max_tokens`` tokens of the paragraphs as one stream, cut into blocks wrapped in [CLS] … [SEP]."""
    stream: list[int] = []
    for paragraph in paragraphs:
        stream.extend(tokenizer(paragraph, add_special_tokens=False, verbose=False)["input_ids"])  # cut into blocks below
        if len(stream) >= max_tokens:
            break
    inner = block_tokens - 2
    count = min(len(stream), max_tokens) // inner
    body = torch.tensor(stream[: count * inner], dtype=torch.long).view(count, inner)
    cls = torch.full((count, 1), tokenizer.cls_token_id, dtype=torch.long)
    sep = torch.full((count, 1), tokenizer.sep_token_id, dtype=torch.long)
    return torch.cat([cls, body, sep], dim=1)


def mask_blocks(blocks: torch.Tensor, tokenizer, seed: int, probability: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard BERT masking: 15% of non-special positions; of those 80% [MASK], 10% random token, 10% kept."""
    generator = torch.Generator().manual_seed(seed)
    inputs = blocks.clone()
    special = (blocks == tokenizer.cls_token_id) | (blocks == tokenizer.sep_token_id) | (blocks == tokenizer.pad_token_id)
    selected = (torch.rand(blocks.shape, generator=generator) < probability) & ~special
    labels = torch.where(selected, blocks, torch.full_like(blocks, IGNORE_LABEL))
    draw = torch.rand(blocks.shape, generator=generator)
    random_tokens = torch.randint(len(tokenizer), blocks.shape, generator=generator)
    inputs[selected & (draw < 0.8)] = tokenizer.mask_token_id
    replace = selected & (draw >= 0.8) & (draw < 0.9)
    inputs[replace] = random_tokens[replace]
    return inputs, labels


@dataclass
class HeadTrainingConfig:
    """Everything that determines a trained head (stored in its metadata and checked on resume)."""

    model: str
    seed: int = 0
    block_tokens: int = 128
    train_tokens: int = 600_000
    valid_tokens: int = 100_000
    epochs: int = 6
    batch_size: int = 256
    learning_rate: float = 2e-3
    weight_decay: float = 0.01
    threads: int = 2

    def as_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)


def masked_features(masked_lm: MaskedLM, split: str, config: HeadTrainingConfig, seed: int, max_tokens: int, show_progress: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder outputs at the masked positions of a fixed masking of a WikiText-2 split, cached on disk."""
    from safetensors.torch import load_file, save_file
    from tqdm.auto import tqdm

    key = hashlib.sha256(
        json.dumps([masked_lm.fingerprint, split, config.block_tokens, max_tokens, seed]).encode()
    ).hexdigest()[:16]
    file = cache_dir("mlm_head") / f"features-{split}-{key}.safetensors"
    if file.exists():
        stored = load_file(str(file))
        return stored["hidden"], stored["labels"]
    tokenizer = masked_lm.tokenizer
    blocks = token_blocks(tokenizer, wikitext_paragraphs(split, tokenizer.unk_token), config.block_tokens, max_tokens)
    inputs, labels = mask_blocks(blocks, tokenizer, seed)
    hidden_parts, label_parts = [], []
    encoder = masked_lm.model.bert
    step = 32
    with torch.inference_mode():
        for start in tqdm(range(0, len(inputs), step), desc=f"encoding WikiText-2 {split}", disable=not show_progress):
            batch_inputs = inputs[start : start + step]
            batch_labels = labels[start : start + step]
            states = encoder(input_ids=batch_inputs, attention_mask=torch.ones_like(batch_inputs)).last_hidden_state
            chosen = batch_labels != IGNORE_LABEL
            hidden_parts.append(states[chosen].clone())
            label_parts.append(batch_labels[chosen].clone())
    hidden = torch.cat(hidden_parts)
    label_tensor = torch.cat(label_parts)
    temporary = file.with_suffix(".tmp")
    save_file({"hidden": hidden.contiguous(), "labels": label_tensor.contiguous()}, str(temporary))
    temporary.replace(file)
    return hidden, label_tensor


class HeadModule(torch.nn.Module):
    """The trainable part of a BERT masked-LM head on top of frozen encoder outputs (decoder tied, frozen)."""

    def __init__(self, tensors: dict[str, torch.Tensor], decoder_weight: torch.Tensor, eps: float, activation: str) -> None:
        super().__init__()
        self.dense_weight = torch.nn.Parameter(tensors["cls.predictions.transform.dense.weight"].clone())
        self.dense_bias = torch.nn.Parameter(tensors["cls.predictions.transform.dense.bias"].clone())
        self.norm_weight = torch.nn.Parameter(tensors["cls.predictions.transform.LayerNorm.weight"].clone())
        self.norm_bias = torch.nn.Parameter(tensors["cls.predictions.transform.LayerNorm.bias"].clone())
        self.output_bias = torch.nn.Parameter(tensors["cls.predictions.bias"].clone())
        self.register_buffer("decoder_weight", decoder_weight.detach().clone())
        self.eps = eps
        from transformers.activations import ACT2FN

        self.activation = ACT2FN[activation]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        transformed = self.activation(torch.nn.functional.linear(hidden, self.dense_weight, self.dense_bias))
        transformed = torch.nn.functional.layer_norm(transformed, (transformed.shape[-1],), self.norm_weight, self.norm_bias, self.eps)
        return torch.nn.functional.linear(transformed, self.decoder_weight, self.output_bias)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {
            "cls.predictions.transform.dense.weight": self.dense_weight.detach().clone().contiguous(),
            "cls.predictions.transform.dense.bias": self.dense_bias.detach().clone().contiguous(),
            "cls.predictions.transform.LayerNorm.weight": self.norm_weight.detach().clone().contiguous(),
            "cls.predictions.transform.LayerNorm.bias": self.norm_bias.detach().clone().contiguous(),
            "cls.predictions.bias": self.output_bias.detach().clone().contiguous(),
        }


def head_accuracy(head: HeadModule, hidden: torch.Tensor, labels: torch.Tensor, batch_size: int = 1024) -> tuple[float, float]:
    """Masked-token top-1 and top-5 accuracy of ``head`` on precomputed encoder outputs."""
    top1 = top5 = 0
    with torch.inference_mode():
        for start in range(0, len(labels), batch_size):
            logits = head(hidden[start : start + batch_size])
            best = logits.topk(5, dim=-1).indices
            target = labels[start : start + batch_size].unsqueeze(1)
            top1 += int((best[:, :1] == target).sum())
            top5 += int((best == target).any(dim=1).sum())
    return top1 / len(labels), top5 / len(labels)


@dataclass
class HeadTrainingResult:
    tensors: dict[str, torch.Tensor]
    metadata: dict[str, str]
    untrained_accuracy: tuple[float, float]
    trained_accuracy: tuple[float, float]
    history: list[dict] = field(default_factory=list)


def _checkpoint_path(checkpoint_dir: Path, config: HeadTrainingConfig) -> Path:
    key = hashlib.sha256(config.as_json().encode()).hexdigest()[:16]
    return checkpoint_dir / f"head-checkpoint-{key}.safetensors"


def train_head(
    config: HeadTrainingConfig,
    checkpoint_dir: Path | None = None,
    command: str = "",
    show_progress: bool = True,
    log=print,
) -> HeadTrainingResult:
    """Train the head transform and output bias of ``config.model`` with its encoder frozen.

    Deterministic for a given config (seeded masking, initialisation and batch order; fixed thread
    count). After every epoch the head, the AdamW state and the history are checkpointed (safetensors)
    so an interrupted run resumes where it stopped and ends with the same head.
    """
    from safetensors import safe_open
    from safetensors.torch import save_file
    from tqdm.auto import tqdm

    torch.set_num_threads(config.threads)
    masked_lm = load_masked_lm(config.model, head="untrained")
    model_config = masked_lm.model.config
    train_hidden, train_labels = masked_features(masked_lm, "train", config, config.seed, config.train_tokens, show_progress)
    valid_hidden, valid_labels = masked_features(masked_lm, "valid", config, config.seed + 1, config.valid_tokens, show_progress)
    log(f"masked positions: train {len(train_labels)}, valid {len(valid_labels)}")

    initial = untrained_head_tensors(model_config.hidden_size, model_config.vocab_size, model_config.initializer_range, config.seed)
    decoder_weight = masked_lm.model.cls.predictions.decoder.weight
    head = HeadModule(initial, decoder_weight, model_config.layer_norm_eps, model_config.hidden_act)
    untrained_accuracy = head_accuracy(head, valid_hidden, valid_labels)
    log(f"untrained head: valid top-1 {untrained_accuracy[0]:.4f}, top-5 {untrained_accuracy[1]:.4f}")

    decayed = [head.dense_weight]
    not_decayed = [head.dense_bias, head.norm_weight, head.norm_bias, head.output_bias]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": config.weight_decay}, {"params": not_decayed, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )
    steps_per_epoch = math.ceil(len(train_labels) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    # Linear warm-up over 5% of the steps, then cosine decay to zero: a stable, standard schedule.
    warmup = max(1, total_steps // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total_steps - warmup))),
    )
    history: list[dict] = []
    start_epoch = 0
    checkpoint = _checkpoint_path(checkpoint_dir, config) if checkpoint_dir else None
    if checkpoint_dir:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
    if checkpoint and checkpoint.exists():
        with safe_open(str(checkpoint), framework="pt") as handle:
            meta = dict(handle.metadata() or {})
            if meta.get("config") != config.as_json():
                raise HeadError(f"checkpoint {checkpoint} was written for another configuration")
            stored = {key: handle.get_tensor(key) for key in handle.keys()}
        with torch.no_grad():
            for name, parameter in head.named_parameters():
                parameter.copy_(stored[f"param.{name}"])
        parameters = dict(head.named_parameters())
        for name, parameter in parameters.items():
            optimizer.state[parameter] = {
                "step": stored[f"adam.{name}.step"].clone(),
                "exp_avg": stored[f"adam.{name}.exp_avg"].clone(),
                "exp_avg_sq": stored[f"adam.{name}.exp_avg_sq"].clone(),
            }
        start_epoch = int(meta["epoch"])
        history = json.loads(meta["history"])
        with warnings.catch_warnings():  # stepping the schedule alone is the point here
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(start_epoch * steps_per_epoch):  # replay the schedule to where it stopped
                scheduler.step()
        log(f"resumed from {checkpoint} after epoch {start_epoch}")

    for epoch in range(start_epoch, config.epochs):
        order = torch.randperm(len(train_labels), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
        running = 0.0
        started = time.perf_counter()
        progress = tqdm(range(steps_per_epoch), desc=f"head epoch {epoch + 1}/{config.epochs}", disable=not show_progress)
        for step in progress:
            chosen = order[step * config.batch_size : (step + 1) * config.batch_size]
            logits = head(train_hidden[chosen])
            loss = torch.nn.functional.cross_entropy(logits, train_labels[chosen])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += float(loss.detach())
            if step % 20 == 0:
                progress.set_postfix(loss=f"{running / (step + 1):.3f}")
        accuracy = head_accuracy(head, valid_hidden, valid_labels)
        history.append(
            {"epoch": epoch + 1, "train_loss": running / steps_per_epoch, "valid_top1": accuracy[0], "valid_top5": accuracy[1], "seconds": time.perf_counter() - started}
        )
        if checkpoint:
            payload = {f"param.{name}": parameter.detach().clone().contiguous() for name, parameter in head.named_parameters()}
            for name, _ in head.named_parameters():
                adam = optimizer.state[dict(head.named_parameters())[name]]
                payload[f"adam.{name}.step"] = adam["step"].detach().clone().reshape(())
                payload[f"adam.{name}.exp_avg"] = adam["exp_avg"].detach().clone().contiguous()
                payload[f"adam.{name}.exp_avg_sq"] = adam["exp_avg_sq"].detach().clone().contiguous()
            temporary = checkpoint.with_suffix(".tmp")
            save_file(payload, str(temporary), metadata={"config": config.as_json(), "epoch": str(epoch + 1), "history": json.dumps(history)})
            temporary.replace(checkpoint)
        log(f"epoch {epoch + 1}: train loss {running / steps_per_epoch:.4f}, valid top-1 {accuracy[0]:.4f}, top-5 {accuracy[1]:.4f}")

    trained_accuracy = head_accuracy(head, valid_hidden, valid_labels)
    metadata = {
        "model": config.model,
        "model_fingerprint": masked_lm.fingerprint,
        "config": config.as_json(),
        "command": command,
        "valid_masked_positions": str(len(valid_labels)),
        "train_masked_positions": str(len(train_labels)),
        "untrained_top1": f"{untrained_accuracy[0]:.4f}",
        "untrained_top5": f"{untrained_accuracy[1]:.4f}",
        "trained_top1": f"{trained_accuracy[0]:.4f}",
        "trained_top5": f"{trained_accuracy[1]:.4f}",
        "torch": torch.__version__,
    }
    return HeadTrainingResult(head.tensors(), metadata, untrained_accuracy, trained_accuracy, history)


def save_head(result: HeadTrainingResult, out: Path) -> None:
    """Write the head (safetensors, metadata inside) and a JSON sidecar saying how it was made."""
    from safetensors.torch import save

    atomic_write_bytes(out, save(result.tensors, metadata=result.metadata))
    sidecar = dict(result.metadata)
    sidecar["config"] = json.loads(result.metadata["config"])
    sidecar["history"] = result.history
    sidecar["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(sidecar, indent=2, sort_keys=True) + "\n").encode())


def default_head_filename(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_").lower() + "_mlm_head.safetensors"
