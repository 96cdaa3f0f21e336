"""Train a masked-LM head for an encoder shipped without one (neural-embeddings paper, Appendix A).

Neural embeddings micro-tune vectors of a model's masked-LM head; all-MiniLM-L6-v2 ships without one, so
embedlab trains it (``embedlab mlm-head train``) and ships the result (``embedlab/resources``), which
:func:`embedlab.neural.head.load_masked_lm` installs by model fingerprint.

Training: the head transform (dense + bias, LayerNorm) and the output bias, with the encoder frozen and
the decoder tied to the frozen word embeddings, on WikiText-2 train (read by :mod:`embedlab.data.wikitext`)
with standard BERT masking (15 %; 80/10/10), seeded and resumable; masked-token top-1/top-5 accuracy is
reported on WikiText-2 valid. Because the encoder is frozen, it runs once over one fixed masking of the
training tokens and only the hidden states at the masked positions are kept (in the runtime's
``ArrayStore("mlm_head")``); every epoch then trains the head on those.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from embedlab.data.wikitext import wikitext2_paragraphs
from embedlab.neural.head import HeadError, IGNORE_LABEL, MaskedLM, load_masked_lm, untrained_head_tensors
from embedlab.runtime.cache.arrays import ArrayStore, sorted_header
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.progress import progress_bar
from embedlab.training.mlm_head_settings import HeadTrainingConfig

HEAD_TENSOR_FIELDS = {  # the head file's tensor names -> HeadModule's parameter names
    "cls.predictions.transform.dense.weight": "dense_weight",
    "cls.predictions.transform.dense.bias": "dense_bias",
    "cls.predictions.transform.LayerNorm.weight": "norm_weight",
    "cls.predictions.transform.LayerNorm.bias": "norm_bias",
    "cls.predictions.bias": "output_bias",
}


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


def masked_features(masked_lm: MaskedLM, split: str, config: HeadTrainingConfig, seed: int, max_tokens: int, show_progress: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder outputs at the masked positions of a fixed masking of a WikiText-2 split, cached on disk."""
    store = ArrayStore("mlm_head")
    key = cache_key("masked-features", masked_lm.fingerprint, split, config.block_tokens, max_tokens, seed)
    hidden, labels = store.load(f"{key}-hidden"), store.load(f"{key}-labels")
    if hidden is not None and labels is not None:
        return torch.from_numpy(hidden.copy()), torch.from_numpy(labels.copy())
    hidden_tensor, label_tensor = _encode_masked(masked_lm, split, config.block_tokens, seed, max_tokens, show_progress)
    store.save(f"{key}-hidden", hidden_tensor.numpy())
    store.save(f"{key}-labels", label_tensor.numpy())
    return hidden_tensor, label_tensor


