"""Learned token weights for token-level matching (token-matching paper §3, "Token Weighting").

One trainable weight per vocabulary token, learned with the unsupervised SimCSE objective (Gao et al.,
2021): every sentence of a batch is encoded twice with dropout active, the two views are positives and
the other sentences of the batch are in-batch negatives, InfoNCE with temperature 0.05. The sentence
embedding is the weight-averaged last-layer token vectors ``Σ w_t t / Σ w_t`` instead of [CLS].

Choices where the paper is silent (documented in docs/matching.md):

* **Frozen encoder.** On CPU only the weights are trained; the encoder runs under ``no_grad`` in train
  mode, so dropout still supplies the two noisy views. The weights therefore fit the unchanged encoder
  that matching uses at inference.
* **Positivity.** ``w = softplus(θ)``, initialised at w = 1 (uniform average), so weights stay > 0 and
  Eq. 2 is always a proper weighted average. Tokens never seen in training keep w = 1.
* **Special tokens** ([CLS]/[SEP]/padding) are left out of the average, as matching leaves them out.
* **Inputs** are WikiText-2 train sentences (pysbd), cut to ``max_tokens`` tokens (SimCSE used 32).
* **Determinism.** The sentence order is a seeded permutation; before step ``k`` the dropout generator is
  seeded with ``seed + k``, so a resumed run gives the same weights as an uninterrupted one.
* **Resumable.** Every ``checkpoint_every`` steps θ, the Adam state and the step are written
  atomically as safetensors in the cache; a rerun with the same settings continues from there.

The weight file's format, and where ``match:MODEL,weights=learned`` looks for it, belong to the reader,
:mod:`embedlab.matching.method` (``write_weights``, ``read_weights``, ``learned_weights_path``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save as save_numpy

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.errors import InputError
from embedlab.matching.method import write_weights
from embedlab.models.loading import LoadedModel, load_model
from embedlab.runtime.cache.atomic import atomic_write_bytes
from embedlab.runtime.progress import progress_bar
from embedlab.runtime.settings import REPO_ROOT, cache_dir
from embedlab.training.token_weight_settings import TEMPERATURE, TrainingConfig

_INITIAL_THETA = math.log(math.e - 1.0)  # softplus(θ0) = 1


def weights_from_theta(theta: torch.Tensor) -> torch.Tensor:
    """w = softplus(θ): every weight stays positive, so Eq. 2 is always a proper weighted average."""
    return torch.nn.functional.softplus(theta)


class _TrainMode:
    """Dropout on for the SimCSE noise; the shared model goes back to eval mode afterwards."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def __enter__(self) -> None:
        self.model.train()

    def __exit__(self, *exc: object) -> None:
        self.model.eval()


