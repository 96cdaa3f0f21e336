"""The settings of a token-weight training run (the token-matching paper's SimCSE-learned weights): their
defaults, which the command line shows, and the hash that names a run's checkpoints. Kept apart from the
training code so that reading them imports no model library."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

TEMPERATURE = 0.05  # SimCSE's softmax temperature


@dataclass(frozen=True)
class TrainingConfig:
    """Everything that determines the learned weights (stored beside them)."""

    model: str
    steps: int = 150
    batch_size: int = 32
    learning_rate: float = 0.01
    seed: int = 0
    max_tokens: int = 32
    min_chars: int = 20
    temperature: float = TEMPERATURE
    checkpoint_every: int = 50

    def key(self) -> str:
        """A hash of the settings that shape the training path.

        ``steps`` is left out: batch order and dropout seeds do not depend on it, so step k of a short
        run equals step k of a long one, and a longer run can resume from a shorter run's checkpoint.
        """
        settings = {k: v for k, v in asdict(self).items() if k not in ("checkpoint_every", "steps")}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
