"""Neural embeddings: micro-tune a few 1-D weights on one text and embed the weight change.

Implements the neural-embeddings paper: §2 and Eq. 1 (embedding = each tuned layer's weight change,
normalised, concatenated, normalised again), Appendix A Fig. 8 (long texts as sentence-packed chunks;
the inputs of all chunks form one micro-tuning set), Fig. 9/10 (periodic masking blueprints with all
shifts), Appendix B (lower layers run once, their hidden states reused across epochs), Appendix C
(ablations: one tuned layer or one blueprint removed) and Appendix G (hidden-layer variants).

Two exact paths compute the same embeddings:

* :func:`micro_tune_reference` — one text at a time, the real ``BertForMaskedLM`` modules, logits at
  every position, ``torch.optim.AdamW``; accepts any 1-D parameter names. It is the reference.
* :func:`micro_tune_batched` — many texts at once. The tuned vectors (last block's ``output.dense.bias``
  / ``output.LayerNorm.*`` and the head's ``transform.dense.bias`` / ``transform.LayerNorm.*``) all act
  position-wise *after* everything that is frozen, so the frozen part is computed once, only at the
  masked positions (the only ones carrying a loss); each text owns a row of every tuned vector, and
  :class:`BatchedAdamW` updates all rows exactly as ``torch.optim.AdamW`` would update each text's own
  parameters. Each text's loss is its own mean over its masked tokens, so texts do not interact.

Micro-tuning details (following the reference implementation where the paper is silent):
special tokens stay outside the periodic pattern (the pattern of Fig. 10 runs over the chunk's text
tokens; ``[CLS]``/``[SEP]`` are added around each input, never masked, never labelled); rows with no
masked token carry no loss and are left out (this changes nothing, the loss is a mean over masked
tokens); all inputs of a text form one batch per epoch (the paper's "single batch of no more than 12
inputs"; for multi-chunk texts still one batch, so the order/shuffle of inputs cannot matter); the model
runs in eval mode (no dropout), so micro-tuning is deterministic; AdamW with torch defaults except lr.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from embedlab.neural.head import IGNORE_LABEL, MaskedLM, load_masked_lm
from embedlab.data.sentences import chunk_token_ids

BLUEPRINTS: tuple[tuple[int, int], ...] = ((2, 1), (1, 1), (1, 2), (1, 3))
HEAD_VECTORS = (
    "cls.predictions.transform.LayerNorm.weight",  # L0
    "cls.predictions.transform.LayerNorm.bias",  # L1
    "cls.predictions.transform.dense.bias",  # L2
)
VARIANTS = ("neural", "cls", "avg", "cls-tuned", "avg-tuned", "cls-diff", "avg-diff")
UNTUNED_VARIANTS = ("cls", "avg")  # the original model's outputs: no micro-tuning needed


def block_vectors(num_layers: int) -> tuple[str, str, str]:
    """The last transformer block's output LayerNorm weight/bias and output dense bias (Appendix A, G)."""
    prefix = f"bert.encoder.layer.{num_layers - 1}.output."
    return (prefix + "LayerNorm.weight", prefix + "LayerNorm.bias", prefix + "dense.bias")


def tunes_last_block(names: Sequence[str], num_layers: int) -> bool:
    """Whether any of ``names`` is one of the last block's output vectors (what the tuned variants read)."""
    block = block_vectors(num_layers)
    return any(name in block for name in names)


def resolve_parameter_names(spec: str, num_layers: int) -> list[str]:
    """Parameter names from a preset (``head``, ``block``, ``block-dense-bias``) or ``;``-separated names.

    In explicit names ``layer.last`` stands for the model's last block (BERT-base's "block 11").
    """
    presets = {
        "head": list(HEAD_VECTORS),
        "block": list(block_vectors(num_layers)),
        "block-dense-bias": [block_vectors(num_layers)[2]],  # Appendix G's neural-1
    }
    if spec in presets:
        return presets[spec]
    names = [name.strip().replace("layer.last.", f"layer.{num_layers - 1}.") for name in spec.split(";") if name.strip()]
    if not names:
        raise ValueError(f"neural: params={spec!r} names no parameter")
    return names


