"""Prompt templates T0–T4 of the pooling paper (§3.2.2, Table 1).

The target text replaces ``[X]``; every ``[MASK]`` becomes the model's own mask token. Template
pieces are tokenised separately from the text so that the template's mask positions are known
exactly, even when a user's text itself contains the mask token's spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

TEMPLATES = {
    "T0": 'This sentence: "[X]" means [MASK].',
    "T1": 'This sentence: "[X]" means [MASK][MASK].',
    "T2": 'This sentence: "[X]" means "[MASK][MASK]" and is about [MASK].',
    "T3": 'This sentence from the paraphrase dictionary: "[X]" means "[MASK]", which is about [MASK].',
    "T4": 'This sentence from the dictionary: "[X]" means "[MASK]" and is about [MASK], which is a synonym for [MASK].',
}


@dataclass(frozen=True)
class Template:
    name: str
    text: str

    @property
    def num_masks(self) -> int:
        return self.text.count("[MASK]")

    def token_pieces(self, tokenizer) -> tuple[list[int], list[int], list[int]]:
        """Token ids before the text, after the text, and the mask positions within the latter."""
        before, after = self.text.split("[X]")
        if "[MASK]" in before:
            raise ValueError(f"template {self.name}: [MASK] must come after [X]")
        prefix = list(tokenizer(before, add_special_tokens=False)["input_ids"])
        suffix: list[int] = []
        mask_positions: list[int] = []
        pieces = after.split("[MASK]")
        for index, piece in enumerate(pieces):
            if piece:
                suffix.extend(tokenizer(piece, add_special_tokens=False)["input_ids"])
            if index < len(pieces) - 1:
                mask_positions.append(len(suffix))
                suffix.append(tokenizer.mask_token_id)
        if tokenizer.mask_token_id is None:
            raise ValueError(f"template {self.name} needs a model with a mask token")
        return prefix, suffix, mask_positions


def get_template(name: str) -> Template | None:
    if name == "none":
        return None
    if name not in TEMPLATES:
        raise ValueError(f"unknown template {name!r}; choose one of: none, {', '.join(TEMPLATES)}")
    return Template(name, TEMPLATES[name])
