"""What the frozen part of the model gives the batched path: features at the masked positions only.

The tuned vectors of the head (and of a post-LN encoder's last block) act position-wise after
everything frozen, so the frozen model runs once per text and only its outputs at the positions
carrying a loss are kept (neural-embeddings paper, Appendix B).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from embedlab.errors import InputError
from embedlab.neural.device import model_device
from embedlab.neural.head import IGNORE_LABEL, MaskedLM
from embedlab.neural.inputs import TextInputs, padded_inputs


@dataclass
class FrozenFeatures:
    """What the frozen part of the model gives a group of texts, at masked positions only."""

    features: torch.Tensor  # (positions, H): last block's pre-LayerNorm sum (block mode) or final hidden state
    labels: torch.Tensor  # (positions,)
    owner: torch.Tensor  # (positions,) text index within the group
    plain: list[torch.Tensor] = field(default_factory=list)  # per text: pre-LayerNorm sums of unmasked chunks (variants)
    plain_mask: list[torch.Tensor] = field(default_factory=list)
    multiplicity: torch.Tensor | None = None  # (positions,) loss weight of each position (causal LMs: rows selecting it); None = 1


def frozen_features(masked_lm: MaskedLM, group: list[TextInputs], block_mode: bool, need_plain: bool, token_budget: int = 1024) -> FrozenFeatures:
    """Run the frozen model over the texts' rows and keep the masked positions, in text order.

    In block mode the input of the last block's output LayerNorm is captured (dense(FFN) + bias +
    residual): everything the tuned block vectors act on. The model's own output dense bias is part of
    it; the tuned change is added on top.

    Texts whose rows have the same length and the same kind of attention mask (padded rows or none:
    transformers drops an all-ones mask, a different attention kernel path) share a forward of up to
    ``token_budget`` tokens, so no row gains padding and each sees exactly what it would alone; only
    the matrix products grow (about 1,000 tokens measured 10–20 % faster per text than one text's
    ~100–250, and larger ones no faster). A row's outputs then equal those of a forward of its text
    alone (measured bit for bit on the 200 benchmark texts), so a text's features never depend on its
    neighbours.
    """
    model = masked_lm.model
    layout = masked_lm.layout
    device = model_device(model)
    captured: list[torch.Tensor] = []
    hook = None
    if block_mode or need_plain:
        if layout is not None and not layout.block_batched:
            raise InputError(f"neural: the batched path cannot tune or read {layout.family}'s last block (not a post-LN block); use the reference path")
        norm = layout.block_norm_module(model) if layout is not None else model.bert.encoder.layer[-1].output.LayerNorm
        hook = norm.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))

    def forward(ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        if layout is None:
            return model.bert(input_ids=ids, attention_mask=attention).last_hidden_state
        return layout.features(model, ids, attention)

    states: list[torch.Tensor] = [torch.empty(0)] * len(group)
    plain, plain_masks = [], []
    try:
        with torch.inference_mode():
            for batch in same_shape_batches(group, token_budget):
                captured.clear()
                ids = torch.cat([group[index].input_ids for index in batch]).to(device)
                attention = torch.cat([group[index].attention_mask for index in batch]).to(device)
                hidden = forward(ids, attention)
                rows = captured[-1] if block_mode else hidden
                for index, text_rows in zip(batch, rows.split([len(group[index].input_ids) for index in batch])):
                    states[index] = text_rows[(group[index].labels != IGNORE_LABEL).to(device)].clone()
            if need_plain:
                for inputs in group:
                    captured.clear()
                    ids, attention = padded_inputs(inputs.chunks, masked_lm.tokenizer)
                    ids, attention = ids.to(device), attention.to(device)
                    forward(ids, attention)
                    plain.append(captured[-1].clone())
                    plain_masks.append(attention.bool())
    finally:
        if hook is not None:
            hook.remove()
    labels, owners, multiplicity = position_targets(group, device)
    return FrozenFeatures(torch.cat(states), labels, owners, plain, plain_masks, multiplicity)


def position_targets(group: list[TextInputs], device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The group's masked positions in text order: their labels, owning texts and loss weights (None = 1 each).

    Everything the epochs read is created on the model's device: no host round trip inside the epoch loop.
    """
    labels = [inputs.labels[inputs.labels != IGNORE_LABEL].to(device) for inputs in group]
    owners = [torch.full((len(text_labels),), index, dtype=torch.long, device=device) for index, text_labels in enumerate(labels)]
    multiplicity = None
    if any(inputs.label_weights is not None for inputs in group):
        multiplicity = torch.cat([
            inputs.label_weights[inputs.labels != IGNORE_LABEL].to(device) if inputs.label_weights is not None else torch.ones(len(text_labels), device=device)
            for inputs, text_labels in zip(group, labels)
        ])
    return torch.cat(labels), torch.cat(owners), multiplicity


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