def _encode_masked(masked_lm: MaskedLM, split: str, block_tokens: int, seed: int, max_tokens: int, show_progress: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the frozen encoder over one seeded masking of ``split``; keep the states at the masked positions."""

    tokenizer = masked_lm.tokenizer
    blocks = token_blocks(tokenizer, wikitext2_paragraphs(split, tokenizer.unk_token), block_tokens, max_tokens)
    inputs, labels = mask_blocks(blocks, tokenizer, seed)
    hidden_parts, label_parts = [], []
    encoder = masked_lm.model.bert
    step = 32
    with torch.inference_mode():
        for start in progress_bar(range(0, len(inputs), step), desc=f"encoding WikiText-2 {split}", show=show_progress):
            batch_inputs = inputs[start : start + step]
            batch_labels = labels[start : start + step]
            states = encoder(input_ids=batch_inputs, attention_mask=torch.ones_like(batch_inputs)).last_hidden_state
            chosen = batch_labels != IGNORE_LABEL
            hidden_parts.append(states[chosen].clone())
            label_parts.append(batch_labels[chosen].clone())
    return torch.cat(hidden_parts).contiguous(), torch.cat(label_parts).contiguous()


class HeadModule(torch.nn.Module):
    """The trainable part of a BERT masked-LM head on top of frozen encoder outputs (decoder tied, frozen)."""

    def __init__(self, tensors: dict[str, torch.Tensor], decoder_weight: torch.Tensor, eps: float, activation: str) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        for tensor_name, field_name in HEAD_TENSOR_FIELDS.items():
            setattr(self, field_name, torch.nn.Parameter(tensors[tensor_name].clone()))
        self.register_buffer("decoder_weight", decoder_weight.detach().clone())
        self.eps = eps
        self.activation = ACT2FN[activation]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        transformed = self.activation(torch.nn.functional.linear(hidden, self.dense_weight, self.dense_bias))
        transformed = torch.nn.functional.layer_norm(transformed, (transformed.shape[-1],), self.norm_weight, self.norm_bias, self.eps)
        return torch.nn.functional.linear(transformed, self.decoder_weight, self.output_bias)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The head as a head file stores it (``cls.predictions.*`` names)."""
        return {tensor_name: getattr(self, field_name).detach().clone().contiguous() for tensor_name, field_name in HEAD_TENSOR_FIELDS.items()}


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
    """A trained head, the metadata its file records, and how accuracy moved during training."""

    tensors: dict[str, torch.Tensor]
    metadata: dict[str, str]
    untrained_accuracy: tuple[float, float]
    trained_accuracy: tuple[float, float]
    history: list[dict] = field(default_factory=list)


def _checkpoint_path(checkpoint_dir: Path, config: HeadTrainingConfig) -> Path:
    key = hashlib.sha256(config.as_json().encode()).hexdigest()[:16]
    return checkpoint_dir / f"head-checkpoint-{key}.safetensors"


def _write_checkpoint(path: Path, head: HeadModule, optimizer: torch.optim.AdamW, config: HeadTrainingConfig, epoch: int, history: list[dict]) -> None:
    """Head, AdamW state and history after ``epoch`` epochs, written atomically (safetensors)."""
    from safetensors.torch import save

    payload = {}
    for name, parameter in head.named_parameters():
        adam = optimizer.state[parameter]
        payload[f"param.{name}"] = parameter.detach().clone().contiguous()
        payload[f"adam.{name}.step"] = adam["step"].detach().clone().reshape(())
        payload[f"adam.{name}.exp_avg"] = adam["exp_avg"].detach().clone().contiguous()
        payload[f"adam.{name}.exp_avg_sq"] = adam["exp_avg_sq"].detach().clone().contiguous()
    metadata = {"config": config.as_json(), "epoch": str(epoch), "history": json.dumps(history)}
    atomic_write_bytes(path, sorted_header(save(payload, metadata=metadata)))


def _restore_checkpoint(path: Path, head: HeadModule, optimizer: torch.optim.AdamW, config: HeadTrainingConfig) -> tuple[int, list[dict]]:
    """Load head and AdamW state from ``path``; returns (epochs done, history)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        meta = dict(handle.metadata() or {})
        if meta.get("config") != config.as_json():
            raise HeadError(f"checkpoint {path} was written for another configuration")
        stored = {key: handle.get_tensor(key) for key in handle.keys()}
    with torch.no_grad():
        for name, parameter in head.named_parameters():
            parameter.copy_(stored[f"param.{name}"])
    for name, parameter in head.named_parameters():
        optimizer.state[parameter] = {
            "step": stored[f"adam.{name}.step"].clone(),
            "exp_avg": stored[f"adam.{name}.exp_avg"].clone(),
            "exp_avg_sq": stored[f"adam.{name}.exp_avg_sq"].clone(),
        }
    return int(meta["epoch"]), json.loads(meta["history"])


def train_head(
    config: HeadTrainingConfig,
    checkpoint_dir: Path | None = None,
    command: str = "",
    show_progress: bool | None = None,
    log: Callable[[str], None] = print,
) -> HeadTrainingResult:
    """Train the head transform and output bias of ``config.model`` with its encoder frozen.

    Deterministic for a given config (seeded masking, initialisation and batch order; fixed thread
    count). After every epoch the head, the AdamW state and the history are checkpointed (safetensors)
    so an interrupted run resumes where it stopped and ends with the same head. ``show_progress``: None
    draws the bars when stderr is a terminal (see :func:`embedlab.runtime.progress.show_progress`).
    """
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

    steps_per_epoch = math.ceil(len(train_labels) / config.batch_size)
    optimizer, scheduler = _optimizer_and_schedule(head, config, steps_per_epoch)
    checkpoint, start_epoch, history = _resume(checkpoint_dir, config, head, optimizer, scheduler, steps_per_epoch, log)
    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        train_loss = _train_epoch(head, optimizer, scheduler, train_hidden, train_labels, config, epoch, show_progress)
        accuracy = head_accuracy(head, valid_hidden, valid_labels)
        history.append(
            {"epoch": epoch + 1, "train_loss": train_loss, "valid_top1": accuracy[0], "valid_top5": accuracy[1], "seconds": time.perf_counter() - started}
        )
        if checkpoint:
            _write_checkpoint(checkpoint, head, optimizer, config, epoch + 1, history)
        log(f"epoch {epoch + 1}: train loss {train_loss:.4f}, valid top-1 {accuracy[0]:.4f}, top-5 {accuracy[1]:.4f}")

    trained_accuracy = head_accuracy(head, valid_hidden, valid_labels)
    metadata = {
        "model": config.model,
        "model_fingerprint": masked_lm.transformer_fingerprint or masked_lm.fingerprint,
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


def _optimizer_and_schedule(head: HeadModule, config: HeadTrainingConfig, steps_per_epoch: int,
                            ) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (weight decay on the dense weight only) and its learning-rate schedule over every epoch."""
    decayed = [head.dense_weight]
    not_decayed = [head.dense_bias, head.norm_weight, head.norm_bias, head.output_bias]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": config.weight_decay}, {"params": not_decayed, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )
    total_steps = steps_per_epoch * config.epochs
    # Linear warm-up over 5% of the steps, then cosine decay to zero: a stable, standard schedule.
    warmup = max(1, total_steps // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total_steps - warmup))),
    )
    return optimizer, scheduler


def _resume(checkpoint_dir: Path | None, config: HeadTrainingConfig, head: HeadModule, optimizer: torch.optim.AdamW,
            scheduler: torch.optim.lr_scheduler.LambdaLR, steps_per_epoch: int, log: Callable[[str], None],
            ) -> tuple[Path | None, int, list[dict]]:
    """(checkpoint path or None, first epoch to run, history so far): a checkpoint found is restored into
    ``head`` and ``optimizer``, and the schedule replayed to where it stopped."""
    history: list[dict] = []
    start_epoch = 0
    checkpoint = _checkpoint_path(checkpoint_dir, config) if checkpoint_dir else None
    if checkpoint_dir:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
    if checkpoint and checkpoint.exists():
        start_epoch, history = _restore_checkpoint(checkpoint, head, optimizer, config)
        with warnings.catch_warnings():  # stepping the schedule alone is the point here
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(start_epoch * steps_per_epoch):  # replay the schedule to where it stopped
                scheduler.step()
        log(f"resumed from {checkpoint} after epoch {start_epoch}")
    return checkpoint, start_epoch, history


def _train_epoch(head: HeadModule, optimizer: torch.optim.AdamW, scheduler: torch.optim.lr_scheduler.LambdaLR,
                 train_hidden: torch.Tensor, train_labels: torch.Tensor, config: HeadTrainingConfig, epoch: int,
                 show_progress: bool | None) -> float:
    """One epoch over the training positions in this epoch's seeded order; returns the mean training loss."""
    steps_per_epoch = math.ceil(len(train_labels) / config.batch_size)
    order = torch.randperm(len(train_labels), generator=torch.Generator().manual_seed(config.seed * 1000 + epoch))
    running = 0.0
    progress = progress_bar(range(steps_per_epoch), desc=f"head epoch {epoch + 1}/{config.epochs}", show=show_progress)
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
    return running / steps_per_epoch


def save_head(result: HeadTrainingResult, out: Path) -> None:
    """Write the head (safetensors, metadata inside) and a JSON sidecar saying how it was made."""
    from safetensors.torch import save

    atomic_write_bytes(out, sorted_header(save(result.tensors, metadata=result.metadata)))
    sidecar = dict(result.metadata)
    sidecar["config"] = json.loads(result.metadata["config"])
    sidecar["history"] = result.history
    sidecar["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    atomic_write_bytes(out.with_suffix(".json"), (json.dumps(sidecar, indent=2, sort_keys=True) + "\n").encode())


def default_head_filename(model: str) -> str:
    """``minilm`` -> ``minilm_mlm_head.safetensors`` (the name the shipped heads follow)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_").lower() + "_mlm_head.safetensors"
