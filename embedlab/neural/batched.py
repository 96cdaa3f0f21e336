"""The batched micro-tuning path: many texts at once, the same numbers as the reference path (paper Appendix B).

The tuned vectors this path covers (the last block's ``output.dense.bias`` / ``output.LayerNorm.*`` and
the head's ``transform.dense.bias`` / ``transform.LayerNorm.*``) all act position-wise *after*
everything that is frozen. So the frozen part runs once per text, only its outputs at the masked
positions (the only ones carrying a loss) are kept, and each text owns a row of every tuned vector:
:class:`BatchedAdamW` updates all rows exactly as ``torch.optim.AdamW`` would update each text's own
parameters. Each text's loss is its own mean over its masked tokens, so texts do not interact, and the
result equals :func:`embedlab.neural.reference.micro_tune_reference` text by text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from embedlab.errors import InputError
from embedlab.neural.candidates import (
    candidate_cross_entropy,
    candidate_sets,
    pad_candidates,
    residual_from_totals,
    residual_logit,
    top_ids,
)
from embedlab.neural.device import CPU_POSITION_BUDGET, full_float32, model_device
from embedlab.neural.head import IGNORE_LABEL, MaskedLM
from embedlab.neural.inputs import TextInputs, padded_inputs
from embedlab.neural.options import NeuralOptions, head_names, tunes_last_block


# The head's dense pre-activation at some positions (a slice or an index tensor of any shape), given the
# positions' owners (the same shape, or one that broadcasts: one owner per row of a per-text layout).
DenseAt = Callable[[torch.Tensor | slice, torch.Tensor], torch.Tensor]


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


def batched_supported(names: Sequence[str], num_layers: int, layout=None) -> bool:
    """Whether the batched path covers this parameter choice: the head preset's vectors, and the last block's
    output vectors where they act position-wise after everything frozen (post-LN encoders)."""
    head, block = head_names(num_layers, layout)
    if layout is not None and not layout.block_batched:
        block = ()
    return all(name in head or name in block for name in names) and len(set(names)) == len(names)


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
            for batch in _same_shape_batches(group, token_budget):
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
    # everything the epochs read is created on the model's device: no host round trip inside the epoch loop
    labels = [inputs.labels[inputs.labels != IGNORE_LABEL].to(device) for inputs in group]
    owners = [torch.full((len(text_labels),), index, dtype=torch.long, device=device) for index, text_labels in enumerate(labels)]
    multiplicity = None
    if any(inputs.label_weights is not None for inputs in group):
        multiplicity = torch.cat([
            inputs.label_weights[inputs.labels != IGNORE_LABEL].to(device) if inputs.label_weights is not None else torch.ones(len(text_labels), device=device)
            for inputs, text_labels in zip(group, labels)
        ])
    return FrozenFeatures(torch.cat(states), torch.cat(labels), torch.cat(owners), plain, plain_masks, multiplicity)


def _same_shape_batches(group: list[TextInputs], token_budget: int) -> list[list[int]]:
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
        self.block_mode = tunes_last_block(names, masked_lm.num_layers, layout)
        state = dict(model.named_parameters())
        if layout is None:  # a hand-built BERT instance: BERT's own names
            from embedlab.neural.adapters import head_layout

            layout = head_layout(model)
        self.layout = layout
        self.head_norm = layout.norm
        self.block_norm = layout.block_norm
        self.head_names = (layout.norm.weight, layout.norm.bias, layout.dense_bias)  # None where the head lacks one
        self.original = {name: state[name].detach().clone() for name in (*self.block_names, *head, layout.norm.weight)}
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
        matrix = torch.nn.functional.one_hot(owner, num_classes=self.texts).to(torch.float32)
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


@dataclass
class BatchedRun:
    """One batched micro-tuning run: each text's weight changes, and the state the Appendix G variants read."""

    changes: list[list[torch.Tensor]]  # per text, per tuned parameter (in ``options.params`` order)
    top: BatchedTop
    frozen: FrozenFeatures


