"""The model run: texts → model inputs (sequences) → length batches → each text's token states.

A text longer than the model's input is split into sentence-packed chunks (neural-embeddings paper,
Appendix A); each chunk is run with its own special tokens and the chunks' token states are
concatenated, so nothing is truncated unless the caller asks for it: ``max_tokens=N`` keeps each text's
first N model-input tokens (special tokens included), what sentence-transformers' ``max_seq_length``
does (the pooled option ``truncate=N``).

Encoders and decoders run the same way. "Special tokens" are whatever the model's own tokenizer puts
around one sequence (:attr:`LoadedModel.special_frame`): [CLS] … [SEP] for BERT, <s> … </s> for RoBERTa,
a BOS token for Llama-2 or Gemma, nothing at all for GPT-2 and SmolLM2 (their tokenizers add none, and
their models were trained so). Each chunk of a long text gets its own frame, so a decoder's chunk starts
with its own BOS where the tokenizer adds one. Batches are padded on the right with an attention mask: a
causal model's real tokens come before the padding and never attend to it, and their position ids start
at 0 as they would alone, so a text's states do not depend on the batch it ran in, for either kind
(tests/tokens/test_decoder_states.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from embedlab.data.sentences import chunk_token_ids
from embedlab.errors import InputError
from embedlab.models.loading import LoadedModel
from embedlab.runtime.progress import progress_bar
from embedlab.runtime.streams import ordered_map, stream_count
from embedlab.tokens.entry import TokenStates
from embedlab.tokens.templates import Template

# A batch holds at most ``batch_size`` sequences, and its rows × width² (each attention head's scores) stay
# within ``batch_size × BATCH_WIDTH²``: rows of up to 128 tokens batch as before, 256-token windows 8 at a
# time, 512-token windows 2 at a time. Attention memory grows with rows × width² (one MiniLM forward of 32
# windows of 512 tokens took 525 MB more peak memory here, 8 of them 215 MB), so without this bound a
# corpus run's peak was set by whichever slice held the most long texts, and kept rising with the corpus.
BATCH_WIDTH = 128


def length_batches(lengths: Sequence[int], batch_size: int, width: int = BATCH_WIDTH) -> list[list[int]]:
    """Positions of ``lengths`` in batches, longest first: at most ``batch_size`` rows each, and rows ×
    (longest length)² within ``batch_size × width²`` (a longer sequence still gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda position: -lengths[position])
    budget = batch_size * width * width
    batches: list[list[int]] = []
    for position in order:
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * lengths[batches[-1][0]] ** 2 <= budget:
            batches[-1].append(position)
        else:
            batches.append([position])
    return batches


@dataclass
class ModelSequence:
    """One model input: a text's chunk with its special tokens (and template), and the positions the template marks."""

    text_index: int
    chunk_index: int
    input_ids: list[int]
    template_positions: list[int]


def check_max_tokens(model: LoadedModel, max_tokens: int | None) -> None:
    """A cut longer than the model's input cannot run as one sequence: refuse it, naming the limit."""
    if max_tokens is not None and not 0 < max_tokens <= model.max_length:
        raise InputError(f"truncate={max_tokens}: {model.name} takes 1 to {model.max_length} input tokens "
                         "(without truncate, long texts are split into sentence-packed chunks)")


