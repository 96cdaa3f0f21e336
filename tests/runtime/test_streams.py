import threading
import time

import numpy as np
import torch

from embedlab.runtime.streams import ordered_map, stream_count
from embedlab.tokens.forward import run_sequences, text_sequences


def test_results_come_in_input_order_with_at_most_streams_in_flight():
    lock, running, most = threading.Lock(), [0], [0]

    def work(item: int) -> tuple[int, int, bool]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.002 * (item % 3))  # later items often finish first
        with lock:
            running[0] -= 1
        return item, torch.get_num_threads(), torch.is_inference_mode_enabled()

    threads = torch.get_num_threads()
    results = list(ordered_map(work, range(12), streams=3))
    assert [item for item, _, _ in results] == list(range(12))
    assert all(count == 1 and inference for _, count, inference in results)  # one torch thread per stream, no autograd
    assert most[0] <= 3
    assert torch.get_num_threads() == threads  # the caller's thread count is given back


def test_ahead_lets_a_free_stream_start_later_items_while_the_oldest_still_runs():
    """Item 0 waits until item 3 has started. With ``ahead`` = streams (the default) item 3 is handed out only
    after item 0's result is taken, so item 0 times out; with ``ahead`` = 4 the second stream reaches it."""
    def run(ahead: int | None) -> list[tuple[int, bool]]:
        started = threading.Event()

        def work(item: int) -> tuple[int, bool]:
            if item == 3:
                started.set()
            return item, started.wait(timeout=0.5) if item == 0 else True

        return list(ordered_map(work, range(6), streams=2, ahead=ahead))

    assert run(4) == [(item, True) for item in range(6)]  # in input order, item 0 saw item 3 start
    assert run(None)[0] == (0, False)


def test_one_stream_is_a_plain_map_on_the_calling_thread():
    caller = threading.get_ident()
    assert list(ordered_map(lambda item: (item * 2, threading.get_ident() == caller), [3, 1], streams=1)) == [(6, True), (2, True)]
    assert stream_count(torch.device("cpu")) == torch.get_num_threads()
    assert stream_count(torch.device("meta")) == 1


def test_states_run_in_streams_equal_the_one_thread_run_bit_for_bit(minilm, sts_sentences):
    texts = sts_sentences[:40]
    encoded = minilm.tokenizer(texts, add_special_tokens=False)["input_ids"]
    sequences = [sequence for index, (text, ids) in enumerate(zip(texts, encoded))
                 for sequence in text_sequences(minilm, index, text, list(ids), None)]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = list(run_sequences(minilm, sequences, 8, False, (3, 6)))
        torch.set_num_threads(2)  # two streams of batches
        streamed = list(run_sequences(minilm, sequences, 8, False, (3, 6)))
    finally:
        torch.set_num_threads(threads)
    assert [sequence.text_index for sequence, _ in streamed] == [sequence.text_index for sequence, _ in alone]
    for (_, expected), (_, states) in zip(alone, streamed):
        np.testing.assert_array_equal(states, expected)
