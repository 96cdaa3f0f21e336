"""Negating a sentence for the ``neg`` check of ``alignsim:@FILE`` (our own check, not the paper's criterion 4).

The negation goes where English grammar puts it, found from spaCy's dependency parse of the sentence
(``en_core_web_sm``, the pipeline whose tagger the other perturbations use, here with its parser):

* the main verb (the parse's root) has a finite auxiliary before it (``have finished``, ``can swim``, ``was
  dispatched``): ``not`` after the first one (``have not finished``);
* the root is itself a finite auxiliary, a copula (``is happy``): ``not`` after it;
* a question puts the auxiliary before its subject (``Is it raining?``): ``not`` after the subject
  (``Is it not raining?``);
* the root is a finite main verb without an auxiliary (``announced``): do-support, the verb replaced by
  ``did``/``does``/``do not`` + its WordNet base form (``did not announce``).

A sentence whose root already has a negation, whose root is no finite verb (a fragment, a headline, an
imperative) or whose verb has no WordNet base form is not negated: the caller skips it and counts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from embedlab.evaluation.alignsim import lexicon
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.memo import cached

FINITE_TAGS = frozenset({"VBZ", "VBP", "VBD", "MD"})
DO_SUPPORT = {"VBZ": "does", "VBP": "do", "VBD": "did"}
_AUXILIARY = ("aux", "auxpass")
_SUBJECT = ("nsubj", "nsubjpass", "expl", "csubj")


@cached("alignsim.parser", maxsize=1)
def parser():
    """spaCy's small English pipeline with its parser (no NER, no lemmatizer: base forms come from WordNet)."""
    try:
        import spacy
    except ImportError as error:
        raise MissingExtraError(lexicon.ALIGNSIM_EXTRA, "the negation check's parse (spaCy)") from error
    try:
        return spacy.load(lexicon.SPACY_PACKAGE, exclude=["ner", "lemmatizer", "senter"])
    except OSError as error:
        raise MissingExtraError(lexicon.ALIGNSIM_EXTRA, f"the negation check's parser (spaCy model {lexicon.SPACY_PACKAGE!r})") from error


@dataclass(frozen=True)
class ParsedToken:
    """One token of a parsed sentence: text, the whitespace after it, tags, its dependency and head."""

    text: str
    whitespace: str
    pos: str
    tag: str
    dep: str
    head: int  # index of the head token (the root is its own head)
    right_edge: int  # index of the last token of its subtree
    start: int  # character offset in the sentence


def parse_sentences(sentences: list[str], batch_size: int = 256) -> list[list[ParsedToken]]:
    """Tokenise, tag and parse every sentence; joining text+whitespace of the tokens gives the sentence back."""
    return [[ParsedToken(t.text, t.whitespace_, t.pos_, t.tag_, t.dep_, t.head.i, t.right_edge.i, t.idx) for t in doc]
            for doc in parser().pipe(sentences, batch_size=batch_size)]


def _children(tokens: list[ParsedToken], head: int, deps: tuple[str, ...]) -> list[int]:
    return [index for index, token in enumerate(tokens) if token.head == head and index != head and token.dep in deps]


def negate(tokens: list[ParsedToken]) -> tuple[str, list[dict]] | None:
    """The sentence with a negation inserted, and what changed (token, offset, old and new text, the rule);
    None when it cannot be negated (see the module's rules)."""
    root = next((index for index, token in enumerate(tokens) if token.dep == "ROOT"), None)
    if root is None or _children(tokens, root, ("neg",)):
        return None
    auxiliaries = [i for i in _children(tokens, root, _AUXILIARY) if i < root and tokens[i].tag in FINITE_TAGS]
    if auxiliaries:
        anchor = auxiliaries[0]
    elif tokens[root].pos == "AUX" and tokens[root].tag in FINITE_TAGS:
        anchor = root
    else:
        return _do_support(tokens, root)
    rule = "auxiliary" if anchor != root else "copula"
    subjects = [i for i in _children(tokens, root, _SUBJECT) if i > anchor]
    if subjects:  # a question: the auxiliary comes before its subject, the negation after the subject
        anchor, rule = tokens[subjects[0]].right_edge, "question"
    return _rewrite(tokens, anchor, tokens[anchor].text + " not", rule)


def _do_support(tokens: list[ParsedToken], root: int) -> tuple[str, list[dict]] | None:
    verb = tokens[root]
    if verb.pos != "VERB" or verb.tag not in DO_SUPPORT or not verb.text.isalpha():
        return None
    forms = lexicon.base_forms(verb.text, "v")
    if verb.tag != "VBP":  # a past or 3rd-person form comes from another base form ("fell" is "fall" here)
        forms = [form for form in forms if form != verb.text.lower()] or forms
    if not forms:
        return None
    base = forms[0]
    if base == "be":  # "There is a problem": be takes the negation after it, never do-support
        return _rewrite(tokens, root, verb.text + " not", "copula")
    return _rewrite(tokens, root, lexicon.match_case(f"{DO_SUPPORT[verb.tag]} not {base}", verb.text), "do-support")


def _rewrite(tokens: list[ParsedToken], index: int, replacement: str, rule: str) -> tuple[str, list[dict]]:
    text = "".join((replacement if position == index else token.text) + token.whitespace
                   for position, token in enumerate(tokens))
    token = tokens[index]
    return text, [{"token": index, "start": token.start, "original": token.text, "replacement": replacement, "rule": rule}]