# ----------------------------------------------------------------------------------------------
# Inputs (Appendix A, Fig. 9 and 10).


def blueprint_rows(tokens: Sequence[int], blueprints: Sequence[tuple[int, int]], mask_token_id: int) -> list[tuple[list[int], list[int]]]:
    """Fig. 10 exactly: for each blueprint (k, m), P = k + m, every shift s < min(P, len): mask where (j - s) % P >= k.

    Returns (inputs, labels) pairs over the chunk's text tokens; labels are the original token at masked
    positions and ``IGNORE_LABEL`` elsewhere. Rows that mask nothing are kept here (Fig. 10 keeps them).
    """
    rows = []
    for keep, masked in blueprints:
        if keep < 0 or masked < 1:
            raise ValueError(f"masking blueprint {(keep, masked)}: need k >= 0 kept and m >= 1 masked tokens")
        period = keep + masked
        for shift in range(min(period, len(tokens))):
            inputs = list(tokens)
            labels = [IGNORE_LABEL] * len(tokens)
            for position in range(len(tokens)):
                if (position - shift) % period >= keep:
                    labels[position] = inputs[position]
                    inputs[position] = mask_token_id
            rows.append((inputs, labels))
    return rows


@dataclass
class TextInputs:
    """The micro-tuning set of one text: padded rows with [CLS]/[SEP], labels only at masked tokens."""

    input_ids: torch.Tensor  # (rows, length)
    attention_mask: torch.Tensor  # (rows, length)
    labels: torch.Tensor  # (rows, length), IGNORE_LABEL where nothing is predicted
    chunks: list[list[int]]  # the text's chunks (token ids, no special tokens)


