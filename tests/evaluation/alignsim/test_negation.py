"""embedlab.evaluation.alignsim.negation: a negation where English grammar puts it, from spaCy's parse; sentences that
cannot be negated (already negated, no finite verb) give None."""

from __future__ import annotations

import pytest

from embedlab.evaluation.alignsim.negation import negate, parse_sentences

CASES = {
    "They have finished the work.": ("They have not finished the work.", "auxiliary"),
    "He can swim.": ("He can not swim.", "auxiliary"),
    "Fewer than a dozen FBI agents were dispatched to secure evidence.":
        ("Fewer than a dozen FBI agents were not dispatched to secure evidence.", "auxiliary"),
    "She is happy.": ("She is not happy.", "copula"),
    "There is a problem.": ("There is not a problem.", "copula"),
    "Is it raining?": ("Is it not raining?", "question"),
    "The company announced strong profits.": ("The company did not announce strong profits.", "do-support"),
    "Stocks fell sharply on Monday.": ("Stocks did not fall sharply on Monday.", "do-support"),  # fall, not fell
    "The cat sits on the mat.": ("The cat does not sit on the mat.", "do-support"),
    "They went home.": ("They did not go home.", "do-support"),
    "I like tea.": ("I do not like tea.", "do-support"),
}
# one xdist worker runs the ALIGN-SIM modules: WordNet and spaCy are loaded once
pytestmark = pytest.mark.xdist_group("alignsim-task")
NOT_NEGATED = ["The man was not there.", "He didn't go.", "Great news for everyone!"]


@pytest.fixture(scope="module")
def parsed():
    sentences = list(CASES) + NOT_NEGATED
    return dict(zip(sentences, parse_sentences(sentences)))


@pytest.mark.parametrize("sentence", list(CASES))
def test_the_negation_goes_where_grammar_puts_it(parsed, sentence):
    expected, rule = CASES[sentence]
    text, changes = negate(parsed[sentence])
    assert text == expected
    (change,) = changes
    assert change["rule"] == rule
    # the change says where: the token's text starts at its offset in the original sentence
    assert sentence[change["start"]:].startswith(change["original"])
    assert text == sentence[:change["start"]] + change["replacement"] + sentence[change["start"] + len(change["original"]):]


@pytest.mark.parametrize("sentence", NOT_NEGATED)
def test_sentences_already_negated_or_without_a_finite_verb_are_not_negated(parsed, sentence):
    assert negate(parsed[sentence]) is None


def test_tokens_rebuild_the_sentence(parsed):
    for sentence, tokens in parsed.items():
        assert "".join(token.text + token.whitespace for token in tokens) == sentence
