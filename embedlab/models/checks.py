"""A model file is input like a text file: checked before any vector is computed from it.

``transformers`` fills a tensor the checkpoint lacks with random values and only logs it ("newly
initialized" / "MISSING"); a vocabulary larger than the embedding table fails later as an unnamed
``IndexError``; a NaN weight gives NaN vectors. Each of these is one :class:`ModelFileError` here, naming
the file, the tensor and what is wrong (``embedlab`` exits 2 on it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from embedlab.errors import InputError

# Tensors an encoder checkpoint may lack without changing any vector embedlab computes: BERT's pooler
# (AutoModel adds one; a masked-LM checkpoint has none, and hidden states never pass through it).
UNUSED_PREFIXES = ("pooler.",)
_SHOWN = 4  # names listed in a message before "and N more"


class ModelFileError(InputError):
    """A model file (weights, GGUF, head, static table) that parses but cannot give correct vectors."""


@contextlib.contextmanager
def quiet_load_report() -> Iterator[None]:
    """Silence transformers' load report and progress bars while loading: what it reports (missing or
    mismatched tensors) is checked here and raised as one error instead."""
    from transformers.utils import logging as hf_logging

    previous = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)
        if bars:
            hf_logging.enable_progress_bar()


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def check_loading_report(info: dict, where: str) -> None:
    """Refuse what ``from_pretrained(..., output_loading_info=True)`` reports as filled in at random
    (missing tensors) or loaded with the wrong shape."""
    missing = sorted(key for key in info.get("missing_keys", ()) if not key.startswith(UNUSED_PREFIXES))
    if missing:
        raise ModelFileError(f"{where} lacks {len(missing)} tensor(s) the architecture needs ({_listed(missing)}); "
                             "transformers would fill them with random values")
    mismatched = [f"{item[0]} {tuple(item[1])} where the model needs {tuple(item[2])}"
                  for item in info.get("mismatched_keys", ()) if isinstance(item, (tuple, list)) and len(item) == 3]
    if mismatched:
        raise ModelFileError(f"{where}: tensor {_listed(mismatched)}")


def check_finite(tensors: Iterable[tuple[str, torch.Tensor]], where: str) -> None:
    """Refuse a floating-point tensor holding NaN or infinity, naming it."""
    for name, tensor in tensors:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ModelFileError(f"{where}: tensor {name} holds NaN or infinite values")


def tokenizer_rows(tokenizer) -> int:
    """Rows an embedding table needs for the tokenizer's own vocabulary. Added tokens are left out:
    transformers adds GPT-2's ``<|endoftext|>`` to some tokenizers read from GGUF, past the model's table."""
    return int(getattr(tokenizer, "vocab_size", None) or len(tokenizer))


def check_vocabulary_fits(tokenizer, rows: int, where: str, table: str = "embedding table") -> None:
    """Refuse a ``table`` of ``rows`` rows when the tokenizer gives ids beyond it."""
    needed = tokenizer_rows(tokenizer)
    if rows < needed:
        raise ModelFileError(f"{where}: the {table} has {rows} rows but the tokenizer gives ids up to {needed - 1} "
                             f"(a vocabulary of {needed}); the tokenizer and weights do not belong together")


def check_loaded_model(model: torch.nn.Module, info: dict, tokenizer, where: str) -> None:
    """Every check of a model just loaded by ``transformers``: nothing filled in at random, no tensor of
    the wrong shape, every weight finite, and an embedding row for every token id."""
    check_loading_report(info, where)
    check_finite(model.state_dict().items(), where)
    embeddings = model.get_input_embeddings()
    if embeddings is not None and hasattr(embeddings, "num_embeddings"):
        check_vocabulary_fits(tokenizer, int(embeddings.num_embeddings), where)