def text_inputs(text: str, tokenizer, max_length: int, blueprints: Sequence[tuple[int, int]], where: str) -> TextInputs:
    """All micro-tuning inputs of ``text``: Fig. 10 rows of every sentence-packed chunk (Fig. 8)."""
    def tokenize(piece: str) -> list[int]:
        # verbose=False: long texts are chunked here, so the tokenizer's length warning does not apply
        return tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"]

    if not isinstance(text, str):
        raise TypeError(f"{where}: expected a string, got {type(text).__name__}")
    chunks = [chunk for chunk in chunk_token_ids(text, tokenize, max_length - 2) if chunk]
    if not chunks:
        raise ValueError(f"{where}: the text is empty (no tokens), a neural embedding needs at least one token")
    rows: list[tuple[list[int], list[int]]] = []
    for chunk in chunks:
        chunk_rows = [row for row in blueprint_rows(chunk, blueprints, tokenizer.mask_token_id) if any(l != IGNORE_LABEL for l in row[1])]
        if not chunk_rows:
            # Only a one-token chunk masks nothing under Fig. 10 (shift 0 keeps position 0); use the full
            # period of shifts there so the chunk still has something to learn.
            chunk_rows = [
                row
                for keep, masked in blueprints
                for row in _shifted_rows(chunk, keep, masked, tokenizer.mask_token_id)
                if any(l != IGNORE_LABEL for l in row[1])
            ]
        rows.extend(chunk_rows)
    if not rows:
        raise ValueError(f"{where}: no masking blueprint masks any token of this text")
    length = max(len(inputs) for inputs, _ in rows) + 2
    count = len(rows)
    input_ids = torch.full((count, length), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((count, length), dtype=torch.long)
    labels = torch.full((count, length), IGNORE_LABEL, dtype=torch.long)
    for index, (inputs, row_labels) in enumerate(rows):
        size = len(inputs) + 2
        input_ids[index, :size] = torch.tensor([tokenizer.cls_token_id, *inputs, tokenizer.sep_token_id])
        attention[index, :size] = 1
        labels[index, 1 : size - 1] = torch.tensor(row_labels)
    return TextInputs(input_ids, attention, labels, chunks)


def _shifted_rows(tokens: Sequence[int], keep: int, masked: int, mask_token_id: int) -> list[tuple[list[int], list[int]]]:
    period = keep + masked
    rows = []
    for shift in range(period):
        labels = [token if (position - shift) % period >= keep else IGNORE_LABEL for position, token in enumerate(tokens)]
        inputs = [mask_token_id if label != IGNORE_LABEL else token for token, label in zip(tokens, labels)]
        rows.append((inputs, labels))
    return rows


def plain_inputs(chunks: list[list[int]], tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """The unmasked chunks with [CLS]/[SEP], padded: the inputs of the hidden-layer variants (Appendix G)."""
    length = max(len(chunk) for chunk in chunks) + 2
    input_ids = torch.full((len(chunks), length), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(chunks), length), dtype=torch.long)
    for index, chunk in enumerate(chunks):
        input_ids[index, : len(chunk) + 2] = torch.tensor([tokenizer.cls_token_id, *chunk, tokenizer.sep_token_id])
        attention[index, : len(chunk) + 2] = 1
    return input_ids, attention


# ----------------------------------------------------------------------------------------------
# Options and the embedding of weight changes (Eq. 1).


@dataclass(frozen=True)
class NeuralOptions:
    """What determines a neural embedding besides the model, its head and the text."""

    params: tuple[str, ...]
    epochs: int = 10
    learning_rate: float = 1e-2
    blueprints: tuple[tuple[int, int], ...] = BLUEPRINTS
    variant: str = "neural"
    seed: int = 0

    def key(self) -> dict:
        return {
            "params": list(self.params),
            "epochs": self.epochs,
            "lr": self.learning_rate,
            "blueprints": [list(b) for b in self.blueprints],
            "variant": self.variant,
            "seed": self.seed,
        }


def weight_change_embedding(changes: Sequence[torch.Tensor], where: str = "") -> torch.Tensor:
    """Eq. 1: each layer's weight change normalised, concatenated, and the result normalised."""
    parts = []
    for change in changes:
        norm = change.norm()
        if not torch.isfinite(norm) or float(norm) == 0.0:
            raise ValueError(f"{where}: micro-tuning left a tuned layer unchanged (norm {float(norm)}); cannot normalise")
        parts.append(change / norm)
    joined = torch.cat(parts)
    return joined / joined.norm()


def text_seed(seed: int, text: str) -> int:
    """A per-text seed: a text's micro-tuning never depends on its neighbours or on batch order."""
    return (seed * 1_000_003 + zlib.crc32(text.encode("utf-8"))) % (2**31 - 1)


# ----------------------------------------------------------------------------------------------
# Reference path: one text at a time with the real modules and torch.optim.AdamW.


def _lowest_tuned_block(names: Sequence[str], num_layers: int) -> int:
    """Index of the lowest transformer block holding a tuned parameter (num_layers: head only; -1: embeddings)."""
    lowest = num_layers
    for name in names:
        if name.startswith("bert.embeddings."):
            return -1
        if name.startswith("bert.encoder.layer."):
            lowest = min(lowest, int(name.split(".")[3]))
        elif not name.startswith("cls."):
            raise ValueError(f"neural: cannot micro-tune parameter {name!r} (not in the encoder, its embeddings or the head)")
    return lowest


def _check_parameters(model: torch.nn.Module, names: Sequence[str]) -> dict[str, torch.nn.Parameter]:
    available = dict(model.named_parameters())
    chosen = {}
    for name in names:
        if name not in available:
            close = [candidate for candidate in available if candidate.endswith(name.split(".")[-1])][:6]
            raise ValueError(f"neural: model has no parameter {name!r} (parameters ending alike: {close})")
        if available[name].dim() != 1:
            raise ValueError(f"neural: parameter {name!r} has shape {tuple(available[name].shape)}; only 1-D parameters are micro-tuned")
        chosen[name] = available[name]
    if len(set(names)) != len(names):
        raise ValueError(f"neural: parameter names repeat: {list(names)}")
    return chosen


def micro_tune_reference(masked_lm: MaskedLM, inputs: TextInputs, options: NeuralOptions, seed: int) -> list[torch.Tensor]:
    """Micro-tune one text with the real modules and ``torch.optim.AdamW``; returns each layer's weight change.

    Frozen blocks below the lowest tuned one run once (Appendix B); every epoch runs the remaining
    blocks and the head over all positions (logits everywhere, as the reference implementation does).
    The tuned parameters are restored to their original values afterwards.
    """
    model = masked_lm.model
    parameters = _check_parameters(model, options.params)
    originals = {name: parameter.detach().clone() for name, parameter in parameters.items()}
    lowest = _lowest_tuned_block(options.params, masked_lm.num_layers)
    with torch.random.fork_rng(devices=[]):  # a per-text seed without disturbing the caller's random state
        torch.manual_seed(seed)
        return _reference_steps(model, parameters, originals, lowest, masked_lm.num_layers, inputs, options)


def _reference_steps(model, parameters, originals, lowest: int, num_layers: int, inputs: TextInputs, options: NeuralOptions) -> list[torch.Tensor]:
    from transformers.masking_utils import create_bidirectional_mask

    try:
        for parameter in parameters.values():
            parameter.requires_grad_(True)
        optimizer = torch.optim.AdamW(list(parameters.values()), lr=options.learning_rate)
        labels = inputs.labels
        with torch.no_grad():
            if lowest >= 0:
                outputs = model.bert(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask, output_hidden_states=True)
                frozen = outputs.hidden_states[lowest]
                embeds = outputs.hidden_states[0]
        mask = None
        if 0 <= lowest < num_layers:
            mask = create_bidirectional_mask(config=model.config, inputs_embeds=embeds, attention_mask=inputs.attention_mask)
        for _ in range(options.epochs):
            if lowest < 0:
                hidden = model.bert(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask).last_hidden_state
            else:
                hidden = frozen
                for block in model.bert.encoder.layer[lowest:]:
                    hidden = block(hidden, attention_mask=mask)
                    hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            logits = model.cls(hidden)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=IGNORE_LABEL)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return [(parameters[name].detach() - originals[name]).clone() for name in options.params]
    finally:
        with torch.no_grad():
            for name, parameter in parameters.items():
                parameter.copy_(originals[name])
                parameter.requires_grad_(False)
                parameter.grad = None


