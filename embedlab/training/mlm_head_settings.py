"""The settings of a masked-LM head training run (`embedlab mlm-head train`): their defaults, which the
command line shows, stored in a trained head's metadata and checked on resume. Kept apart from the
training code so that reading them imports no model library."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass
class HeadTrainingConfig:
    """Everything that determines a trained head (stored in its metadata and checked on resume)."""

    model: str
    seed: int = 0
    block_tokens: int = 128
    train_tokens: int = 600_000
    valid_tokens: int = 100_000
    epochs: int = 6
    batch_size: int = 256
    learning_rate: float = 2e-3
    weight_decay: float = 0.01
    threads: int = 2

    def as_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)
