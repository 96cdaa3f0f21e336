import numpy as np
import pytest
import torch

import embedlab
from embedlab.pooling import sources, static
from embedlab.pooling.static import context_averaged_tables, isolated_token_states, random_token_table
from embedlab.runtime.memo import clear
from embedlab.tokens.store import TokenStateStore

CORPUS = ["The cat sat on the mat.", "A dog sat on the cat.", "The mat was red and the dog was brown."]


@pytest.fixture(scope="module")
def tiny_tables(minilm):
    return context_averaged_tables(minilm, CORPUS, fill_unseen=False)


def test_random_table_is_seeded_normal():
    table = random_token_table(30522, 384, seed=0, std=0.1)
    assert table.dtype == np.float32 and table.shape == (30522, 384)
    assert abs(table.mean()) < 1e-3 and abs(table.std() - 0.1) < 1e-3
    np.testing.assert_array_equal(table, random_token_table(30522, 384, seed=0, std=0.1))
    assert not np.array_equal(table, random_token_table(30522, 384, seed=1, std=0.1))


def test_random_embedding_is_the_mean_of_its_token_vectors(minilm):
    text = "the cat sat"
    ids = minilm.tokenizer(text)["input_ids"]
    expected = random_token_table(len(minilm.tokenizer), 384)[ids].mean(0)
    np.testing.assert_allclose(embedlab.load("random:minilm").encode([text])[0], expected, rtol=1e-5, atol=1e-7)


def test_random_dim_option_gives_the_papers_768_wide_vectors(minilm):
    """`dim=768` draws the paper's RE width over MiniLM's (= bert-base-uncased's) 30,522-token vocabulary."""
    text = "the cat sat"
    ids = minilm.tokenizer(text)["input_ids"]
    method = embedlab.load("random:minilm,dim=768")
    expected = random_token_table(30522, 768)[ids].mean(0)
    assert len(minilm.tokenizer) == 30522 and method.dimension == 768
    np.testing.assert_allclose(method.encode([text])[0], expected, rtol=1e-5, atol=1e-7)
    assert embedlab.load("random:minilm,dim=model").spec == "random:minilm"
    with pytest.raises(ValueError, match="dim"):
        embedlab.load("random:minilm,dim=0")


def test_avg_table_equals_a_direct_average_over_a_tiny_corpus(minilm, tiny_tables):
    tables, counts = tiny_tables
    vocab = minilm.tokenizer.get_vocab()
    states = TokenStateStore(minilm, use_disk_cache=False).compute(CORPUS)
    for word in ("the", "cat", "sat", "[CLS]"):
        token = vocab[word]
        occurrences = [s.states[:, s.token_ids == token] for s in states]
        stacked = np.concatenate(occurrences, axis=1)
        assert counts[token] == stacked.shape[1]
        np.testing.assert_allclose(tables[:, token], stacked.mean(axis=1), atol=1e-5)
    assert counts[vocab["guitar"]] == 0 and not tables[:, vocab["guitar"]].any()


def test_a_token_absent_from_the_corpus_gets_its_isolated_context_vectors(minilm):
    vocab = minilm.tokenizer.get_vocab()
    unseen = [vocab["guitar"], vocab["violin"]]
    isolated = isolated_token_states(minilm, unseen).numpy()
    assert isolated.shape == (minilm.num_layers + 2, 2, minilm.hidden_size)
    with torch.inference_mode():
        ids = torch.tensor([[vocab["[CLS]"], unseen[1], vocab["[SEP]"]]], device=minilm.device)
        hidden = minilm.model(input_ids=ids, output_hidden_states=True).hidden_states
    np.testing.assert_allclose(isolated[-1, 1], hidden[-1][0, 1].cpu().numpy(), atol=1e-5)
    np.testing.assert_allclose(isolated[0, 0], minilm.model.get_input_embeddings().weight[unseen[0]].detach().cpu().numpy(), atol=1e-6)


def test_avg_and_mix_families_use_the_tables(minilm, monkeypatch, tiny_tables):
    tables, _ = tiny_tables
    monkeypatch.setattr(sources, "avg_tables", lambda model, show_progress_bar=None: tables)
    text = ["the cat sat on a mat"]
    ids = minilm.tokenizer(text[0])["input_ids"]
    avg = embedlab.load("avg:minilm,layers=1").encode(text)[0]
    np.testing.assert_allclose(avg, tables[2][ids].mean(0), rtol=1e-5, atol=1e-6)
    contextual = embedlab.load("minilm:layers=1").encode(text)[0]
    for w in (0.5, -0.75):
        mixed = embedlab.load(f"bert+avg:minilm,layers=1,w={w}").encode(text)[0]
        np.testing.assert_allclose(mixed, (1 - w) * contextual + w * tables[2][ids].mean(0), rtol=1e-4, atol=1e-5)


def test_avg_tables_are_stored_checksummed_and_read_back(minilm, isolated_cache, monkeypatch):
    computed = []

    def tiny_tables(model, contexts, show_progress_bar=None):
        computed.append(list(contexts))
        return np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.ones(3, dtype=np.int64)

    monkeypatch.setattr(static, "context_averaged_tables", tiny_tables)
    first = static.avg_tables(minilm, CORPUS)
    assert static.avg_tables(minilm, CORPUS) is first and not first.flags.writeable  # one copy per process
    clear()
    np.testing.assert_array_equal(static.avg_tables(minilm, CORPUS), first)  # read back from disk
    assert len(computed) == 1 and len(list((isolated_cache / "static").glob("*.safetensors"))) == 1


def test_avg_refuses_a_model_whose_input_embeddings_are_narrower_than_its_states(tmp_path):
    """ALBERT and ELECTRA factorise their embeddings (width 16 here, states 32): one clear error, not a numpy broadcast."""
    from conformance.tiny_models import build_tiny
    from embedlab.models.loading import load_model
    from embedlab.pooling.static import avg_tables

    model = load_model(str(build_tiny("ALBERT", tmp_path / "albert")))
    with pytest.raises(ValueError, match="input embeddings of width 16 but hidden states of width 32"):
        avg_tables(model, ["a man is playing a guitar"])