def micro_tune_batched(
    masked_lm: MaskedLM, group: list[TextInputs], options: NeuralOptions, position_budget: int = CPU_POSITION_BUDGET, need_plain: bool = False
) -> BatchedRun:
    """Micro-tune every text of ``group`` at once; returns each text's weight changes (in ``options.params`` order).

    Per epoch: one full-batch step per text (each text's loss is the mean over its own masked tokens, so
    the sum over texts has each text's gradient in its own rows), logits only at masked positions,
    computed in slices of ``position_budget`` positions with gradients accumulated. ``need_plain`` also
    keeps the unmasked texts' last-block inputs, which the hidden-layer variants read. With
    ``options.softmax == "candidates"`` epoch 1 also records each text's candidate set and residual terms
    and later epochs compute logits over those only (:class:`GroupCandidates`, :mod:`embedlab.neural.candidates`).

    256 positions were measured 12–19 % faster than 2,048 here, and 128 slower again (smaller matrix
    products); likely because each logits buffer (256 × 30,522 float32 ≈ 31 MB for BERT's vocabulary)
    then stays under glibc's 32 MB mmap threshold and is reused, instead of being mapped and
    zero-filled afresh for every slice.

    Runs on the model's device (:mod:`~embedlab.neural.device`): the frozen features, labels, owners,
    blueprint inputs, per-text rows and AdamW state are all created there, and the epochs read nothing
    back to the host; float32 products run at full precision (no TF32) throughout.
    """
    with full_float32():
        return _micro_tune_batched(masked_lm, group, options, position_budget, need_plain)


def _micro_tune_batched(masked_lm: MaskedLM, group: list[TextInputs], options: NeuralOptions, position_budget: int, need_plain: bool) -> BatchedRun:
    if not batched_supported(options.params, masked_lm.num_layers, masked_lm.layout):
        raise InputError(f"neural: the batched path does not cover params {list(options.params)}; use the reference path")
    top = BatchedTop(masked_lm, options.params, len(group))
    frozen = frozen_features(masked_lm, group, top.block_mode, need_plain)
    if frozen.multiplicity is None:
        counts = torch.bincount(frozen.owner, minlength=len(group)).to(torch.float32)
        weights = 1.0 / counts[frozen.owner]
    else:  # each position weighted by how many rows select it, each text's weights summing to one
        totals = torch.bincount(frozen.owner, weights=frozen.multiplicity, minlength=len(group)).to(torch.float32)
        weights = frozen.multiplicity / totals[frozen.owner]
    fixed_dense = None
    if not top.block_mode:
        with torch.no_grad():
            fixed_dense = top.head_input(frozen.features, frozen.owner)
    tuned = [top.tuned[name] for name in options.params]
    optimizer = BatchedAdamW(tuned, lr=options.learning_rate)

    def dense_at(positions: torch.Tensor | slice, owner: torch.Tensor) -> torch.Tensor:
        return fixed_dense[positions] if fixed_dense is not None else top.head_input(frozen.features[positions], owner)

    candidates: GroupCandidates | None = None
    for epoch in range(options.epochs):
        if candidates is not None:
            grads = candidates.gradients(top, dense_at, tuned)
        elif options.softmax == "candidates":
            grads, candidates = _first_epoch_with_candidates(top, frozen, dense_at, weights, tuned, options.candidates, position_budget)
        else:
            grads = _exact_gradients(top, frozen, dense_at, weights, tuned, position_budget)
        optimizer.step(grads)
    # one transfer per tuned vector after the last epoch (elementwise, so the same values as per text)
    deltas = {name: (top.tuned[name].detach() - top.original[name]).cpu() for name in options.params}
    changes = [[deltas[name][index].clone() for name in options.params] for index in range(len(group))]
    return BatchedRun(changes, top, frozen)


def _exact_gradients(top: BatchedTop, frozen: FrozenFeatures, dense_at: DenseAt, weights: torch.Tensor, tuned: list[torch.Tensor], position_budget: int) -> list[torch.Tensor]:
    """One epoch's gradients with logits over the whole vocabulary, in slices of ``position_budget`` positions."""
    grads = [torch.zeros_like(tensor) for tensor in tuned]
    for start in range(0, len(frozen.labels), position_budget):
        piece = slice(start, start + position_budget)
        owner = frozen.owner[piece]
        logits = top.logits(dense_at(piece, owner), owner)
        losses = torch.nn.functional.cross_entropy(logits, frozen.labels[piece], reduction="none")
        piece_grads = torch.autograd.grad((losses * weights[piece]).sum(), tuned)
        for accumulated, grad in zip(grads, piece_grads):
            accumulated += grad
    return grads


