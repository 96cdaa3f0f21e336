"""The server's Prometheus metrics (``GET /metrics``), in a registry of their own per app.

A registry per app, not prometheus-client's process-wide default: two servers in one process (tests,
a notebook) must not share or collide on counters.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# seconds: from a millisecond (tiny models, cached texts) to a minute (neural micro-tuning of many texts)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TEXT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TOKEN_BUCKETS = (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class ServerMetrics:
    """Requests, errors, batch sizes, queue depth and latencies, labelled by route or served spec."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("embedlab_requests", "HTTP requests answered, by route and status code",
                                ["route", "status"], registry=self.registry)
        self.errors = Counter("embedlab_request_errors", "requests answered with an error, by route and error code",
                              ["route", "code"], registry=self.registry)
        self.latency = Histogram("embedlab_request_duration_seconds", "time from a request's arrival to its answer",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.disconnects = Counter("embedlab_client_disconnects", "requests whose client went away before the answer",
                                   ["route"], registry=self.registry)
        self.queue_depth = Gauge("embedlab_queue_depth", "requests waiting for a batch", ["model"], registry=self.registry)
        self.queue_wait = Histogram("embedlab_queue_wait_seconds", "time a request waited before its batch started",
                                    ["model"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batch_texts = Histogram("embedlab_batch_texts", "texts per encode call (coalesced requests)", ["model"],
                                     buckets=TEXT_BUCKETS, registry=self.registry)
        self.batch_tokens = Histogram("embedlab_batch_tokens", "tokens per encode call", ["model"],
                                      buckets=TOKEN_BUCKETS, registry=self.registry)
        self.batch_requests = Histogram("embedlab_batch_requests", "requests coalesced into one encode call", ["model"],
                                        buckets=TEXT_BUCKETS, registry=self.registry)
        self.encode_seconds = Histogram("embedlab_encode_duration_seconds", "time of one encode (or scoring) call",
                                        ["model"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.rejected = Counter("embedlab_queue_rejections", "requests answered 503 because the queue was full",
                                ["model"], registry=self.registry)

    content_type = CONTENT_TYPE_LATEST

    def exposition(self) -> bytes:
        """Every metric in Prometheus' text format."""
        return generate_latest(self.registry)
