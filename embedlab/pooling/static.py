"""Static token models of the pooling paper: random embeddings (§3.2.5) and Avg (§3.2.3, §4.3).

* Random: one N(0, std²) vector per vocabulary token, of the model's width, from one seed.
* Avg: each token's vector averaged over all its contexts in the reference corpus, for every layer
  (-1…L). The paper used WikiText-103; the shared data has WikiText-2 train, used here. Each paragraph
  is one context (sentence-packed chunks when it exceeds the model's input). A vocabulary token that
  never occurs in the corpus gets its vector from the one context ``[CLS] token [SEP]``, so that every
  token has a vector. Tables are computed once, cached in the checksummed ``ArrayStore("static")`` and
  kept in memory for the process (the most recent model's).
* BERT+Avg (Eq. 10): v = (1 − w)·v_model + w·v_Avg per token, same layer(s); w may be negative.
* Distilled, as model2vec distils (not in the paper, compared with it in docs/static.md): each vocabulary
  token alone in the model's special-token frame ``[CLS] t [SEP]``, the last layer mean-pooled over those
  positions — one model run over the vocabulary instead of over a corpus. (model2vec then reduces the
  width with PCA and weights tokens by Zipf rank; here those are the pipeline's own post-processing and
  token weights.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from embedlab.data.wikitext import wikitext2_paragraphs
from embedlab.errors import InputError
from embedlab.models.loading import LoadedModel
from embedlab.runtime.cache.arrays import ArrayStore
from embedlab.runtime.memo import memo
from embedlab.runtime.progress import progress_bar
from embedlab.tokens.store import TokenStateStore


_AVG_TABLES = memo("avg tables", maxsize=1)
_RANDOM_TABLES = memo("random token tables", maxsize=2)
_DISTILLED_TABLES = memo("distilled token tables", maxsize=1)


def random_token_table(vocab_size: int, dimension: int, seed: int = 0, std: float = 0.1) -> np.ndarray:
    """(vocab_size, dimension) float32 table of N(0, std²) vectors, fixed by ``seed``."""
    return np.random.default_rng(seed).normal(0.0, std, size=(vocab_size, dimension)).astype(np.float32)


def context_averaged_tables(
    model: LoadedModel,
    contexts: Sequence[str],
    batch_size: int = 32,
    block_size: int = 512,
    show_progress_bar: bool | None = None,
    fill_unseen: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(L+2, V, d) per-layer average of every token's vectors over ``contexts``, and the (V,) counts.

    With ``fill_unseen`` (the default) tokens absent from ``contexts`` get their isolated-context
    vectors (a model run over the rest of the vocabulary); without it their rows stay zero.
    """
    vocab_size = len(model.tokenizer)
    layers = model.num_layers + 2
    sums = torch.zeros((layers, vocab_size, model.hidden_size), dtype=torch.float64)
    counts = torch.zeros(vocab_size, dtype=torch.int64)
    store = TokenStateStore(model, use_disk_cache=False, memory_limit_bytes=0)
    blocks = range(0, len(contexts), block_size)
    # None: drawn only on a terminal (or when bars are forced), never under --quiet
    for start in progress_bar(blocks, desc="Avg static tables", show=show_progress_bar):
        for states in store.compute(contexts[start : start + block_size], batch_size=batch_size, show_progress_bar=False):
            ids = torch.from_numpy(states.token_ids)
            counts.index_add_(0, ids, torch.ones_like(ids))
            vectors = torch.from_numpy(states.states).double()
            for layer in range(layers):
                sums[layer].index_add_(0, ids, vectors[layer])
    unseen = torch.nonzero(counts == 0).flatten().tolist()
    if unseen and fill_unseen:
        sums[:, unseen] = isolated_token_states(model, unseen).double()
    tables = (sums / counts.clamp(min=1)[None, :, None].double()).float().numpy()
    return tables, counts.numpy()