# ----------------------------------------------------------------------------------------------
# Batched path: many texts at once, masked-only logits, per-text AdamW.


class BatchedAdamW:
    """``torch.optim.AdamW`` (torch defaults, no amsgrad) applied row-wise: row t is text t's own parameter.

    Every text takes the same number of steps, so one step counter serves all rows; the update is the
    elementwise formula of torch's single-tensor AdamW, step for step.
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = [torch.zeros_like(param) for param in self.params]
        self.exp_avg_sq = [torch.zeros_like(param) for param in self.params]
        self.step_count = 0

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor]) -> None:
        beta1, beta2 = self.betas
        self.step_count += 1
        step = float(self.step_count)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = self.lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        for param, grad, exp_avg, exp_avg_sq in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            param.mul_(1 - self.lr * self.weight_decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)


def batched_supported(names: Sequence[str], num_layers: int) -> bool:
    """Whether the batched path covers this parameter choice (last block's output vectors, head transform vectors)."""
    return all(name in HEAD_VECTORS or name in block_vectors(num_layers) for name in names) and len(set(names)) == len(names)


@dataclass
class _Frozen:
    """What the frozen part of the model gives a group of texts, at masked positions only."""

    features: torch.Tensor  # (positions, H): last block's pre-LayerNorm sum (block mode) or final hidden state
    labels: torch.Tensor  # (positions,)
    owner: torch.Tensor  # (positions,) text index within the group
    plain: list[torch.Tensor] = field(default_factory=list)  # per text: pre-LayerNorm sums of unmasked chunks (variants)
    plain_mask: list[torch.Tensor] = field(default_factory=list)


def _frozen_features(masked_lm: MaskedLM, group: list[TextInputs], block_mode: bool, need_plain: bool, tokenizer) -> _Frozen:
    """Run the frozen model once per text (its rows in one forward) and keep the masked positions.

    In block mode the input of the last block's output LayerNorm is captured (dense(FFN) + bias +
    residual): everything the tuned block vectors act on. The model's own output dense bias is part of
    it; the tuned change is added on top. Per text, so a text's features never depend on its neighbours.
    """
    model = masked_lm.model
    captured: list[torch.Tensor] = []
    hook = None
    if block_mode or need_plain:
        norm = model.bert.encoder.layer[-1].output.LayerNorm
        hook = norm.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))
    features, labels, owners, plain, plain_masks = [], [], [], [], []
    try:
        with torch.inference_mode():
            for index, inputs in enumerate(group):
                captured.clear()
                hidden = model.bert(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask).last_hidden_state
                states = captured[-1] if block_mode else hidden
                chosen = inputs.labels != IGNORE_LABEL
                features.append(states[chosen].clone())
                labels.append(inputs.labels[chosen])
                owners.append(torch.full((int(chosen.sum()),), index, dtype=torch.long))
                if need_plain:
                    captured.clear()
                    ids, attention = plain_inputs(inputs.chunks, tokenizer)
                    model.bert(input_ids=ids, attention_mask=attention)
                    plain.append(captured[-1].clone())
                    plain_masks.append(attention.bool())
    finally:
        if hook is not None:
            hook.remove()
    return _Frozen(torch.cat(features), torch.cat(labels), torch.cat(owners), plain, plain_masks)


