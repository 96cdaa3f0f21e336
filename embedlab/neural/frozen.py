"""What the frozen part of the model gives the batched path: features at the masked positions only.

The tuned vectors of the head (and of a post-LN encoder's last block) act position-wise after
everything frozen, so the frozen model runs once per text and only its outputs at the positions
carrying a loss are kept (neural-embeddings paper, Appendix B).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

import torch

from embedlab.errors import InputError
from embedlab.neural.device import forward_tokens_for, model_device
from embedlab.neural.head import IGNORE_LABEL, MaskedLM
from embedlab.neural.inputs import TextInputs, padded_inputs
from embedlab.neural.vocabulary import forward_model
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.cache.hashing import cache_key
from embedlab.runtime.streams import ordered_map, stream_count


@dataclass
class FrozenFeatures:
    """What the frozen part of the model gives a group of texts, at masked positions only."""

    features: torch.Tensor  # (positions, H): last block's pre-LayerNorm sum (block mode) or final hidden state
    labels: torch.Tensor  # (positions,)
    owner: torch.Tensor  # (positions,) text index within the group
    plain: list[torch.Tensor] = field(default_factory=list)  # per text: pre-LayerNorm sums of unmasked chunks (variants)
    plain_mask: list[torch.Tensor] = field(default_factory=list)
    multiplicity: torch.Tensor | None = None  # (positions,) loss weight of each position (causal LMs: rows selecting it); None = 1


def frozen_features(
    masked_lm: MaskedLM, group: list[TextInputs], block_mode: bool, need_plain: bool, token_budget: int | None = None,
    compute: str = "fp32", store: ArrayStore | None = None,
) -> FrozenFeatures:
    """Run the frozen model over the texts' rows and keep the masked positions, in text order.

    In block mode the input of the last block's output LayerNorm is captured (dense(FFN) + bias +
    residual): everything the tuned block vectors act on. The model's own output dense bias is part of
    it; the tuned change is added on top.

    Texts whose rows have the same length and the same kind of attention mask (padded rows or none:
    transformers drops an all-ones mask, a different attention kernel path) share a forward of up to
    ``token_budget`` tokens (by default the device's, :func:`~embedlab.neural.device.forward_tokens_for`),
    so no row gains padding and each sees exactly what it would alone; only the matrix products grow
    (on the CPU about 1,000 tokens measured 10–20 % faster per text than one text's ~100–250, and larger
    ones no faster). A row's outputs then equal those of a forward of its text alone (measured bit for
    bit on the 200 benchmark texts), so a text's features never depend on its neighbours.

    ``compute`` other than fp32 runs the forward on the model's copy in that dtype (:func:`~embedlab.neural.vocabulary.forward_model`); the features are float32.
    ``store`` (not with ``need_plain``): each text's features are read from it where present and written
    to it otherwise, keyed by :func:`feature_key` (never by the softmax or tuning options, which act after
    the features), so every neural spec with the same features pays the forward once.
    """
    device = model_device(masked_lm.model)
    if store is None or need_plain:
        states, plain, plain_masks = _forward_states(masked_lm, group, block_mode, need_plain, token_budget, compute)
    else:
        keys = [feature_key(masked_lm, inputs, block_mode, compute, device) for inputs in group]
        found = [store.load(key) for key in keys]
        missing = [index for index, array in enumerate(found) if array is None]
        computed = _forward_states(masked_lm, [group[index] for index in missing], block_mode, False, token_budget, compute)[0] if missing else []
        for index, text_states in zip(missing, computed):
            store.save(keys[index], text_states.cpu().numpy())
        states = [torch.tensor(array, device=device) if array is not None else torch.empty(0) for array in found]
        for index, text_states in zip(missing, computed):
            states[index] = text_states
        plain, plain_masks = [], []
    labels, owners, multiplicity = position_targets(group, device)
    return FrozenFeatures(torch.cat(states), labels, owners, plain, plain_masks, multiplicity)


def feature_key(masked_lm: MaskedLM, inputs: TextInputs, block_mode: bool, compute: str, device: torch.device) -> str:
    """A text's frozen features' cache key: the model's content fingerprint, the compute, which features (the
    last block's pre-LayerNorm sum or the final hidden state), the maximum input length, and the text's
    micro-tuning rows themselves (their ids and masked positions: the text, the tokenizer and the blueprints,
    ``skip-blueprint`` included). Off the CPU the device kind joins it (features agree with the CPU's to rounding)."""
    rows = hashlib.sha256()
    for tensor in (inputs.input_ids, inputs.labels != IGNORE_LABEL):
        rows.update(str(tuple(tensor.shape)).encode())
        rows.update(tensor.contiguous().numpy().tobytes())
    where = () if device.type == "cpu" else (device.type,)
    return cache_key("neural_frozen", masked_lm.fingerprint, compute, "block" if block_mode else "final", masked_lm.max_length, rows.hexdigest(), *where)


def _forward_states(
    masked_lm: MaskedLM, group: list[TextInputs], block_mode: bool, need_plain: bool, token_budget: int | None, compute: str,
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Per text its features at the masked positions (float32), and with ``need_plain`` the unmasked chunks' (see :func:`frozen_features`)."""
    model = forward_model(masked_lm, compute)
    layout = masked_lm.layout
    device = model_device(model)
    token_budget = token_budget if token_budget is not None else forward_tokens_for(device)
    captured = _Captured()
    hook = None
    if block_mode or need_plain:
        if layout is not None and not layout.block_batched:
            raise InputError(f"neural: the batched path cannot tune or read {layout.family}'s last block (not a post-LN block); use the reference path")
        norm = layout.block_norm_module(model) if layout is not None else model.bert.encoder.layer[-1].output.LayerNorm
        hook = norm.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach().float()))

    def forward(ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        if layout is None:
            return model.bert(input_ids=ids, attention_mask=attention).last_hidden_state.float()
        return layout.features(model, ids, attention).float()

    def masked_states(staged_batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, attention, masked = staged_batch
        captured.clear()
        hidden = forward(ids, attention)
        rows = captured[-1] if block_mode else hidden
        return rows.reshape(-1, rows.shape[-1]).index_select(0, masked)  # the batch's masked positions, text by text

    states: list[torch.Tensor] = [torch.empty(0)] * len(group)
    plain, plain_masks = [], []
    # largest first, all handed out at once: a stream that ends a small batch takes the next instead of waiting
    # for a longer one before it (the group's features are all kept anyway); each batch's numbers are the same
    batches = sorted(same_shape_batches(group, token_budget), key=lambda batch: -sum(group[index].input_ids.numel() for index in batch))
    staged = _StagedBatches(group, batches, device)
    try:
        with torch.inference_mode():
            # one batch per core (runtime/streams.py): the same numbers as one thread, no barrier between small ops
            for batch, selected in zip(batches, ordered_map(masked_states, staged, stream_count(device), ahead=len(batches))):
                for index, text_states in zip(batch, selected.split([group[index].masked_positions for index in batch])):
                    states[index] = text_states
            if need_plain:
                plain, plain_masks = _plain_features(masked_lm, group, forward, captured)
    finally:
        if hook is not None:
            hook.remove()
    return states, plain, plain_masks


class _Captured(threading.local):
    """The block-norm inputs a forward hook captured, per thread (each stream's forward reads its own)."""

    def __init__(self) -> None:
        self.items: list[torch.Tensor] = []

    def append(self, item: torch.Tensor) -> None:
        self.items.append(item)

    def clear(self) -> None:
        self.items.clear()

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.items[index]


def _plain_features(masked_lm: MaskedLM, group: list[TextInputs], forward, captured: _Captured) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per text: the last block's pre-LayerNorm sums over its unmasked chunks, and their attention masks
    (the hidden-layer variants' inputs, Appendix G)."""
    device = model_device(masked_lm.model)
    plain, plain_masks = [], []
    for inputs in group:
        captured.clear()
        ids, attention = padded_inputs(inputs.chunks, masked_lm.tokenizer)
        ids, attention = ids.to(device), attention.to(device)
        forward(ids, attention)
        plain.append(captured[-1].clone())
        plain_masks.append(attention.bool())
    return plain, plain_masks


class _StagedBatches:
    """The frozen forwards' inputs of a group on the device: (input ids, attention mask, flat indices of the
    masked positions) per batch of :func:`same_shape_batches`, copied to the device in one transfer each."""

    def __init__(self, group: list[TextInputs], batches: list[list[int]], device: torch.device) -> None:
        self.shapes = [(sum(len(group[index].input_ids) for index in batch), group[batch[0]].input_ids.shape[1]) for batch in batches]
        members = [group[index] for batch in batches for index in batch]
        self.ids = torch.cat([inputs.input_ids.reshape(-1) for inputs in members]).to(device)
        self.attention = torch.cat([inputs.attention_mask.reshape(-1) for inputs in members]).to(device)
        masked = [torch.cat([(group[index].labels != IGNORE_LABEL).reshape(-1) for index in batch]).nonzero().squeeze(1) for batch in batches]
        self.masked_counts = [len(indices) for indices in masked]
        self.masked = torch.cat(masked).to(device)

    def __iter__(self):
        token_start = position_start = 0
        for (rows, length), count in zip(self.shapes, self.masked_counts):
            tokens = slice(token_start, token_start + rows * length)
            yield self.ids[tokens].view(rows, length), self.attention[tokens].view(rows, length), self.masked[position_start : position_start + count]
            token_start += rows * length
            position_start += count


def position_targets(group: list[TextInputs], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The group's masked positions in text order: their labels, owning texts and loss weights (None = 1 each).

    Everything the epochs read is created on the model's device (one copy per tensor): no host round trip
    inside the epoch loop.
    """
    masks = [inputs.labels != IGNORE_LABEL for inputs in group]
    labels = [inputs.labels[mask] for inputs, mask in zip(group, masks)]
    # built on the host (device named: the caller's default device may be another) and copied once
    counts = torch.tensor([len(text_labels) for text_labels in labels], dtype=torch.long, device="cpu")
    owners = torch.repeat_interleave(torch.arange(len(group), device="cpu"), counts)
    multiplicity = None
    if any(inputs.label_weights is not None for inputs in group):
        multiplicity = torch.cat([
            inputs.label_weights[mask] if inputs.label_weights is not None else torch.ones(len(text_labels), device="cpu")
            for inputs, mask, text_labels in zip(group, masks, labels)
        ]).to(device)
    return torch.cat(labels).to(device), owners.to(device), multiplicity


def same_shape_batches(group: list[TextInputs], token_budget: int) -> list[list[int]]:
    """Indices of texts that can share a frozen forward: same row length and mask kind, ≤ ``token_budget`` tokens (≥ one text)."""
    kinds: dict[tuple[int, bool], list[int]] = {}
    for index, inputs in enumerate(group):
        kinds.setdefault((inputs.input_ids.shape[1], bool(inputs.attention_mask.all())), []).append(index)
    batches: list[list[int]] = []
    for members in kinds.values():
        batch: list[int] = []
        tokens = 0
        for index in members:
            size = group[index].input_ids.numel()
            if batch and tokens + size > token_budget:
                batches.append(batch)
                batch, tokens = [], 0
            batch.append(index)
            tokens += size
        batches.append(batch)
    return batches
