"""Batched micro-tuning of vectors that act before attention: pre-LN blocks and ALBERT's shared layer.

On a post-LN encoder the last block's tuned vectors act position-wise after everything frozen, so the
batched path keeps only the masked positions' features (:mod:`~embedlab.neural.frozen`). A pre-LN
block's norms (ModernBERT, causal LMs) feed attention, and ALBERT's shared layer acts in every block,
so their tuned vectors change what every position sees. Here the frozen prefix runs once per text and
the module they live in — the last block, or ALBERT's encoder (:attr:`HeadLayout.replay_module`) — is
*replayed* every epoch over all rows of many texts at once: its call is recorded once (the inputs,
attention mask, rotary embeddings, … exactly as the model passed them) and re-run with forward hooks
that give each row its own text's tuned vectors. Rows belong to one text each and attention stays
within a row, so texts do not interact and each text's gradient lands in its own rows, as on the
reference path (:func:`embedlab.neural.reference.micro_tune_reference`), which runs the whole model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from embedlab.neural.adapters import NormSpec, norm_spec_of
from embedlab.neural.device import model_device
from embedlab.neural.frozen import FrozenFeatures, position_targets, same_shape_batches
from embedlab.neural.head import IGNORE_LABEL, MaskedLM
from embedlab.neural.inputs import TextInputs, padded_inputs


@dataclass
class ReplayBatch:
    """One recorded call of the replayed module: the rows of some texts that shared a frozen forward."""

    members: list[int]  # the texts (indices in the group) whose rows form the batch, in order
    rows: list[int]  # how many rows each member has
    args: tuple
    kwargs: dict
    masked: torch.Tensor  # (rows, length) positions carrying a label
    select: torch.Tensor  # (rows, texts) one-hot: each row's text


@dataclass
class PlainCall:
    """One text's unmasked rows through the replayed module (Appendix G's variants read its output)."""

    args: tuple
    kwargs: dict
    original: list[torch.Tensor]  # per row: the hidden states of its real tokens, untuned
    mask: torch.Tensor  # (rows, length) real tokens
    select: torch.Tensor  # (rows, texts) one-hot: the text of every row


class RowVectors:
    """Forward hooks giving every row of a replayed batch its text's tuned vectors.

    A tuned norm's output is recomputed from its input with the rows' weight (and bias); a tuned linear
    bias adds the rows' change to the module's output. Rows are picked with a one-hot matmul, whose
    backward sums each text's gradient in a fixed order (index backward is not deterministic on CPU).
    """

    def __init__(self, model: torch.nn.Module, tuned: dict[str, torch.Tensor], original: dict[str, torch.Tensor]) -> None:
        self.tuned, self.original = tuned, original
        self.select: torch.Tensor | None = None
        names = {id(parameter): name for name, parameter in model.named_parameters()}
        owners: dict[str, list[str]] = {}
        for name in tuned:
            owners.setdefault(name.rpartition(".")[0], []).append(name)
        self.hooks = [self._install(model.get_submodule(path), names, path) for path in owners]

    def _install(self, module: torch.nn.Module, names: dict[int, str], path: str):
        if isinstance(module, torch.nn.Linear):
            bias = names[id(module.bias)]
            return module.register_forward_hook(lambda _, args, output: output + (self.rows(bias, output) - self.original[bias]))
        spec = norm_spec_of(module, names, path)
        return module.register_forward_hook(lambda _, args, output: self._norm(spec, args[0]))

    def _norm(self, spec: NormSpec, values: torch.Tensor) -> torch.Tensor:
        return spec.apply(values, self.rows(spec.weight, values), self.rows(spec.bias, values) if spec.bias else None)

    def rows(self, name: str, like: torch.Tensor) -> torch.Tensor:
        """``name``'s value for every row, shaped to broadcast over ``like`` (rows first, the vector last)."""
        if name not in self.tuned:
            return self.original[name]
        return (self.select @ self.tuned[name]).view(like.shape[0], *([1] * (like.dim() - 2)), -1)

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()


