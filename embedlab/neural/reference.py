"""The reference micro-tuning path: one text at a time with the real modules (neural-embeddings paper §2, Appendix B).

For every text, start from the original model, run ``epochs`` full-batch ``torch.optim.AdamW`` steps of
masked-token prediction over the text's inputs (:mod:`embedlab.neural.inputs`) and return the change of
each tuned 1-D parameter. It accepts any 1-D parameter names and computes logits at every position, as
the paper's reference implementation does; :mod:`embedlab.neural.batched` is checked against it.

Details the paper leaves open, following the reference implementation: all inputs of a text form one
batch per epoch (the paper's "single batch of no more than 12 inputs"; for multi-chunk texts still one
batch, so the order of inputs cannot matter); the model runs in eval mode (no dropout), so micro-tuning
is deterministic; AdamW uses torch's defaults except the learning rate. Blocks below the lowest tuned
one are frozen and run once (Appendix B), their hidden states reused in every epoch.

Other architectures (through their head adapter, :mod:`embedlab.neural.adapters`): with only head
vectors tuned the frozen model runs once and the real head modules every epoch; otherwise the whole
model runs every epoch. Causal LMs weight each position's next-token loss by its ``label_weights``.

With ``softmax="candidates"`` epochs after the first use the text's candidate set and residual logit
(:mod:`embedlab.neural.candidates`), computed here by definition from the full epoch-1 logits.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import torch

from embedlab.errors import InputError
from embedlab.neural.candidates import (
    candidate_cross_entropy,
    candidate_sets,
    residual_from_logits,
    residual_logit,
    top_ids,
)
from embedlab.neural.head import IGNORE_LABEL, MaskedLM
from embedlab.neural.inputs import TextInputs
from embedlab.neural.options import NeuralOptions, check_parameters


def text_seed(seed: int, text: str) -> int:
    """A per-text seed: a text's micro-tuning never depends on its neighbours or on batch order."""
    return (seed * 1_000_003 + zlib.crc32(text.encode("utf-8"))) % (2**31 - 1)


def _lowest_tuned_block(names: Sequence[str], num_layers: int) -> int:
    """Index of the lowest transformer block holding a tuned parameter (num_layers: head only; -1: embeddings)."""
    lowest = num_layers
    for name in names:
        if name.startswith("bert.embeddings."):
            return -1
        if name.startswith("bert.encoder.layer."):
            lowest = min(lowest, int(name.split(".")[3]))
        elif not name.startswith("cls."):
            raise InputError(f"neural: cannot micro-tune parameter {name!r} (not in the encoder, its embeddings or the head)")
    return lowest


def micro_tune_reference(masked_lm: MaskedLM, inputs: TextInputs, options: NeuralOptions, seed: int) -> list[torch.Tensor]:
    """Micro-tune one text with the real modules and ``torch.optim.AdamW``; returns each layer's weight change.

    Frozen blocks below the lowest tuned one run once (Appendix B); every epoch runs the remaining
    blocks and the head over all positions (logits everywhere, as the reference implementation does).
    The tuned parameters are restored to their original values afterwards.
    """
    model = masked_lm.model
    parameters = check_parameters(model, options.params)
    originals = {name: parameter.detach().clone() for name, parameter in parameters.items()}
    bert = masked_lm.layout is None or masked_lm.layout.family == "BERT"
    lowest = _lowest_tuned_block(options.params, masked_lm.num_layers) if bert else 0
    with torch.random.fork_rng(devices=[]):  # a per-text seed without disturbing the caller's random state
        torch.manual_seed(seed)
        try:
            if not bert:
                return _adapter_steps(masked_lm, parameters, originals, inputs, options)
            return _reference_steps(model, parameters, originals, lowest, masked_lm.num_layers, inputs, options)
        finally:
            with torch.no_grad():
                for name, parameter in parameters.items():
                    parameter.copy_(originals[name])
                    parameter.requires_grad_(False)
                    parameter.grad = None