def text_sequences(model: LoadedModel, text_index: int, text: str, token_ids: list[int], template: Template | None,
                   max_tokens: int | None = None) -> list[ModelSequence]:
    """The model inputs of one text: one sequence, one per sentence-packed chunk, or (``max_tokens``) the
    text cut to the sequence whose input, special tokens and template included, is ``max_tokens`` long."""
    tokenizer = model.tokenizer
    frame_before, frame_after = model.special_frame
    limit = model.max_length if max_tokens is None else max_tokens
    overhead, copies = (template.overhead(tokenizer), template.copies) if template is not None else (0, 1)
    budget = (limit - len(frame_before) - len(frame_after) - overhead) // copies  # echo holds each chunk twice
    if budget < 1:
        what = f"template {template.name} and " if template is not None else ""
        raise InputError(f"{'truncate' if max_tokens is not None else 'the model input'}={limit}: {what}the "
                         f"{len(frame_before) + len(frame_after)} special token(s) {model.name} adds leave no room for "
                         "text; cut at more tokens")
    if len(token_ids) <= budget:
        chunks = [token_ids]
    elif max_tokens is not None:
        chunks = [token_ids[:budget]]
    else:
        # verbose=False: long texts are chunked here, so the tokenizer's length warning does not apply
        def tokenize(piece: str) -> list[int]:
            return list(tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"])

        chunks = chunk_token_ids(text, tokenize, budget)
    sequences = []
    for chunk_index, chunk in enumerate(chunks):
        prompt, marked = template.wrap(tokenizer, chunk) if template is not None else (chunk, [])
        input_ids = model.with_special_tokens(prompt)
        sequences.append(ModelSequence(text_index, chunk_index, input_ids, [len(frame_before) + position for position in marked]))
    return sequences


def assemble(parts: list[tuple[ModelSequence, np.ndarray]], layers: tuple[int, ...]) -> TokenStates:
    """One text's token states (of ``layers``) from its chunks' outputs, in chunk order."""
    parts = sorted(parts, key=lambda part: part[0].chunk_index)
    masks = []
    for sequence, _ in parts:
        mask = np.zeros(len(sequence.input_ids), dtype=bool)
        mask[sequence.template_positions] = True
        masks.append(mask)
    return TokenStates(
        token_ids=np.concatenate([np.asarray(sequence.input_ids, dtype=np.int64) for sequence, _ in parts]),
        states=parts[0][1] if len(parts) == 1 else np.concatenate([states for _, states in parts], axis=1),
        chunk_ids=np.concatenate([np.full(len(sequence.input_ids), sequence.chunk_index, dtype=np.int32) for sequence, _ in parts]),
        template_mask=np.concatenate(masks),
        layers=layers,
    )


def _padded(batch: list[ModelSequence], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids padded on the right, and the attention mask, of one batch."""
    width = max(len(sequence.input_ids) for sequence in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, sequence in enumerate(batch):
        input_ids[row, : len(sequence.input_ids)] = torch.tensor(sequence.input_ids)
        attention[row, : len(sequence.input_ids)] = 1
    return input_ids.to(device), attention.to(device)


def _batch_outputs(model: LoadedModel, batch: list[ModelSequence], layers: tuple[int, ...]) -> list[np.ndarray]:
    """One batch's (b, width, d) float32 states of each of ``layers``."""
    if not batch[0].input_ids:  # longest first: only empty texts of a model that adds no token (no forward
        # pass has a width of 0); they keep empty states, and pooling names the text
        return [np.empty((len(batch), 0, model.hidden_size), np.float32) for _ in layers]
    input_ids, attention = _padded(batch, model.tokenizer.pad_token_id or 0, model.device)
    # a decoder would fill a key/value cache for generation on every forward pass; states need none
    no_kv_cache = {"use_cache": False} if model.is_decoder else {}
    hidden = model.model(input_ids=input_ids, attention_mask=attention, output_hidden_states=True, **no_kv_cache).hidden_states
    embed = model.model.get_input_embeddings()
    outputs = [embed(input_ids) if layer == -1 else hidden[layer] for layer in layers]  # each (b, width, d)
    return [output.float().cpu().numpy() for output in outputs]


def _sequence_states(batch: list[ModelSequence], outputs: list[np.ndarray]) -> Iterator[np.ndarray]:
    """Each sequence's (k, length, d) states of a batch's outputs, in batch order."""
    for row, sequence in enumerate(batch):
        # one copy per sequence, straight into its own (k, length, d) array
        length = len(sequence.input_ids)
        states = np.empty((len(outputs), length, outputs[0].shape[-1]), dtype=np.float32)
        for index, output in enumerate(outputs):
            states[index] = output[row, :length]
        yield states


@torch.inference_mode()
def run_model(
    model: LoadedModel,
    texts: Sequence[str],
    template: Template | None,
    batch_size: int,
    show_progress_bar: bool | None,
    layers: tuple[int, ...],
    max_tokens: int | None = None,
) -> Iterator[tuple[int, TokenStates]]:
    """Run the model over all texts' sequences, longest first; yield ``(text index, states of layers)`` as
    each text completes (the other layers of a batch are dropped as soon as it is done)."""
    encoded = model.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    sequences = [
        sequence for index, (text, ids) in enumerate(zip(texts, encoded))
        for sequence in text_sequences(model, index, text, list(ids), template, max_tokens)
    ]
    remaining = [0] * len(texts)
    for sequence in sequences:
        remaining[sequence.text_index] += 1
    done: list[list[tuple[ModelSequence, np.ndarray]]] = [[] for _ in texts]
    for sequence, states in run_sequences(model, sequences, batch_size, show_progress_bar, layers):
        done[sequence.text_index].append((sequence, states))
        remaining[sequence.text_index] -= 1
        if remaining[sequence.text_index] == 0:
            yield sequence.text_index, assemble(done[sequence.text_index], layers)
            done[sequence.text_index] = []


@torch.inference_mode()
def run_sequences(model: LoadedModel, sequences: Sequence[ModelSequence], batch_size: int,
                  show_progress_bar: bool | None, layers: tuple[int, ...]) -> Iterator[tuple[ModelSequence, np.ndarray]]:
    """Each sequence with its (len(layers), length, d) float32 states, batched longest first; what is not
    yielded is dropped as soon as its batch is done (a long text streams through
    :mod:`embedlab.pooling.long_texts` a group of chunks at a time). On a CPU, several batches run one per
    core (:mod:`embedlab.runtime.streams`); a lone batch runs on the calling thread with every core."""
    batches = [[sequences[position] for position in positions]
               for positions in length_batches([len(sequence.input_ids) for sequence in sequences], batch_size)]
    # one batch per core only when there are several: a lone batch (a small call) runs on this thread with
    # torch's intra-op threads, so it still has every core
    outputs = ordered_map(lambda batch: _batch_outputs(model, batch, layers), batches, min(stream_count(model.device), len(batches)))
    for batch, batch_outputs in zip(progress_bar(batches, desc="token states", disable=not show_progress_bar), outputs):
        yield from zip(batch, _sequence_states(batch, batch_outputs))
