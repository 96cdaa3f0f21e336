"""The query and document sides of a spec: equal to sentence-transformers' prompts, named in the identity."""

from __future__ import annotations

import numpy as np
import pytest

import embedlab
from embedlab.errors import InputError
from embedlab.spec import SpecError
from tolerance import UNIT_ATOL

TEXTS = ["how do magnets work?", "A man plays the guitar on stage, loudly."]


@pytest.mark.crosspath
def test_each_side_equals_sentence_transformers_with_that_prompt():
    method = embedlab.load("minilm:query_template=e5-query,doc_template=e5-passage,post=normalize")
    reference = embedlab.load("st:minilm").sentence_transformer
    assert method.prompts == {"query": "query: [X]", "document": "passage: [X]"}
    # embedlab's pooling vs sentence-transformers' (unit vectors): float32 rounding
    np.testing.assert_allclose(method.encode_query(TEXTS), reference.encode(TEXTS, prompt="query: "), atol=UNIT_ATOL)
    np.testing.assert_allclose(method.encode_document(TEXTS), reference.encode(TEXTS, prompt="passage: "), atol=UNIT_ATOL)
    # bit-identical by construction: three spellings of one call on the same texts in this process
    np.testing.assert_array_equal(method.encode(TEXTS, prompt_name="query"), method.encode_query(TEXTS))
    np.testing.assert_array_equal(method.encode(TEXTS, prompt="query: "), method.encode_query(TEXTS))
    assert not np.allclose(method.encode(TEXTS), method.encode_query(TEXTS))  # no prompt: the plain texts


@pytest.mark.crosspath
def test_a_method_without_prompts_encodes_both_sides_plainly():
    method = embedlab.load("minilm")
    assert method.prompts == {}
    np.testing.assert_array_equal(method.encode_query(TEXTS), method.encode(TEXTS))  # bit-identical: the same call
    with pytest.raises(InputError, match="prompt_name='query' is not one of this method's prompts"):
        method.encode(TEXTS, prompt_name="query")
    with pytest.raises(InputError, match="prompts need a transformer's contextual token states"):
        embedlab.load("avg:minilm").encode(TEXTS, prompt="query: ")


def test_sides_round_trip_and_a_template_file_joins_the_identity(tmp_path):
    spec = "minilm:doc_template=e5-passage,query_template=bge-query"
    assert embedlab.load(spec).spec == "minilm:query_template=bge-query,doc_template=e5-passage"
    assert embedlab.load(embedlab.load(spec).spec).spec == embedlab.load(spec).spec
    assert embedlab.load("minilm:query_template=e5-query").fingerprint == embedlab.load("minilm").fingerprint
    template = tmp_path / "q.txt"
    template.write_text("question: [X]\n")
    first = embedlab.load(f"minilm:query_template=@{template}")
    template.write_text("ask: [X]\n")  # a method keeps the template it read
    assert first.prompts == {"query": "question: [X]"}
    assert embedlab.load(f"minilm:query_template=@{template}").fingerprint != first.fingerprint


@pytest.mark.parametrize("value, message", [("nonsense", "unknown template 'nonsense'"), ("metaeol", "set of four prompts"),
                                            ("@/no/such/file", "No such file")])
def test_bad_sides_are_refused_when_the_spec_is_read(value, message):
    with pytest.raises(SpecError, match=message):
        embedlab.load(f"minilm:query_template={value}")


def test_a_template_file_needs_one_text_slot(tmp_path):
    template = tmp_path / "t.txt"
    template.write_text("no slot here")
    with pytest.raises(SpecError, match="holding \\[X\\] once"):
        embedlab.load(f"minilm:doc_template=@{template}")
