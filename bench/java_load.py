"""The scale bench's load from Apache Kafka's Java producer (`python -m bench scale --load-client java`):
bench/LoadProducer.java, run by `java` from source on the brokers' jars (`replication.kafka.apache`), in
the producer process of `bench.scale.Traffic`, with the same arguments and results as the librdkafka
load (`bench.scale._produce`). Why a Java producer: LoadProducer.java's header."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from replication.kafka.apache import kafka_libs

SOURCE = Path(__file__).with_name("LoadProducer.java")


def counted_in_window(lines: Iterable[str], *, start_ms: float, end_ms: float) -> int:
    """The records sent within [start_ms, end_ms] from LoadProducer's "<epoch ms> <count>" lines."""
    total = 0
    for line in lines:
        fields = line.split()
        if len(fields) == 2 and start_ms <= int(fields[0]) <= end_ms:
            total += int(fields[1])
    return total


def sent_figures(summary: str) -> tuple[int, float, int]:
    """(records sent, seconds, delivery failures) from LoadProducer's last line."""
    fields = summary.split()
    return (
        int(fields[fields.index("sent") + 1]),
        float(fields[fields.index("seconds") + 1]),
        int(fields[fields.index("failures") + 1]),
    )


def produce_with_java(
    bootstrap: str, topics: dict[str, int], rate_per_partition: float, window, stop, ready, out
) -> None:
    """`bench.scale._produce`, written by LoadProducer.java: until `stop`, then `out` = [records sent,
    seconds, records timestamped inside the window, delivery failures]."""
    with tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        topics_file, counts_file = Path(scratch) / "topics", Path(scratch) / "counts"
        topics_file.write_text("".join(f"{topic} {count}\n" for topic, count in topics.items()))
        process = subprocess.Popen(
            [
                shutil.which("java") or "java",
                "-Xmx512m",
                "-cp",
                str(kafka_libs() / "*"),
                str(SOURCE),
                bootstrap,
                repr(rate_per_partition),
                str(topics_file),
                str(counts_file),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdin is not None and process.stdout is not None
        for line in process.stdout:
            if line.strip() == "ready":
                break
        else:
            raise RuntimeError(f"LoadProducer exited ({process.wait()}) before it was ready")
        ready.set()
        stop.wait()
        process.stdin.close()  # the end of its input: it stops, flushes and reports
        summary = process.stdout.read().strip().splitlines()
        if process.wait() != 0 or not summary:
            raise RuntimeError(f"LoadProducer failed ({process.returncode}): {summary}")
        sent, seconds, failures = sent_figures(summary[-1])
        with counts_file.open() as counts:
            in_window = counted_in_window(counts, start_ms=window[0], end_ms=window[1])
    out[:] = [sent, seconds, in_window, failures]