def _reference_steps(
    model: torch.nn.Module,
    parameters: dict[str, torch.nn.Parameter],
    originals: dict[str, torch.Tensor],
    lowest: int,
    num_layers: int,
    inputs: TextInputs,
    options: NeuralOptions,
) -> list[torch.Tensor]:
    """The AdamW steps of :func:`micro_tune_reference`; leaves the tuned parameters changed."""
    from transformers.masking_utils import create_bidirectional_mask

    for parameter in parameters.values():
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(list(parameters.values()), lr=options.learning_rate)
    labels = inputs.labels
    with torch.no_grad():
        if lowest >= 0:
            outputs = model.bert(input_ids=inputs.input_ids, attention_mask=inputs.attention_mask, output_hidden_states=True)
            frozen = outputs.hidden_states[lowest]
            embeds = outputs.hidden_states[0]
    candidates: _TextCandidates | None = None
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
        if candidates is not None:
            loss = candidates.loss(hidden)
        else:
            logits = model.cls(hidden)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=IGNORE_LABEL)
            if options.softmax == "candidates":
                candidates = _TextCandidates(model, hidden, logits, labels, options.candidates)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return [(parameters[name].detach() - originals[name]).clone() for name in options.params]


def _adapter_steps(
    masked_lm: MaskedLM, parameters: dict[str, torch.nn.Parameter], originals: dict[str, torch.Tensor], inputs: TextInputs, options: NeuralOptions
) -> list[torch.Tensor]:
    """The AdamW steps for any architecture with a head adapter; leaves the tuned parameters changed.

    Head vectors only: the features run once and the head modules every epoch. Anything else: the
    whole model every epoch (no frozen-prefix shortcut; the reference is about being plainly right).
    """
    model, layout = masked_lm.model, masked_lm.layout
    for parameter in parameters.values():
        parameter.requires_grad_(True)
    optimizer = torch.optim.AdamW(list(parameters.values()), lr=options.learning_rate)
    head_only = all(name in layout.head_tensors for name in options.params)
    labels, weights = inputs.labels, inputs.label_weights
    fixed = None
    if head_only:
        with torch.no_grad():
            fixed = layout.features(model, inputs.input_ids, inputs.attention_mask)
    candidates: _TextCandidates | None = None
    for _ in range(options.epochs):
        hidden = fixed if fixed is not None else layout.features(model, inputs.input_ids, inputs.attention_mask)
        if candidates is not None:
            loss = candidates.loss(hidden)
        else:
            logits = layout.logits(model, hidden)
            losses = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=IGNORE_LABEL, reduction="none")
            loss = losses.sum() / (labels != IGNORE_LABEL).sum() if weights is None else (losses * weights.view(-1)).sum() / weights.sum()
            if options.softmax == "candidates":
                candidates = _TextCandidates(model, hidden, logits, labels, options.candidates, layout, weights)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return [(parameters[name].detach() - originals[name]).clone() for name in options.params]


class _TextCandidates:
    """One text's candidate set and residual logits, fixed from epoch 1 (its decoder inputs ``z₀`` and logits)."""

    def __init__(
        self, model: torch.nn.Module, hidden: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, count: int, layout=None,
        label_weights: torch.Tensor | None = None,
    ) -> None:
        if layout is None:
            predictions = model.cls.predictions
            self.transform = predictions.transform
            self.weight = predictions.decoder.weight.detach()
            output_bias = predictions.bias.detach()
        else:
            self.transform = lambda features: layout.transform(model, features)
            self.weight = model.get_output_embeddings().weight.detach()
            bias = getattr(model.get_output_embeddings(), "bias", None)
            output_bias = bias.detach() if bias is not None else torch.zeros(self.weight.shape[0])
        self.masked = labels != IGNORE_LABEL
        self.position_weights = label_weights[self.masked] if label_weights is not None else None
        with torch.no_grad():
            self.z0 = self.transform(hidden)[self.masked]
            first_logits = logits.detach()[self.masked]
            chosen = labels[self.masked]
            sets, self.targets = candidate_sets(top_ids(first_logits, count), chosen, torch.zeros_like(chosen), 1)
            self.ids = sets[0]
            self.residual, self.mean = residual_from_logits(first_logits, self.ids, self.weight)
        self.candidate_weight = self.weight[self.ids]
        self.candidate_bias = output_bias[self.ids]

    def loss(self, hidden: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over the masked positions with logits over the candidates plus the residual."""
        z = self.transform(hidden)[self.masked]
        logits = z @ self.candidate_weight.T + self.candidate_bias
        losses = candidate_cross_entropy(logits, residual_logit(z, self.z0, self.residual, self.mean), self.targets)
        if self.position_weights is None:
            return losses.mean()
        return (losses * self.position_weights).sum() / self.position_weights.sum()