class _BatchedTop(torch.nn.Module):
    """The tuned top of the model for many texts: per-text rows of every tuned vector, masked positions only."""

    def __init__(self, masked_lm: MaskedLM, names: Sequence[str], texts: int) -> None:
        super().__init__()
        model = masked_lm.model
        config = model.config
        self.names = list(names)
        self.texts = texts
        self.block_names = block_vectors(masked_lm.num_layers)
        self.block_mode = tunes_last_block(names, masked_lm.num_layers)
        state = dict(model.named_parameters())
        self.original = {name: state[name].detach().clone() for name in (*self.block_names, *HEAD_VECTORS)}
        # every tuned vector starts, for every text, at the model's value
        self.tuned = {name: self.original[name].unsqueeze(0).repeat(texts, 1).contiguous() for name in names}
        for tensor in self.tuned.values():
            tensor.requires_grad_(True)
        self.block_eps = float(model.bert.encoder.layer[-1].output.LayerNorm.eps)
        self.head_eps = float(model.cls.predictions.transform.LayerNorm.eps)
        self.dense_weight = model.cls.predictions.transform.dense.weight.detach()
        self.activation = model.cls.predictions.transform.transform_act_fn
        self.decoder_weight = model.cls.predictions.decoder.weight.detach()
        self.output_bias = model.cls.predictions.bias.detach()
        self.hidden_size = int(config.hidden_size)

    def vector(self, name: str, owner: torch.Tensor) -> torch.Tensor:
        """Per-position rows of a vector: the owning text's tuned row, or the fixed model value.

        Rows are picked with a one-hot matmul rather than indexing: its backward (a matmul) sums each
        text's gradient in a fixed order, where index backward (scatter-add) is not deterministic on CPU.
        """
        if name in self.tuned:
            return self._one_hot(owner) @ self.tuned[name]
        return self.original[name]

    def _one_hot(self, owner: torch.Tensor) -> torch.Tensor:
        cached = getattr(self, "_one_hot_cache", None)
        if cached is not None and cached[0] is owner:
            return cached[1]
        matrix = torch.nn.functional.one_hot(owner, num_classes=self.texts).to(torch.float32)
        self._one_hot_cache = (owner, matrix)
        return matrix

    def block_output(self, features: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """Last block's output LayerNorm with the (possibly tuned) dense bias change and affine vectors."""
        weight_name, bias_name, dense_bias_name = self.block_names
        shifted = features
        if dense_bias_name in self.tuned:
            shifted = features + (self.vector(dense_bias_name, owner) - self.original[dense_bias_name])
        normalised = torch.nn.functional.layer_norm(shifted, (self.hidden_size,), eps=self.block_eps)
        return normalised * self.vector(weight_name, owner) + self.vector(bias_name, owner)

    def head_input(self, features: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """The head's dense pre-activation without bias (fixed in head mode, so computed once there)."""
        hidden = self.block_output(features, owner) if self.block_mode else features
        return hidden @ self.dense_weight.T

    def logits(self, dense_out: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        norm_weight, norm_bias, dense_bias = HEAD_VECTORS
        transformed = self.activation(dense_out + self.vector(dense_bias, owner))
        transformed = torch.nn.functional.layer_norm(transformed, (self.hidden_size,), eps=self.head_eps)
        transformed = transformed * self.vector(norm_weight, owner) + self.vector(norm_bias, owner)
        return torch.nn.functional.linear(transformed, self.decoder_weight, self.output_bias)


def micro_tune_batched(
    masked_lm: MaskedLM, group: list[TextInputs], options: NeuralOptions, position_budget: int = 256, need_plain: bool = False
) -> tuple[list[list[torch.Tensor]], _BatchedTop, _Frozen]:
    """Micro-tune every text of ``group`` at once; returns each text's weight changes (in ``options.params`` order).

    Per epoch: one full-batch step per text (each text's loss is the mean over its own masked tokens, so
    the sum over texts has each text's gradient in its own rows), logits only at masked positions,
    computed in slices of ``position_budget`` positions with gradients accumulated. ``need_plain`` also
    keeps the unmasked texts' last-block inputs, which the hidden-layer variants read.

    256 positions were measured 12–19 % faster than 2,048 here, and 128 slower again (smaller matrix
    products); likely because each logits buffer (256 × 30,522 float32 ≈ 31 MB for BERT's vocabulary)
    then stays under glibc's 32 MB mmap threshold and is reused, instead of being mapped and
    zero-filled afresh for every slice.
    """
    if not batched_supported(options.params, masked_lm.num_layers):
        raise ValueError(f"neural: the batched path does not cover params {list(options.params)}; use the reference path")
    top = _BatchedTop(masked_lm, options.params, len(group))
    frozen = _frozen_features(masked_lm, group, top.block_mode, need_plain, masked_lm.tokenizer)
    counts = torch.bincount(frozen.owner, minlength=len(group)).to(torch.float32)
    weights = 1.0 / counts[frozen.owner]
    fixed_dense = None
    if not top.block_mode:
        with torch.no_grad():
            fixed_dense = top.head_input(frozen.features, frozen.owner)
    tuned = [top.tuned[name] for name in options.params]
    optimizer = BatchedAdamW(tuned, lr=options.learning_rate)
    total = len(frozen.labels)
    for _ in range(options.epochs):
        grads = [torch.zeros_like(tensor) for tensor in tuned]
        for start in range(0, total, position_budget):
            piece = slice(start, start + position_budget)
            owner = frozen.owner[piece]
            dense_out = fixed_dense[piece] if fixed_dense is not None else top.head_input(frozen.features[piece], owner)
            logits = top.logits(dense_out, owner)
            losses = torch.nn.functional.cross_entropy(logits, frozen.labels[piece], reduction="none")
            loss = (losses * weights[piece]).sum()
            piece_grads = torch.autograd.grad(loss, tuned)
            for accumulated, grad in zip(grads, piece_grads):
                accumulated += grad
        optimizer.step(grads)
    changes = [[(top.tuned[name][index].detach() - top.original[name]).clone() for name in options.params] for index in range(len(group))]
    return changes, top, frozen


def hidden_variants(top: _BatchedTop, frozen: _Frozen, index: int, variants: Sequence[str]) -> dict[str, torch.Tensor]:
    """Appendix G: last-block output of the unmasked text ([CLS] or token average), original/tuned/difference.

    Chunks of a long text: the [CLS] vectors are averaged over chunks; the token average runs over all
    tokens ([CLS]/[SEP] included, as sentence-transformers' mean pooling) of all chunks. The chunks'
    original and tuned states are computed once and shared by all requested variants.
    """
    features = frozen.plain[index]
    mask = frozen.plain_mask[index]
    owner = torch.full(features.shape[:1], index, dtype=torch.long)
    chunk_states: dict[bool, list[torch.Tensor]] = {}

    def states_of(tuned: bool) -> list[torch.Tensor]:
        if tuned not in chunk_states:
            outputs = []
            for row in range(features.shape[0]):
                tokens = features[row][mask[row]]
                if tuned:
                    outputs.append(top.block_output(tokens, owner[row].expand(tokens.shape[0])))
                else:
                    original = top.original
                    outputs.append(torch.nn.functional.layer_norm(
                        tokens, (top.hidden_size,), original[top.block_names[0]], original[top.block_names[1]], top.block_eps
                    ))
            chunk_states[tuned] = outputs
        return chunk_states[tuned]

    def pooled(kind: str, tuned: bool) -> torch.Tensor:
        outputs = states_of(tuned)
        if kind == "cls":
            return torch.stack([states[0] for states in outputs]).mean(dim=0)
        return torch.cat(outputs).mean(dim=0)

    result: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for variant in variants:
            kind, _, stage = variant.partition("-")
            if stage == "":
                result[variant] = pooled(kind, False)
            elif stage == "tuned":
                result[variant] = pooled(kind, True)
            else:
                result[variant] = pooled(kind, True) - pooled(kind, False)
    return result


# ----------------------------------------------------------------------------------------------
# Embedding many texts.


def shared_run_variants(options: NeuralOptions, num_layers: int) -> tuple[str, ...]:
    """Variants one batched micro-tuning run with ``options`` yields besides its own (Appendix G).

    When the last block is tuned, the neural embedding and all six hidden-layer variants come from the same
    tuned weights, so one run gives all seven; ``cls`` and ``avg`` need no tuning and give each other;
    otherwise only the requested variant.
    """
    if options.variant in UNTUNED_VARIANTS:  # no micro-tuning run to share beyond the other untuned one
        return UNTUNED_VARIANTS
    if batched_supported(options.params, num_layers) and tunes_last_block(options.params, num_layers):
        return VARIANTS
    return (options.variant,)


def embed_texts(
    masked_lm: MaskedLM,
    texts: Sequence[str],
    options: NeuralOptions,
    path: str = "batched",
    group_positions: int = 4096,
    progress: Callable[[int], None] | None = None,
    indices: Sequence[int] | None = None,
) -> np.ndarray:
    """Neural embeddings (or an Appendix G variant) of ``texts`` as float32 rows; no caching here.

    ``path``: ``batched`` (groups of texts with about ``group_positions`` masked positions together) or
    ``reference`` (one text at a time). ``indices`` name the texts in error messages.
    """
    vectors = embed_texts_variants(masked_lm, texts, options, (options.variant,), path, group_positions, progress, indices)
    return vectors[options.variant]


def embed_texts_variants(
    masked_lm: MaskedLM,
    texts: Sequence[str],
    options: NeuralOptions,
    variants: Sequence[str],
    path: str = "batched",
    group_positions: int = 4096,
    progress: Callable[[int], None] | None = None,
    indices: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Several variants of ``texts`` from one micro-tuning run: ``{variant: float32 rows}``.

    ``options.variant`` is ignored; every name in ``variants`` is computed from the same tuned weights
    (``neural``: Eq. 1 on the weight changes; the others: Appendix G hidden-layer outputs).
    """
    variants = tuple(dict.fromkeys(variants))
    for variant in variants:
        if variant not in VARIANTS:
            raise ValueError(f"neural: unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    indices = list(indices) if indices is not None else list(range(len(texts)))
    tokenizer = masked_lm.tokenizer
    _check_parameters(masked_lm.model, options.params)
    hidden = [variant for variant in variants if variant != "neural"]
    tuned = [variant for variant in variants if variant not in UNTUNED_VARIANTS]
    if hidden:
        reading_tuned_block = [variant for variant in hidden if variant in tuned]
        if reading_tuned_block and not tunes_last_block(options.params, masked_lm.num_layers):
            raise ValueError(
                f"neural: variant {reading_tuned_block[0]!r} reads the last block's output, so params must tune the last block (e.g. params=block)"
            )
        if path == "reference":
            raise ValueError("neural: the hidden-layer variants are computed on the batched path only")
    all_inputs = [text_inputs(text, tokenizer, masked_lm.max_length, options.blueprints, f"text {index}") for text, index in zip(texts, indices)]
    if path == "reference":
        results: list[np.ndarray] = []
        for text, inputs, index in zip(texts, all_inputs, indices):
            changes = micro_tune_reference(masked_lm, inputs, options, text_seed(options.seed, text))
            results.append(weight_change_embedding(changes, f"text {index}").numpy().astype(np.float32))
            if progress:
                progress(1)
        return {"neural": np.stack(results) if results else np.zeros((0, 0), dtype=np.float32)}
    if path != "batched":
        raise ValueError(f"neural: path must be 'batched' or 'reference', got {path!r}")
    group: list[int] = []
    positions = 0
    groups: list[list[int]] = []
    for position, inputs in enumerate(all_inputs):
        count = int((inputs.labels != IGNORE_LABEL).sum())
        if group and positions + count > group_positions:
            groups.append(group)
            group, positions = [], 0
        group.append(position)
        positions += count
    if group:
        groups.append(group)
    run_options = replace(options, epochs=options.epochs if tuned else 0)  # the untuned variants need no tuning
    rows: dict[str, list[np.ndarray]] = {variant: [] for variant in variants}
    for members in groups:
        changes, top, frozen = micro_tune_batched(masked_lm, [all_inputs[member] for member in members], run_options, need_plain=bool(hidden))
        for local, member in enumerate(members):
            vectors = hidden_variants(top, frozen, local, hidden) if hidden else {}
            if "neural" in variants:
                vectors["neural"] = weight_change_embedding(changes[local], f"text {indices[member]}")
            for variant in variants:
                rows[variant].append(vectors[variant].numpy().astype(np.float32))
        if progress:
            progress(len(members))
    return {variant: np.stack(found) for variant, found in rows.items()}


def cache_key(masked_lm: MaskedLM, options: NeuralOptions, path: str, text: str) -> str:
    """Cache key of one text's embedding: model fingerprint, head hash, options, path and the text itself."""
    payload = json.dumps(
        {"model": masked_lm.fingerprint, "head": masked_lm.head_hash, "max_length": masked_lm.max_length, "options": options.key(), "path": path, "text": text},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def embedding_width(masked_lm: MaskedLM, options: NeuralOptions) -> int:
    """Width of the embedding: the tuned vectors' total size (neural) or the hidden size (variants)."""
    if options.variant != "neural":
        return masked_lm.hidden_size
    parameters = dict(masked_lm.model.named_parameters())
    return int(sum(parameters[name].numel() for name in options.params))


__all__ = [
    "BLUEPRINTS",
    "HEAD_VECTORS",
    "UNTUNED_VARIANTS",
    "VARIANTS",
    "BatchedAdamW",
    "NeuralOptions",
    "TextInputs",
    "blueprint_rows",
    "block_vectors",
    "cache_key",
    "embed_texts",
    "embed_texts_variants",
    "embedding_width",
    "load_masked_lm",
    "micro_tune_batched",
    "micro_tune_reference",
    "resolve_parameter_names",
    "shared_run_variants",
    "text_inputs",
    "tunes_last_block",
    "weight_change_embedding",
]
