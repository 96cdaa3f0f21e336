"""Fixtures for the pooling stages: hand-made token states, no model needed."""

import numpy as np
import pytest

from embedlab.tokens.entry import TokenStates


def _token_states(ids, chunk_ids=None, template_mask=None, layers=2, seed=0) -> TokenStates:
    ids = np.asarray(ids, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return TokenStates(
        token_ids=ids,
        states=rng.normal(size=(layers, len(ids), 3)).astype(np.float32),
        chunk_ids=np.zeros(len(ids), np.int32) if chunk_ids is None else np.asarray(chunk_ids, np.int32),
        template_mask=np.zeros(len(ids), bool) if template_mask is None else np.asarray(template_mask, bool),
    )


@pytest.fixture
def make_states():
    """``make_states(ids, chunk_ids=None, template_mask=None, layers=2, seed=0)``: random states of 3 dimensions."""
    return _token_states
