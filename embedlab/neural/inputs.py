"""Micro-tuning inputs of one text (neural-embeddings paper, Appendix A, Fig. 8–10).

* Fig. 9/10: periodic masking blueprints (k kept, m masked tokens, period P = k + m), each applied at
  every shift s < min(P, length): position j is masked where (j - s) % P >= k.
* Fig. 8: a text longer than the model's input is cut into sentence-packed chunks
  (:func:`embedlab.data.sentences.chunk_token_ids`); the rows of all chunks form one micro-tuning set.

Special tokens stay outside the periodic pattern: the pattern runs over a chunk's text tokens and
``[CLS]``/``[SEP]`` are added around each row, never masked, never labelled. Rows that mask nothing
carry no loss and are left out of the micro-tuning set.

Causal LMs (:func:`causal_text_inputs`) have no mask token and see only the left context, so nothing is
replaced in the input: each chunk is one row (after the tokenizer's BOS token where it has one) and the
blueprints decide which positions count in the next-token loss. A text token counts once for every
blueprint row that masks it (``label_weights``); every epoch's loss is the weighted mean over all rows,
as the masked path's is the mean over all rows' masked tokens (docs/neural.md, "Causal LMs").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from embedlab.data.sentences import chunk_token_ids
from embedlab.errors import InputError, InputTypeError
from embedlab.neural.head import IGNORE_LABEL

# Fig. 9's blueprints (k kept, m masked): every token is masked 1 + 1 + 2 + 3 = 7 times in all.
BLUEPRINTS: tuple[tuple[int, int], ...] = ((2, 1), (1, 1), (1, 2), (1, 3))

Row = tuple[list[int], list[int]]  # (input ids, labels) over a chunk's text tokens


def _periodic_rows(tokens: Sequence[int], keep: int, masked: int, shifts: int, mask_token_id: int) -> list[Row]:
    """Rows of one blueprint at shifts 0..shifts-1: masked positions carry the original token as label."""
    period = keep + masked
    rows = []
    for shift in range(shifts):
        is_masked = [(position - shift) % period >= keep for position in range(len(tokens))]
        inputs = [mask_token_id if hidden else token for token, hidden in zip(tokens, is_masked)]
        labels = [token if hidden else IGNORE_LABEL for token, hidden in zip(tokens, is_masked)]
        rows.append((inputs, labels))
    return rows


def blueprint_rows(tokens: Sequence[int], blueprints: Sequence[tuple[int, int]], mask_token_id: int) -> list[Row]:
    """Fig. 10 exactly: for each blueprint (k, m), P = k + m, every shift s < min(P, len): mask where (j - s) % P >= k.

    Returns (inputs, labels) pairs over the chunk's text tokens; labels are the original token at masked
    positions and ``IGNORE_LABEL`` elsewhere. Rows that mask nothing are kept here (Fig. 10 keeps them).
    """
    rows = []
    for keep, masked in blueprints:
        if keep < 0 or masked < 1:
            raise ValueError(f"masking blueprint {(keep, masked)}: need k >= 0 kept and m >= 1 masked tokens")
        rows.extend(_periodic_rows(tokens, keep, masked, min(keep + masked, len(tokens)), mask_token_id))
    return rows


def _masks_something(row: Row) -> bool:
    return any(label != IGNORE_LABEL for label in row[1])


def chunk_rows(chunk: Sequence[int], blueprints: Sequence[tuple[int, int]], mask_token_id: int) -> list[Row]:
    """The rows of one chunk that mask at least one token.

    Only a one-token chunk masks nothing under Fig. 10 (shift 0 keeps position 0); it gets the full
    period of shifts instead, so the chunk still has something to learn.
    """
    rows = [row for row in blueprint_rows(chunk, blueprints, mask_token_id) if _masks_something(row)]
    if rows:
        return rows
    return [
        row
        for keep, masked in blueprints
        for row in _periodic_rows(chunk, keep, masked, keep + masked, mask_token_id)
        if _masks_something(row)
    ]


@dataclass
class TextInputs:
    """The micro-tuning set of one text: padded rows with [CLS]/[SEP], labels only at masked tokens."""

    input_ids: torch.Tensor  # (rows, length)
    attention_mask: torch.Tensor  # (rows, length)
    labels: torch.Tensor  # (rows, length), IGNORE_LABEL where nothing is predicted
    chunks: list[list[int]]  # the text's chunks (token ids, no special tokens)
    label_weights: torch.Tensor | None = None  # (rows, length) causal LMs: how many blueprint rows count each position; None = 1

    @property
    def masked_positions(self) -> int:
        """How many positions carry a loss (what the batched path's groups are sized by)."""
        return int((self.labels != IGNORE_LABEL).sum())


def text_inputs(text: str, tokenizer, max_length: int, blueprints: Sequence[tuple[int, int]], where: str) -> TextInputs:
    """All micro-tuning inputs of ``text``: Fig. 10 rows of every sentence-packed chunk (Fig. 8).

    ``where`` names the text in error messages (e.g. ``"text 3"``).
    """
    def tokenize(piece: str) -> list[int]:
        # verbose=False: long texts are chunked here, so the tokenizer's length warning does not apply
        return tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"]

    if not isinstance(text, str):
        raise InputTypeError(f"{where}: expected a string, got {type(text).__name__}")
    chunks = [chunk for chunk in chunk_token_ids(text, tokenize, max_length - 2) if chunk]
    if not chunks:
        raise InputError(f"{where}: the text is empty (no tokens), a neural embedding needs at least one token")
    rows = [row for chunk in chunks for row in chunk_rows(chunk, blueprints, tokenizer.mask_token_id)]
    if not rows:
        raise InputError(f"{where}: no masking blueprint masks any token of this text")
    input_ids, attention = padded_inputs([inputs for inputs, _ in rows], tokenizer)
    length = input_ids.shape[1]  # labels sit under the text tokens: none at [CLS], [SEP] or padding
    labels = torch.tensor([[IGNORE_LABEL, *row_labels] + [IGNORE_LABEL] * (length - 1 - len(row_labels)) for _, row_labels in rows], dtype=torch.long)
    return TextInputs(input_ids, attention, labels, chunks)


def padded_inputs(sequences: Sequence[Sequence[int]], tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] ids [SEP]`` per sequence, right-padded: (input ids, attention mask).

    Used for the masked rows and, with a text's unmasked chunks, for the inputs of the hidden-layer
    variants (Appendix G).
    """
    # the rows are built as lists and converted once: a tensor per row (and the tokenizer's special-token
    # attributes read per row) cost a third as much as micro-tuning the text on an H200 (0.64 vs 1.77 ms)
    length = max(len(ids) for ids in sequences) + 2
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    input_ids = torch.tensor([[cls, *ids, sep] + [pad] * (length - 2 - len(ids)) for ids in sequences], dtype=torch.long)
    attention = torch.tensor([[1] * (len(ids) + 2) + [0] * (length - 2 - len(ids)) for ids in sequences], dtype=torch.long)
    return input_ids, attention


def causal_text_inputs(text: str, tokenizer, max_length: int, blueprints: Sequence[tuple[int, int]], where: str) -> TextInputs:
    """A causal LM's micro-tuning set of ``text``: one row per sentence-packed chunk, next-token labels.

    The label of row position i is the token at i + 1 (so a position's features predict its label, as
    at a masked position), kept where the blueprints select that text token; its weight is the number of
    blueprint rows (Fig. 10, all shifts) that mask it. A chunk's first token is predicted from the BOS
    token when the tokenizer has one, and is not predicted otherwise.
    """
    def tokenize(piece: str) -> list[int]:
        return tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"]

    if not isinstance(text, str):
        raise InputTypeError(f"{where}: expected a string, got {type(text).__name__}")
    prefix = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    chunks = [chunk for chunk in chunk_token_ids(text, tokenize, max_length - len(prefix)) if chunk]
    if not chunks:
        raise InputError(f"{where}: the text is empty (no tokens), a neural embedding needs at least one token")
    length = max(len(chunk) for chunk in chunks) + len(prefix)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(chunks), length), pad, dtype=torch.long)
    attention = torch.zeros((len(chunks), length), dtype=torch.long)
    labels = torch.full((len(chunks), length), IGNORE_LABEL, dtype=torch.long)
    weights = torch.zeros((len(chunks), length), dtype=torch.float32)
    for row, chunk in enumerate(chunks):
        input_ids[row, : len(prefix) + len(chunk)] = torch.tensor(prefix + list(chunk))
        attention[row, : len(prefix) + len(chunk)] = 1
        counts = [0] * len(chunk)
        for _, row_labels in chunk_rows(chunk, blueprints, mask_token_id=-1):
            for position, label in enumerate(row_labels):
                counts[position] += label != IGNORE_LABEL
        for position, count in enumerate(counts):
            predictor = len(prefix) + position - 1  # the row position whose output predicts this token
            if count and predictor >= 0:
                labels[row, predictor] = chunk[position]
                weights[row, predictor] = float(count)
    if not bool((labels != IGNORE_LABEL).any()):
        raise InputError(f"{where}: the text has one token and the tokenizer no BOS token, so no token can be predicted from its left context")
    return TextInputs(input_ids, attention, labels, chunks, weights)