def _batch_inputs(loaded: LoadedModel, sentences: Sequence[str], max_tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, attention mask, and the mask of non-special tokens that take part in the average."""
    encoded = loaded.tokenizer(
        list(sentences), truncation=True, max_length=max_tokens, padding=True, return_tensors="pt", return_special_tokens_mask=True
    )
    attention = encoded["attention_mask"]
    content = attention.bool() & ~encoded["special_tokens_mask"].bool()
    # a sentence with no content token (cannot happen for min_chars > 0, but be safe) averages all its tokens
    empty = ~content.any(dim=1)
    content[empty] = attention[empty].bool()
    return encoded["input_ids"], attention, content


def simcse_loss(
    loaded: LoadedModel,
    theta: torch.Tensor,
    sentences: Sequence[str],
    dropout_seed: int,
    max_tokens: int = 32,
    temperature: float = TEMPERATURE,
) -> torch.Tensor:
    """Unsupervised SimCSE loss of one batch under token weights softplus(θ); gradient flows to θ only."""
    input_ids, attention, content = _batch_inputs(loaded, sentences, max_tokens)
    device = loaded.device
    input_ids, attention, content = input_ids.to(device), attention.to(device), content.to(device)
    # a private generator state fixes both dropout masks of this batch without touching the caller's
    with torch.random.fork_rng(devices=[]), _TrainMode(loaded.model), torch.no_grad():
        torch.manual_seed(dropout_seed)
        doubled_ids = torch.cat([input_ids, input_ids])
        doubled_attention = torch.cat([attention, attention])
        hidden = loaded.model(input_ids=doubled_ids, attention_mask=doubled_attention).last_hidden_state.float()
    weights = weights_from_theta(theta)[doubled_ids] * torch.cat([content, content]).float()
    embeddings = (weights.unsqueeze(-1) * hidden).sum(1) / weights.sum(1, keepdim=True).clamp_min(1e-12)
    embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
    count = input_ids.shape[0]
    first, second = embeddings[:count], embeddings[count:]
    logits = first @ second.T / temperature
    return torch.nn.functional.cross_entropy(logits, torch.arange(count, device=device))


def training_sentences(loaded: LoadedModel, min_chars: int) -> list[str]:
    """WikiText-2 train sentences of at least ``min_chars`` characters, ``<unk>`` as the model writes it."""
    return wikitext2_sentences("train", min_chars=min_chars, unk_token=loaded.tokenizer.unk_token or "<unk>")


def batch_order(count: int, steps: int, batch_size: int, seed: int) -> np.ndarray:
    """(steps, batch_size) sentence indices: seeded permutations, one per pass over the corpus."""
    if count < batch_size:
        raise InputError(f"need at least batch_size={batch_size} training sentences, got {count}")
    needed = steps * batch_size
    rng = np.random.default_rng(seed)
    # the k-th permutation is the same whatever ``steps`` is, so runs of different lengths share a prefix
    order = np.concatenate([rng.permutation(count) for _ in range(needed // count + 1)])
    return order[:needed].reshape(steps, batch_size)


def _checkpoint_path(out: Path, config: TrainingConfig) -> Path:
    """Checkpoints live in the cache (not beside a packaged output), keyed by output name and settings."""
    return cache_dir("token_weight_checkpoints") / f"{out.stem}-{config.key()}.safetensors"


def _save_checkpoint(path: Path, theta: torch.Tensor, optimizer: torch.optim.Adam, step: int) -> None:
    state = optimizer.state.get(theta, {})
    tensors = {"theta": theta.detach().cpu().numpy()}
    if state:
        tensors["exp_avg"] = state["exp_avg"].cpu().numpy()
        tensors["exp_avg_sq"] = state["exp_avg_sq"].cpu().numpy()
        tensors["adam_step"] = np.array([float(state["step"])], dtype=np.float64)
    atomic_write_bytes(path, save_numpy(tensors, metadata={"step": str(step)}))


def _load_checkpoint(path: Path, theta: torch.Tensor, optimizer: torch.optim.Adam) -> int:
    with safe_open(str(path), framework="np") as handle:
        step = int(handle.metadata()["step"])
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    with torch.no_grad():
        theta.copy_(torch.from_numpy(tensors["theta"]))
    if "exp_avg" in tensors:
        optimizer.state[theta] = {
            "step": torch.tensor(float(tensors["adam_step"][0])),
            "exp_avg": torch.from_numpy(tensors["exp_avg"]).to(theta.device),
            "exp_avg_sq": torch.from_numpy(tensors["exp_avg_sq"]).to(theta.device),
        }
    return step


def train_token_weights(
    config: TrainingConfig,
    out: Path | str,
    sentences: Sequence[str] | None = None,
    show_progress_bar: bool | None = None,
    resume: bool = True,
) -> np.ndarray:
    """Train and write the token weights (``out``, safetensors ``weights``) and ``out``'s JSON record.

    ``sentences`` defaults to WikiText-2 train sentences of at least ``config.min_chars`` characters.
    Returns the float32 weights, one per vocabulary id.
    """
    out = Path(out)
    loaded = load_model(config.model)
    corpus = list(sentences) if sentences is not None else training_sentences(loaded, config.min_chars)
    order = batch_order(len(corpus), config.steps, config.batch_size, config.seed)
    vocab_size = len(loaded.tokenizer)
    theta = torch.full((vocab_size,), _INITIAL_THETA, dtype=torch.float32, device=loaded.device, requires_grad=True)
    optimizer = torch.optim.Adam([theta], lr=config.learning_rate)
    checkpoint = _checkpoint_path(out, config)
    start = _load_checkpoint(checkpoint, theta, optimizer) if resume and checkpoint.exists() else 0
    if start > config.steps:  # a checkpoint from a longer run lies past this run's end: start afresh
        theta.data.fill_(_INITIAL_THETA)
        optimizer = torch.optim.Adam([theta], lr=config.learning_rate)
        start = 0
    losses: list[float] = []
    progress = progress_bar(range(start, config.steps), desc="token weights", show=show_progress_bar, initial=start, total=config.steps)
    for step in progress:
        batch = [corpus[index] for index in order[step]]
        loss = simcse_loss(loaded, theta, batch, config.seed * 1_000_003 + step, config.max_tokens, config.temperature)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        progress.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
        if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
            _save_checkpoint(checkpoint, theta, optimizer, step + 1)
    weights = weights_from_theta(theta.detach()).cpu().numpy().astype(np.float32)
    record = {
        "command": reproducing_command(config, out),
        "config": asdict(config),
        "model_fingerprint": loaded.transformer_fingerprint or loaded.fingerprint,
        "vocab_size": vocab_size,
        "sentences": len(corpus),
        "resumed_from_step": start,
        "losses_this_run_first_last_20": [float(np.mean(losses[:20])) if losses else None, float(np.mean(losses[-20:])) if losses else None],
        "parameterisation": "w = softplus(theta), theta0 = log(e - 1) so w0 = 1",
    }
    write_weights(out, weights, loaded.transformer_fingerprint or loaded.fingerprint, record)
    return weights


def reproducing_command(config: TrainingConfig, out: Path) -> str:
    """The CLI command that trains these weights into ``out`` (relative to the repository when inside it)."""
    shown = out.resolve().relative_to(REPO_ROOT) if out.resolve().is_relative_to(REPO_ROOT) else out
    return (
        f"HF_HUB_OFFLINE=1 nice -n 10 embedlab train-token-weights {config.model} --steps {config.steps} --batch-size {config.batch_size} "
        f"--learning-rate {config.learning_rate} --seed {config.seed} --max-tokens {config.max_tokens} --min-chars {config.min_chars} "
        f"--out {shown}"
    )


def mean_loss(loaded: LoadedModel, weights: np.ndarray, batches: Sequence[Sequence[str]], seed: int = 0, max_tokens: int = 32) -> float:
    """Average SimCSE loss of fixed batches (fixed dropout seeds) under given weights: for comparisons."""
    theta = torch.from_numpy(np.log(np.expm1(np.maximum(weights, 1e-6))).astype(np.float32)).to(loaded.device)
    with torch.no_grad():
        return float(np.mean([float(simcse_loss(loaded, theta, batch, seed + index, max_tokens)) for index, batch in enumerate(batches)]))