def _first_epoch_with_candidates(
    top: BatchedTop, frozen: FrozenFeatures, dense_at: DenseAt, weights: torch.Tensor, tuned: list[torch.Tensor], count: int, position_budget: int
) -> tuple[list[torch.Tensor], GroupCandidates]:
    """Epoch 1 exactly, keeping what the candidate epochs need (top-K ids, z₀, log-sum-exp, softmax mean).

    The decoder's backward is written out: ``∂CE/∂z = (Σ_v p_v·W_v − W_y)·weight``, whose first term is
    the full softmax-weighted mean μ_all that the residual needs, so epoch 1 costs what an exact epoch does.
    The softmax is taken in place in the logits buffer (one exponential per logit, no second
    vocabulary-sized buffer) once the top-K ids are read off, and normalised after the product with
    the output embeddings, on (positions × hidden) values rather than (positions × vocabulary).
    """
    grads = [torch.zeros_like(tensor) for tensor in tuned]
    first_z, normalisers, means, tops = [], [], [], []
    for start in range(0, len(frozen.labels), position_budget):
        piece = slice(start, start + position_budget)
        owner = frozen.owner[piece]
        z = top.transformed(dense_at(piece, owner), owner)
        with torch.no_grad():
            logits = torch.nn.functional.linear(z, top.decoder_weight, top.output_bias)
            tops.append(top_ids(logits, count))
            highest = logits.amax(dim=-1, keepdim=True)
            exponentials = logits.sub_(highest).exp_()
            totals = exponentials.sum(dim=-1, keepdim=True)
            mean = (exponentials @ top.decoder_weight) / totals
            del logits, exponentials
            grad_z = (mean - top.decoder_weight[frozen.labels[piece]]) * weights[piece, None]
        piece_grads = torch.autograd.grad(z, tuned, grad_outputs=grad_z)
        for accumulated, grad in zip(grads, piece_grads):
            accumulated += grad
        first_z.append(z.detach())
        normalisers.append((highest + totals.log()).squeeze(-1))
        means.append(mean)
    state = GroupCandidates(top, frozen, weights, torch.cat(tops), torch.cat(first_z), torch.cat(normalisers), torch.cat(means))
    return grads, state


@dataclass
class CandidateChunk:
    """Texts whose candidate epochs run as one batched matmul: per-text candidates and positions, padded.

    Padding positions repeat the text's first position with weight 0; padding candidates have bias −inf.
    """

    texts: torch.Tensor  # (T, 1) the texts' indices in the group: one row of every tuned vector per text
    weight: torch.Tensor  # (T, C, H) output embeddings of the candidates (gathered once, reused every epoch)
    bias: torch.Tensor  # (T, C) output bias at the candidates, −inf at padding
    positions: torch.Tensor  # (T, P) group positions, padded with the text's first position
    weights: torch.Tensor  # (T, P) each position's loss weight (1 / the text's masked positions; 0 at padding)
    targets: torch.Tensor  # (T, P) each label's column among its text's candidates
    z0: torch.Tensor  # (T, P, H) epoch-1 decoder inputs
    residual: torch.Tensor  # (T, P) R₀
    mean: torch.Tensor  # (T, P, H) μ₀


def chunk_texts(positions: Sequence[int], sizes: Sequence[int], hidden: int, padding_slack: float = 1.25, chunk_values: int = 1 << 24) -> list[list[int]]:
    """Texts cut into chunks for the padded candidate epochs, given each text's masked positions and set size.

    A chunk's work is (texts × its most positions × its largest set); whatever exceeds the texts' own
    positions × set sizes is padding, wasted. Texts are sorted by (positions, set size), which a text's
    length drives both of, and a chunk is closed when the next text would make its padded work exceed
    ``padding_slack`` × its real work (each chunk costs a few dozen small operations per epoch, so
    chunks of one text each would cost more than they save) or its gathered output embeddings exceed
    ``chunk_values`` values.
    """
    order = sorted(range(len(positions)), key=lambda text: (positions[text], sizes[text]))
    chunks: list[list[int]] = []
    chunk: list[int] = []
    real = largest = 0
    for text in order:  # positions ascend, so the text's own are the chunk's most
        work = positions[text] * sizes[text]
        widest = max(largest, sizes[text])
        if chunk and ((len(chunk) + 1) * positions[text] * widest > padding_slack * (real + work) or (len(chunk) + 1) * widest * hidden > chunk_values):
            chunks.append(chunk)
            chunk, real, widest = [], 0, sizes[text]
        chunk.append(text)
        real += work
        largest = widest
    if chunk:
        chunks.append(chunk)
    return chunks


