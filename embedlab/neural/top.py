"""The tuned top of the model as the batched path evaluates it: per-text rows of every tuned vector."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from embedlab.neural.head import MaskedLM
from embedlab.neural.options import head_names, tunes_last_block

# The head's dense pre-activation at some positions (a slice or an index tensor of any shape), given the
# positions' owners (the same shape, or one that broadcasts: one owner per row of a per-text layout).
DenseAt = Callable[[torch.Tensor | slice, torch.Tensor], torch.Tensor]


class BatchedTop(torch.nn.Module):
    """The tuned top of the model for many texts: per-text rows of every tuned vector, masked positions only."""

    def __init__(self, masked_lm: MaskedLM, names: Sequence[str], texts: int) -> None:
        super().__init__()
        model = masked_lm.model
        layout = masked_lm.layout
        self.names = list(names)
        self.texts = texts
        head, block = head_names(masked_lm.num_layers, layout)
        self.block_names = block if layout is None or layout.block_batched else ()
        tunes_block = tunes_last_block(names, masked_lm.num_layers, layout)
        # a pre-LN block or shared layer is re-run every epoch (neural/replay.py); the head then reads its output
        self.replay = tunes_block and layout is not None and not layout.block_batched
        self.block_mode = tunes_block and not self.replay
        state = dict(model.named_parameters())
        if layout is None:  # a hand-built BERT instance: BERT's own names
            from embedlab.neural.adapters import head_layout

            layout = head_layout(model)
        self.layout = layout
        self.head_norm = layout.norm
        self.block_norm = layout.block_norm
        self.head_names = (layout.norm.weight, layout.norm.bias, layout.dense_bias)  # None where the head lacks one
        self.original = {name: state[name].detach().clone() for name in dict.fromkeys((*self.block_names, *head, layout.norm.weight, *names))}
        # every tuned vector starts, for every text, at the model's value
        self.tuned = {name: self.original[name].unsqueeze(0).repeat(texts, 1).contiguous() for name in names}
        for tensor in self.tuned.values():
            tensor.requires_grad_(True)
        self.dense_weight = state[layout.dense_weight].detach() if layout.dense_weight else None
        self.activation = layout.activation
        self.decoder_weight = model.get_output_embeddings().weight.detach()
        self.output_bias = state[layout.output_bias].detach() if layout.output_bias else self.decoder_weight.new_zeros(self.decoder_weight.shape[0])
        self._one_hot_of: tuple[torch.Tensor, torch.Tensor] | None = None  # (owner, its one-hot matrix)

    def vector(self, name: str, owner: torch.Tensor) -> torch.Tensor:
        """Per-position rows of a vector: the owning text's tuned row, or the fixed model value.

        ``owner`` has any shape; the rows come in its shape plus the hidden size, so an owner of shape
        (texts, 1) gives one row per text that broadcasts over that text's positions.
        Rows are picked with a one-hot matmul rather than indexing: its backward (a matmul) sums each
        text's gradient in a fixed order, where index backward (scatter-add) is not deterministic on CPU.
        """
        if name in self.tuned:
            return self._one_hot(owner) @ self.tuned[name]
        return self.original[name]

    def _one_hot(self, owner: torch.Tensor) -> torch.Tensor:
        """The one-hot matrix of ``owner``, reused while the same slice of positions is being processed."""
        if self._one_hot_of is not None and self._one_hot_of[0] is owner:
            return self._one_hot_of[1]
        # a comparison, not F.one_hot: that one checks its values on the host, a device sync per call on a GPU
        matrix = (owner.unsqueeze(-1) == torch.arange(self.texts, device=owner.device)).to(torch.float32)
        self._one_hot_of = (owner, matrix)
        return matrix

    def block_output(self, features: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """Last block's output LayerNorm with the (possibly tuned) dense bias change and affine vectors."""
        norm = self.block_norm
        dense_bias_name = self.layout.block_dense_bias
        shifted = features
        if dense_bias_name in self.tuned:
            shifted = features + (self.vector(dense_bias_name, owner) - self.original[dense_bias_name])
        return norm.apply(shifted, self.vector(norm.weight, owner), self.vector(norm.bias, owner) if norm.bias else None)

    def original_block_output(self, features: torch.Tensor) -> torch.Tensor:
        """Last block's output LayerNorm with the model's own vectors (the untuned hidden states)."""
        norm = self.block_norm
        if norm.kind == "layer":
            return torch.nn.functional.layer_norm(features, (norm.width,), self.original[norm.weight], self.original[norm.bias] if norm.bias else None, norm.eps)
        return norm.apply(features, self.original[norm.weight], None)

    def head_input(self, features: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """The head's dense pre-activation without bias (fixed in head mode, so computed once there); the features themselves without a dense layer."""
        hidden = self.block_output(features, owner) if self.block_mode else features
        return hidden @ self.dense_weight.T if self.dense_weight is not None else hidden

    def transformed(self, dense_out: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        """The head transform's output: the decoder input ``z`` of each position."""
        norm_weight, norm_bias, dense_bias = self.head_names
        transformed = dense_out + self.vector(dense_bias, owner) if dense_bias else dense_out
        if self.activation is not None:
            transformed = self.activation(transformed)
        return self.head_norm.apply(transformed, self.vector(norm_weight, owner), self.vector(norm_bias, owner) if norm_bias else None)

    def logits(self, dense_out: torch.Tensor, owner: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(self.transformed(dense_out, owner), self.decoder_weight, self.output_bias)
