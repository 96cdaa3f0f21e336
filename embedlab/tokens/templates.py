"""Prompt templates: the pooling paper's T0–T4 (§3.2.2, Table 1) and the prompts for models without a
mask token (decoder LLMs).

The target text replaces ``[X]``; every ``[MASK]`` becomes the model's own mask token. Template
pieces are tokenised separately from the text, so the text's own tokens are the same with and without
a template and the template's marked positions are known exactly, even when a user's text itself
contains the mask token's spelling.

Each template marks some of its positions (``TokenStates.template_mask``), which ``pool=mask`` averages:

* T0–T4 mark their ``[MASK]`` tokens and need a model with a mask token;
* ``prompteol`` (PromptEOL: ``This sentence : "[X]" means in one word:"``) marks nothing: the prompt
  squeezes the text into its next word, so the embedding is the last token's state (``pool=last``);
* ``echo`` (echo embeddings) holds the text twice and marks the second copy, whose tokens have seen the
  whole text even in a causal model: ``pool=mask`` is the mean over the second copy;
* ``metaeol`` (MetaEOL) is not one template but four meta-task prompts (:data:`METAEOL_PROMPTS`), each
  ending like PromptEOL; the pooled source runs all four and ``pool=last`` averages their last tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from embedlab.errors import InputError

TEMPLATES = {
    "T0": 'This sentence: "[X]" means [MASK].',
    "T1": 'This sentence: "[X]" means [MASK][MASK].',
    "T2": 'This sentence: "[X]" means "[MASK][MASK]" and is about [MASK].',
    "T3": 'This sentence from the paraphrase dictionary: "[X]" means "[MASK]", which is about [MASK].',
    "T4": 'This sentence from the dictionary: "[X]" means "[MASK]" and is about [MASK], which is a synonym for [MASK].',
}

# Prompts for models without a mask token. "[X*]" is a copy of the text that the template marks.
DECODER_TEMPLATES = {
    "prompteol": 'This sentence : "[X]" means in one word:"',
    "echo": "Rewrite the sentence: [X]\nRewritten sentence: [X*]",
}

# MetaEOL's four meta-tasks (text classification, sentiment, paraphrase, information extraction), each
# asking for the text's meaning in one word from another angle. Worded after the MetaEOL paper's prompts,
# not copied verbatim (we have no copy of the paper here).
METAEOL_PROMPTS = {
    "metaeol-classification": 'In this task, you are given a sentence. Choose one general category, such as education, '
                              'technology, health, business, environment, politics or culture, for this sentence : "[X]" '
                              'which fits in one word:"',
    "metaeol-sentiment": 'In this task, you are given a sentence. Decide whether its sentiment is positive, negative or '
                         'neutral. For this task, this sentence : "[X]" reflects the sentiment in one word:"',
    "metaeol-paraphrase": 'In this task, you are given a sentence and must find its core meaning so that it can be '
                          'paraphrased. For this task, this sentence : "[X]" means in one word:"',
    "metaeol-extraction": 'In this task, you are given a sentence and must name the most important entity or concept it '
                          'is about. For this task, this sentence : "[X]" is about in one word:"',
}

# Retrieval prompts for one side of an asymmetric search (the e5 and bge model families' own wording): the query
# side and the document side of a spec each name one (``query_template=e5-query,doc_template=e5-passage``).
ROLE_TEMPLATES = {
    "e5-query": "query: [X]",
    "e5-passage": "passage: [X]",
    "bge-query": "Represent this sentence for searching relevant passages: [X]",
}

MASK_TEMPLATES = tuple(TEMPLATES)
NO_MASK_TEMPLATES = (*DECODER_TEMPLATES, "metaeol")
TEMPLATE_NAMES = (*MASK_TEMPLATES, *NO_MASK_TEMPLATES)
NO_MASK_ALTERNATIVES = ("template=prompteol,pool=last (PromptEOL), template=metaeol,pool=last (MetaEOL), "
                        "template=echo,pool=mask (echo embeddings: mean over the second copy)")


@dataclass(frozen=True)
class Template:
    name: str
    text: str

    @property
    def num_masks(self) -> int:
        return self.text.count("[MASK]")

    @property
    def copies(self) -> int:
        """How many times the text appears in the prompt (2 for echo)."""
        return self.text.count("[X]") + self.text.count("[X*]")

    def _pieces(self) -> list[str]:
        """The template split around its slots; the slots themselves ([X], [X*], [MASK]) are kept as items."""
        pieces = [self.text]
        for slot in ("[X*]", "[X]", "[MASK]"):
            pieces = [part for piece in pieces for part in _split_keep(piece, slot)]
        return [piece for piece in pieces if piece]

    def overhead(self, tokenizer) -> int:
        """Tokens the template adds around the text's copies."""
        return len(self.wrap(tokenizer, [])[0])

    def wrap(self, tokenizer, text_ids: list[int]) -> tuple[list[int], list[int]]:
        """The prompt's token ids with ``text_ids`` in every text slot, and the marked positions in it."""
        if self.num_masks and tokenizer.mask_token_id is None:
            raise InputError(f"template {self.name} needs a model with a mask token; without one use {NO_MASK_ALTERNATIVES}")
        pieces = self._pieces()
        if "[MASK]" in pieces and "[X]" in pieces and pieces.index("[MASK]") < pieces.index("[X]"):
            raise InputError(f"template {self.name}: [MASK] must come after [X]")
        ids: list[int] = []
        marked: list[int] = []
        for piece in pieces:
            if piece == "[X]":
                ids.extend(text_ids)
            elif piece == "[X*]":
                marked.extend(range(len(ids), len(ids) + len(text_ids)))
                ids.extend(text_ids)
            elif piece == "[MASK]":
                marked.append(len(ids))
                ids.append(tokenizer.mask_token_id)
            else:
                ids.extend(tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"])
        return ids, marked


def role_template(value: str) -> Template | None:
    """The template a ``query_template=``/``doc_template=`` value names: ``none``, any built-in (the retrieval
    prompts above, T0–T4, prompteol, echo) or ``@FILE``, a user's template: the file's text (one line, with
    ``[X]`` where the text goes)."""
    if value.startswith("@"):
        from pathlib import Path

        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"template file {path}: {error.strerror if isinstance(error, OSError) else 'not valid UTF-8'}") from None
        if text.count("[X]") != 1 or "\n" in text:
            raise InputError(f"template file {path}: a template is one line holding [X] once, where the text goes (e.g. 'query: [X]')")
        return Template(value, text)
    if value in ROLE_TEMPLATES:
        return Template(value, ROLE_TEMPLATES[value])
    if value == "metaeol":
        raise InputError("metaeol is a set of four prompts, not one side's template; choose one template")
    try:
        return get_template(value)
    except InputError:
        raise InputError(f"unknown template {value!r}; choose none, {', '.join(ROLE_TEMPLATES)}, "
                         f"{', '.join(name for name in TEMPLATE_NAMES if name != 'metaeol')} or @FILE (a one-line template "
                         "with [X])") from None