@torch.inference_mode()
def isolated_token_states(model: LoadedModel, token_ids: list[int], batch_size: int = 256) -> torch.Tensor:
    """(L+2, len(token_ids), d): each token's vectors in the one-token context [CLS] t [SEP]."""
    encoder = model.model
    embed = encoder.get_input_embeddings()
    frame = model.with_special_tokens([-1])
    position = frame.index(-1)
    out = torch.zeros((model.num_layers + 2, len(token_ids), model.hidden_size))
    for start in range(0, len(token_ids), batch_size):
        batch = torch.tensor(token_ids[start : start + batch_size])
        input_ids = torch.tensor(frame).repeat(len(batch), 1)
        input_ids[:, position] = batch
        input_ids = input_ids.to(model.device)
        hidden = encoder(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True).hidden_states
        stacked = torch.stack([embed(input_ids), *hidden], dim=0)[:, :, position].float().cpu()
        out[:, start : start + len(batch)] = stacked
    return out


def _corpus_key(contexts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for context in contexts:
        digest.update(context.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()[:16]


def model_random_table(model: LoadedModel, seed: int, std: float, dim: int | None = None) -> np.ndarray:
    """The random token table of ``model``'s vocabulary and width (or ``dim``), shared by every method that
    asks (read-only)."""
    width = model.hidden_size if dim is None else dim

    def build() -> np.ndarray:
        table = random_token_table(len(model.tokenizer), width, seed, std)
        table.flags.writeable = False
        return table

    return _RANDOM_TABLES.get((model.fingerprint, seed, std, width), build)


def avg_tables(model: LoadedModel, contexts: Sequence[str] | None = None, show_progress_bar: bool | None = None) -> np.ndarray:
    """The cached (L+2, V, d) Avg tables for ``model`` over ``contexts`` (default: WikiText-2 train), read-only."""
    embedding_width = int(model.model.get_input_embeddings().weight.shape[1])
    if embedding_width != model.hidden_size:  # the tables stack the input embeddings (layer -1) with every layer's states
        raise InputError(
            f"avg: model {model.name!r} has input embeddings of width {embedding_width} but hidden states of width "
            f"{model.hidden_size} (factorised embeddings, as in ALBERT and ELECTRA); the Avg tables need one width"
        )
    if contexts is None:
        contexts = wikitext2_paragraphs("train", unk_token=model.tokenizer.unk_token or "<unk>")
    key = f"{model.fingerprint}-{_corpus_key(contexts)}-avg-tables"

    def load_or_compute() -> np.ndarray:
        tables = ArrayStore("static").get(key, lambda: context_averaged_tables(model, contexts, show_progress_bar=show_progress_bar)[0])
        tables.flags.writeable = False
        return tables

    return _AVG_TABLES.get(key, load_or_compute)


@torch.inference_mode()
def single_token_table(model: LoadedModel, batch_size: int = 256, show_progress_bar: bool | None = None) -> np.ndarray:
    """(V, d) float32: every vocabulary token run alone in the special-token frame, the last layer averaged
    over all the frame's positions (model2vec's mean-pooled distillation)."""
    encoder = model.model
    frame = model.with_special_tokens([-1])
    position = frame.index(-1)
    vocabulary = len(model.tokenizer)
    table = np.zeros((vocabulary, model.hidden_size), dtype=np.float32)
    for start in progress_bar(range(0, vocabulary, batch_size), desc="distilling the vocabulary",
                              show=show_progress_bar):
        batch = torch.arange(start, min(start + batch_size, vocabulary))
        input_ids = torch.tensor(frame).repeat(len(batch), 1)
        input_ids[:, position] = batch
        input_ids = input_ids.to(model.device)
        hidden = encoder(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).last_hidden_state
        table[start : start + len(batch)] = hidden.mean(dim=1).float().cpu().numpy()
    return table


def distilled_table(model: LoadedModel, show_progress_bar: bool | None = None) -> np.ndarray:
    """The cached (V, d) :func:`single_token_table` of ``model``, read-only."""
    key = f"{model.fingerprint}-single-token-mean-last"

    def load_or_compute() -> np.ndarray:
        table = ArrayStore("static").get(key, lambda: single_token_table(model, show_progress_bar=show_progress_bar))
        table.flags.writeable = False
        return table

    return _DISTILLED_TABLES.get(key, load_or_compute)