class GroupCandidates:
    """A group's candidate sets (each text its own) and residual terms, built from epoch 1.

    Texts are cut into chunks of similar positions and set sizes (:func:`chunk_texts`), so padding to a
    chunk's largest text wastes little.
    """

    def __init__(
        self, top: BatchedTop, frozen: FrozenFeatures, weights: torch.Tensor, tops: torch.Tensor, z0: torch.Tensor,
        normalisers: torch.Tensor, means: torch.Tensor,
    ) -> None:
        # built once after epoch 1: the sizes read back here (.tolist) are its only host round trips
        device = frozen.owner.device
        positions_of = torch.split(torch.arange(len(frozen.owner), device=device), torch.bincount(frozen.owner, minlength=top.texts).tolist())  # texts are contiguous
        sets, targets = candidate_sets(tops, frozen.labels, frozen.owner, top.texts)
        groups = chunk_texts([len(positions) for positions in positions_of], [len(ids) for ids in sets], top.decoder_weight.shape[1])
        self.chunks = [self._chunk(texts, sets, targets, positions_of, top, weights, z0, normalisers, means) for texts in groups]

    @staticmethod
    def _chunk(
        texts: list[int], sets: list[torch.Tensor], targets: torch.Tensor, positions_of: Sequence[torch.Tensor], top: BatchedTop,
        weights: torch.Tensor, z0: torch.Tensor, normalisers: torch.Tensor, means: torch.Tensor,
    ) -> CandidateChunk:
        """One chunk's padded tensors, its epoch-1 candidate logits and its residual terms R₀, μ₀."""
        ids, valid = pad_candidates([sets[text] for text in texts])
        width = max(len(positions_of[text]) for text in texts)
        positions = torch.stack([torch.cat([positions_of[text], positions_of[text][:1].expand(width - len(positions_of[text]))]) for text in texts])
        real = torch.stack([torch.arange(width, device=z0.device) < len(positions_of[text]) for text in texts])
        bias = top.output_bias[ids].masked_fill(~valid, float("-inf"))
        first_z = z0[positions]
        with torch.no_grad():
            weight = top.decoder_weight[ids]
            first_logits = torch.baddbmm(bias.unsqueeze(1), first_z, weight.transpose(1, 2))
            residual, mean = residual_from_totals(normalisers[positions], means[positions], first_logits, weight)
        return CandidateChunk(torch.tensor(texts, device=z0.device).unsqueeze(1), weight, bias, positions, weights[positions] * real, targets[positions], first_z, residual, mean)

    def gradients(self, top: BatchedTop, dense_at: DenseAt, tuned: list[torch.Tensor]) -> list[torch.Tensor]:
        """One candidate epoch's gradients: logits over each text's own candidates plus the residual logit.

        Each chunk stays in its (texts, positions) layout: a text's tuned rows are taken once and
        broadcast over its positions, rather than once per position.
        """
        grads = [torch.zeros_like(tensor) for tensor in tuned]
        for chunk in self.chunks:
            z = top.transformed(dense_at(chunk.positions, chunk.texts), chunk.texts)
            logits = torch.baddbmm(chunk.bias.unsqueeze(1), z, chunk.weight.transpose(1, 2))
            losses = candidate_cross_entropy(logits, residual_logit(z, chunk.z0, chunk.residual, chunk.mean), chunk.targets)
            chunk_grads = torch.autograd.grad((losses * chunk.weights).sum(), tuned)
            for accumulated, grad in zip(grads, chunk_grads):
                accumulated += grad
        return grads