def _split_keep(text: str, slot: str) -> list[str]:
    if text in ("[X*]", "[X]", "[MASK]"):
        return [text]
    parts = text.split(slot)
    out: list[str] = []
    for index, part in enumerate(parts):
        out.append(part)
        if index < len(parts) - 1:
            out.append(slot)
    return out


def get_template(name: str) -> Template | None:
    """The template called ``name`` (None for ``none``); ``metaeol`` is a set: see :func:`get_templates`."""
    if name == "none":
        return None
    if name in TEMPLATES:
        return Template(name, TEMPLATES[name])
    if name in DECODER_TEMPLATES:
        return Template(name, DECODER_TEMPLATES[name])
    if name in METAEOL_PROMPTS:
        return Template(name, METAEOL_PROMPTS[name])
    raise InputError(f"unknown template {name!r}; choose one of: none, {', '.join(TEMPLATE_NAMES)}")


def get_templates(name: str) -> tuple[Template, ...]:
    """The prompts a template option runs: one template, MetaEOL's four, or none (``()``)."""
    if name == "metaeol":
        return tuple(Template(key, text) for key, text in METAEOL_PROMPTS.items())
    template = get_template(name)
    return () if template is None else (template,)


def needs_mask_token(name: str) -> bool:
    return name in TEMPLATES
