"""SimCSE token-weight training (embedlab.training.token_weights): the loss goes down on held-out dropout
noise, runs are seeded and resumable, and batch order does not depend on the number of steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedlab.data.wikitext import wikitext2_sentences
from embedlab.training.token_weight_settings import TrainingConfig
from embedlab.training.token_weights import batch_order, mean_loss, train_token_weights


@pytest.fixture(scope="module")
def small_corpus() -> list[str]:
    return wikitext2_sentences("valid", min_chars=40)[:24]


def test_training_decreases_loss(minilm, small_corpus, tmp_path, monkeypatch):
    """The loss on held-out dropout noise goes down, only the corpus's tokens move, and the model is left in
    eval mode. A private cache root for the checkpoints, but the in-memory models are kept (no memo clear as in
    ``isolated_cache``): training reuses the model already in memory (the session's ``minilm`` unless another
    test cleared the memos) instead of loading it again, so the eval-mode check is then about the trained model."""
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))
    config = TrainingConfig(model="minilm", steps=3, batch_size=8, learning_rate=0.2, seed=0, max_tokens=24)
    batches = [small_corpus[start : start + 8] for start in range(0, 24, 8)]
    uniform = np.ones(len(minilm.tokenizer), dtype=np.float32)
    # held-out dropout noise (seeds 1000+), not the noise the training steps saw
    before = mean_loss(minilm, uniform, batches, seed=1000, max_tokens=24)
    weights = train_token_weights(config, tmp_path / "w.safetensors", sentences=small_corpus, show_progress_bar=False)
    after = mean_loss(minilm, weights, batches, seed=1000, max_tokens=24)
    assert after < before
    assert weights.dtype == np.float32 and weights.shape == (len(minilm.tokenizer),)
    encoded = minilm.tokenizer(small_corpus, truncation=True, max_length=24)["input_ids"]
    seen = np.unique(np.concatenate([np.asarray(ids) for ids in encoded]))
    content = np.setdiff1d(seen, minilm.tokenizer.all_special_ids)
    assert not np.allclose(weights[content], 1.0)  # tokens of the corpus moved
    unseen = np.setdiff1d(np.arange(len(minilm.tokenizer)), seen)
    np.testing.assert_allclose(weights[unseen], 1.0, atol=1e-6)  # tokens never seen keep w0 = 1
    assert not minilm.model.training  # dropout switched off again for inference


@pytest.mark.crosspath
def test_seeded_and_resumable(small_corpus, tmp_path, isolated_cache):
    def config(steps: int) -> TrainingConfig:
        return TrainingConfig(model="minilm", steps=steps, batch_size=4, learning_rate=0.1, max_tokens=16)

    whole = train_token_weights(config(3), tmp_path / "a.safetensors", sentences=small_corpus)
    # one step, then a longer run that picks up from that run's checkpoint at step 1
    train_token_weights(config(1), tmp_path / "b.safetensors", sentences=small_corpus)
    resumed = train_token_weights(config(3), tmp_path / "b.safetensors", sentences=small_corpus)
    assert json.loads((tmp_path / "b.json").read_text())["resumed_from_step"] == 1
    # bit-identical by construction: the same batches in the same order, the optimiser's float32 state stored exactly
    np.testing.assert_array_equal(resumed, whole)


def test_batch_order_shares_prefix():
    long, short = batch_order(100, 10, 8, seed=3), batch_order(100, 4, 8, seed=3)
    np.testing.assert_array_equal(long[:4], short)
    with pytest.raises(ValueError, match="batch_size"):
        batch_order(5, 1, 8, seed=0)