class ReplayedModule:
    """A group's replay: the recorded calls of the replayed module, its masked positions and their targets."""

    def __init__(self, masked_lm: MaskedLM, group: list[TextInputs], tuned: dict[str, torch.Tensor], original: dict[str, torch.Tensor],
                 token_budget: int = 1024, need_plain: bool = False) -> None:
        self.model, self.layout = masked_lm.model, masked_lm.layout
        self.module = self.layout.replay_module(self.model)
        self.texts = len(group)
        self.batches, initial = self._record(group, token_budget)
        # recorded before the row hooks exist: the frozen model's own outputs
        self.plain = self.record_plain(group, masked_lm.tokenizer) if need_plain else []
        labels, owners, multiplicity = position_targets(group, model_device(self.model))
        self.frozen = FrozenFeatures(initial, labels, owners, multiplicity=multiplicity)
        self.vectors = RowVectors(self.model, {name: tensor for name, tensor in tuned.items() if name not in self.layout.head_vectors}, original)

    def _record(self, group: list[TextInputs], token_budget: int) -> tuple[list[ReplayBatch], torch.Tensor]:
        """One frozen forward per batch of same-shape texts, recording the replayed module's call; the untuned features."""
        device = model_device(self.model)
        calls: list[tuple[tuple, dict]] = []
        outputs: list[object] = []
        hooks = (self.module.register_forward_pre_hook(lambda _, args, kwargs: calls.append((args, kwargs)), with_kwargs=True),
                 self.module.register_forward_hook(lambda _, args, output: outputs.append(output)))
        batches, states = [], [torch.empty(0)] * len(group)
        extra = {"use_cache": False} if self.layout.causal else {}  # no key/value cache to grow when the block is re-run
        try:
            with torch.no_grad():  # not inference mode: the recorded tensors enter autograd graphs later
                for members in same_shape_batches(group, token_budget):
                    ids = torch.cat([group[index].input_ids for index in members]).to(device)
                    attention = torch.cat([group[index].attention_mask for index in members]).to(device)
                    calls.clear()
                    outputs.clear()
                    self.model.base_model(input_ids=ids, attention_mask=attention, **extra)
                    rows = [len(group[index].input_ids) for index in members]
                    masked = torch.cat([group[index].labels != IGNORE_LABEL for index in members]).to(device)
                    owner = torch.tensor([index for index, count in zip(members, rows) for _ in range(count)], device=device)
                    select = torch.nn.functional.one_hot(owner, num_classes=len(group)).to(torch.float32)
                    batch = ReplayBatch(members, rows, *calls[-1], masked, select)
                    batches.append(batch)
                    for index, features in self._features(batch, outputs[-1]).items():
                        states[index] = features
        finally:
            for hook in hooks:
                hook.remove()
        return batches, torch.cat(states)

    def _features(self, batch: ReplayBatch, output: object = None) -> dict[int, torch.Tensor]:
        """Each member's head features at its masked positions: from the module's ``output``, else from replaying ``batch``."""
        if output is None:
            output = self.module(*batch.args, **batch.kwargs)
        hidden = self.layout.replay_output(self.model, output)
        return {index: rows[mask] for index, rows, mask in zip(batch.members, hidden.split(batch.rows), batch.masked.split(batch.rows))}

    def features(self) -> torch.Tensor:
        """The head features at every masked position, in group order, with the rows' tuned vectors (autograd on)."""
        parts: list[torch.Tensor] = [torch.empty(0)] * self.texts
        for batch in self.batches:
            self.vectors.select = batch.select
            for index, features in self._features(batch).items():
                parts[index] = features
        return torch.cat(parts)

    def hidden(self, output: object) -> torch.Tensor:
        """The model's last hidden states from the replayed module's output (a causal LM's final norm applied,
        as its ``last_hidden_state``; the norm stays the model's own)."""
        hidden = self.layout.replay_output(self.model, output)
        return self.layout.transform(self.model, hidden) if self.layout.causal else hidden

    def record_plain(self, group: list[TextInputs], tokenizer) -> list[PlainCall]:
        """Each text's unmasked rows (a causal LM's rows are the text itself; an encoder's its chunks in
        ``[CLS] … [SEP]``) run once through the frozen model, the replayed module's call recorded."""
        device = model_device(self.model)
        calls: list[tuple[tuple, dict]] = []
        outputs: list[object] = []
        hooks = (self.module.register_forward_pre_hook(lambda _, args, kwargs: calls.append((args, kwargs)), with_kwargs=True),
                 self.module.register_forward_hook(lambda _, args, output: outputs.append(output)))
        extra = {"use_cache": False} if self.layout.causal else {}
        recorded = []
        try:
            with torch.no_grad():
                for index, inputs in enumerate(group):
                    ids, attention = (inputs.input_ids, inputs.attention_mask) if self.layout.causal else padded_inputs(inputs.chunks, tokenizer)
                    ids, attention = ids.to(device), attention.to(device)
                    self.model.base_model(input_ids=ids, attention_mask=attention, **extra)
                    mask = attention.bool()
                    select = torch.zeros((len(ids), self.texts), device=device)
                    select[:, index] = 1.0
                    recorded.append(PlainCall(*calls[-1], list(self._rows(self.hidden(outputs[-1]), mask)), mask, select))
        finally:
            for hook in hooks:
                hook.remove()
        return recorded

    @staticmethod
    def _rows(hidden: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        return [states[row_mask] for states, row_mask in zip(hidden, mask)]

    def tuned_states(self, call: PlainCall) -> list[torch.Tensor]:
        """One text's unmasked rows replayed with its tuned vectors: per row, its real tokens' hidden states."""
        self.vectors.select = call.select
        with torch.no_grad():
            return self._rows(self.hidden(self.module(*call.args, **call.kwargs)), call.mask)

    def close(self) -> None:
        self.vectors.remove()
