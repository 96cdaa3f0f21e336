"""Tests for embedlab.evaluation.cost: what computing a method's vectors cost, measured on uncached work,
kept with the evaluation cache's entry, and stored with every record."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from fakes import FakeMethod, isolated_eval_cache, scored_pairs_file  # noqa: F401 (autouse fixture)

from embedlab.evaluation.cost import CACHED_NOTE, COST_KEYS, CallCost, CostTally, measured, vector_bytes
from embedlab.evaluation.harness import evaluate, parse_tasks
from embedlab.results.database import ResultsDB


def test_a_call_is_timed_and_its_peak_memory_sampled_above_the_level_before() -> None:
    def allocate() -> float:
        held = np.ones(16 * 2**20 // 8)  # 16 MiB, written (resident), held while the sampler reads
        time.sleep(0.25)  # long enough for the sampler thread to be scheduled on a loaded machine (wall time, no CPU)
        return float(held[-1])

    result, call = measured(allocate, texts=3)
    assert result == 1.0 and call.texts == 3
    assert call.seconds >= 0.25 and call.cpu_seconds >= 0 and call.threads >= 1 and call.cpu_model
    assert 15 <= call.peak_memory_mb < 64  # the 16 MiB array, not the process's whole footprint (hundreds of MB)
    _, idle = measured(lambda: None, texts=0)
    assert idle.peak_memory_mb < 8


def test_bytes_per_vector_follow_the_returned_array() -> None:
    assert vector_bytes(np.zeros((2, 384), dtype=np.float32)) == 1536
    assert vector_bytes(np.zeros((2, 48), dtype=np.uint8)) == 48  # 384 bits packed: precision=ubinary
    assert vector_bytes(np.zeros(3)) is None


class _PackedBits(FakeMethod):
    """A method whose vectors are 384 sign bits packed in 48 bytes (as ``precision=ubinary`` returns them)."""

    def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
        return np.packbits(super().encode(texts) > 0, axis=1)

    def comparable(self, vectors):
        return np.unpackbits(vectors, axis=1).astype(np.float32) * 2 - 1


def test_each_record_carries_the_cost_measured_uncached_or_stored_with_the_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))  # an empty cache: the first encode is measured
    tasks = parse_tasks(f"sts:@{scored_pairs_file(tmp_path)}")
    method = FakeMethod(spec="costly", dim=12)
    fresh = evaluate([method], tasks, db=ResultsDB(tmp_path / "a.sqlite"), bootstrap=0, log=lambda _: None).records
    cost = fresh[0].cost
    assert list(cost) == list(COST_KEYS) and all(record.cost == cost for record in fresh)
    assert cost["encode_seconds"] > 0 and cost["texts"] == 80 and cost["texts_per_second"] == pytest.approx(80 / cost["encode_seconds"])
    assert (cost["bytes_per_vector"], cost["parameters"], cost["partial"], cost["note"]) == (48, None, False, None)  # 12 float32
    assert ResultsDB(tmp_path / "a.sqlite").records()[0].cost == cost  # stored with the row
    # another database, the same evaluation cache: nothing encoded, the cost of the run that computed the vectors
    again = evaluate([method], tasks, db=ResultsDB(tmp_path / "b.sqlite"), bootstrap=0, log=lambda _: None).records
    assert len(method.encode_calls) == 1 and again[0].cost == cost
    # vectors cached before costs were kept: no time (never a near-zero one), with the reason
    for path in (tmp_path / "cache" / "eval").glob("*-cost.safetensors"):
        path.unlink()
    old = evaluate([method], tasks, db=None, bootstrap=0, log=lambda _: None).records[0].cost
    assert (old["encode_seconds"], old["texts_per_second"], old["peak_memory_mb"], old["note"]) == (None, None, None, CACHED_NOTE)
    assert len(method.encode_calls) == 1
    packed = evaluate([_PackedBits(spec="bits", dim=384)], tasks, db=None, bootstrap=0, log=lambda _: None).records[0].cost
    assert packed["bytes_per_vector"] == 48


def test_vectors_computed_elsewhere_mark_the_figures_partial() -> None:
    class OnActors(FakeMethod):
        cost_partial_note = "encoded on Ray actors"
        parameter_count = 1234

    tally = CostTally(OnActors())
    tally.add(CallCost(texts=10, seconds=2.0, cpu_seconds=1.0, peak_memory_mb=3.0, bytes_per_vector=32, cpu_model="cpu", threads=2))
    cost = tally.cost()
    assert (cost["partial"], cost["note"], cost["parameters"], cost["texts_per_second"]) == (True, "encoded on Ray actors", 1234, 5.0)
    plain = CostTally(FakeMethod())
    plain.add(CallCost(texts=4, seconds=1.0, cpu_seconds=1.0))
    plain.mark_partial("the corpus vectors were read from shards")
    assert plain.cost()["partial"] is True and CostTally(FakeMethod()).cost() is None


def test_token_states_from_the_cache_mark_the_figures_partial() -> None:
    from embedlab.runtime.reuse import note_reused_texts

    from embedlab.evaluation.cost import collecting
    from embedlab.runtime.reuse import note_computed_texts

    method = FakeMethod()
    with collecting(method) as tally:  # as the token-state store reports what it served and what it computed
        _, computed = measured(lambda: note_computed_texts(["q1", "q2"]), texts=2)
        _, served = measured(lambda: note_reused_texts(["q1", "d1", "d2", "d3"]), texts=5)
    assert (computed.reused_texts, served.reused_texts) == (0, 3)  # q1 was this run's own work
    tally.add(computed)
    tally.add(served)
    cost = tally.cost()
    assert cost["partial"] is True and "token states of 3 of 7 texts" in cost["note"]
    note_reused_texts(["x"])  # outside a measurement: counted nowhere, no error


def test_loading_the_model_is_not_counted_as_encoding(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "cache"))

    class SlowToLoad(FakeMethod):
        loaded = False

        @property
        def dimension(self) -> int:  # as a method loads its model when first asked
            if not self.loaded:
                time.sleep(0.3)
                self.loaded = True
            return self.dim

        def encode(self, texts, batch_size=32, show_progress_bar=None, normalize=False):
            assert self.dimension == self.dim  # loads on first use, as a real method's first encode would
            return super().encode(texts)

    tasks = parse_tasks(f"sts:@{scored_pairs_file(tmp_path)}")
    cost = evaluate([SlowToLoad(spec="slow-load")], tasks, db=None, bootstrap=0, log=lambda _: None).records[0].cost
    assert 0 < cost["encode_seconds"] < 0.3
