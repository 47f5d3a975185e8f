"""The broker's CPU for the bytes it moves, against the kernel's own cost of moving them.

A broker that keeps a log pays the kernel for every byte twice on the way in (the
socket's receive, the page cache's write) and once on the way out (the send). The mock
cluster keeps records in memory and never pays the write. This shows what is left of
the broker's CPU once the kernel's share is known. Each figure is a ratio to a
reference taken in the same run, on the same loopback and file system.

- **Fetch.** One connection sends Fetch v11 requests for 24 partitions of 1 KiB records,
  at ``partition_max_bytes`` of 64 KiB and then 1 MiB. It reads each answer whole.
  Reference: this process pushing the same bytes in chunks of the partition size over
  loopback to a reader process, by ``sendfile`` from a file.
- **Produce.** One connection sends Produce v8 requests (acks=1, 4 in flight), each with
  one batch of 16 records of 1 KiB for each of 24 partitions. Reference: this process
  receiving the same requests from a sender process and appending each batch to its
  partition's file with the broker's own file seam (``OsFile.append``). That is the
  receive and the page-cache write, and nothing else.

The broker's CPU comes from /proc, the reference's from getrusage; both are given in CPU
seconds a GB. What lies above 1.0 is the broker's own work: decoding, validation
(CRC32C, the record walk), index lookups, headers, the event loop. Medians of ``--runs``
runs.

    python bench/byte_costs.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing import Process
from pathlib import Path

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, median  # noqa: E402
from many_clients import create_topic  # noqa: E402

from epochlog.protocol.records import build_batch  # noqa: E402
from epochlog.seams.real import OsDisk  # noqa: E402

PARTITIONS = 24
RECORD = 1024
BATCH_RECORDS = 16
FETCH_SIZES = (64 << 10, 1 << 20)
IN_FLIGHT = 4
MEASURED_BYTES = 1 << 30


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _framed(request: object, correlation_id: int, version: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="byte-costs")  # type: ignore[attr-defined]
    body = request.encode(version=version, header=True)  # type: ignore[attr-defined]
    return struct.pack(">i", len(body)) + body


def _batch() -> bytes:
    value = os.urandom(RECORD)
    return build_batch([(None, value, [], None)] * BATCH_RECORDS, now_ms=int(time.time() * 1000))


def _produce_frame(topic: str, batch: bytes, correlation_id: int) -> bytes:
    Data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            Data(
                name=topic,
                partition_data=[
                    Data.PartitionProduceData(index=p, records=batch) for p in range(PARTITIONS)
                ],
            )
        ],
    )
    return _framed(request, correlation_id, 8)


def _fetch_frame(topic: str, correlation_id: int, offsets: list[int], size: int) -> bytes:
    Topic = FetchRequest.FetchTopic
    partitions = [
        Topic.FetchPartition(
            partition=p,
            fetch_offset=offset,
            log_start_offset=-1,
            partition_max_bytes=size,
            current_leader_epoch=-1,
        )
        for p, offset in enumerate(offsets)
    ]
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        topics=[Topic(topic=topic, partitions=partitions)],
    )
    return _framed(request, correlation_id, 11)


async def _produce(port: int, topic: str, requests: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    batch = _batch()
    sent = answered = 0
    while answered < requests:
        while sent < requests and sent - answered < IN_FLIGHT:
            writer.write(_produce_frame(topic, batch, sent))
            sent += 1
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        answer = ProduceResponse.decode((await reader.readexactly(size))[4:], version=8)
        errors = {p.error_code for t in answer.responses for p in t.partition_responses}
        assert errors == {0}, errors
        answered += 1
    writer.close()


async def _fetch(port: int, topic: str, records: int, size: int, total: int) -> int:
    """Fetch until ``total`` bytes came back, each fetch moving every partition on by
    what one answer holds (wrapping before the log end); the bytes received."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 26)
    step = max(1, size // (RECORD + 100))
    offsets, received, correlation_id = [0] * PARTITIONS, 0, 0
    while received < total:
        writer.write(_fetch_frame(topic, correlation_id, offsets, size))
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(length)
        received += length
        correlation_id += 1
        offsets = [(o + step) % (records - step) for o in offsets]
    writer.close()
    return received


def _produce_request_bytes() -> int:
    return len(_produce_frame("t", _batch(), 0))


def broker_produce(broker: BrokerProcess, topic: str) -> tuple[float, int]:
    """CPU seconds a GB, and the records each partition then holds."""
    requests = MEASURED_BYTES // _produce_request_bytes()
    before = _cpu_seconds(broker.pid)
    asyncio.run(_produce(broker.port, topic, requests))
    cpu = _cpu_seconds(broker.pid) - before
    return cpu / (requests * _produce_request_bytes() / 1e9), requests * BATCH_RECORDS


def broker_fetch(broker: BrokerProcess, topic: str, records: int, size: int) -> float:
    before = _cpu_seconds(broker.pid)
    received = asyncio.run(_fetch(broker.port, topic, records, size, MEASURED_BYTES))
    return (_cpu_seconds(broker.pid) - before) / (received / 1e9)


def _serve_socket(port: int, body: Callable[[socket.socket], None]) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    body(conn)
    conn.close()


def _drain(conn: socket.socket) -> None:
    buffer = bytearray(1 << 20)
    while conn.recv_into(buffer):
        pass


def _send_requests(conn: socket.socket) -> None:
    frame = _produce_frame("t", _batch(), 0)
    for _ in range(MEASURED_BYTES // len(frame)):
        conn.sendall(frame)


def _with_peer(
    peer: Callable[[socket.socket], None], work: Callable[[socket.socket], int]
) -> float:
    """This process's CPU per GB of ``work`` on a loopback connection to ``peer``."""
    listener = socket.create_server(("127.0.0.1", 0))
    other = Process(target=_serve_socket, args=(listener.getsockname()[1], peer))
    other.start()
    conn, _ = listener.accept()
    before = _own_cpu_seconds()
    moved = work(conn)
    cpu = _own_cpu_seconds() - before
    conn.close()
    other.join()
    listener.close()
    return cpu / (moved / 1e9)


def kernel_sendfile(path: str, chunk: int) -> float:
    def send(conn: socket.socket) -> int:
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        sent = offset = 0
        while sent < MEASURED_BYTES:
            if offset + chunk > size:
                offset = 0
            done = 0
            while done < chunk:
                done += os.sendfile(conn.fileno(), fd, offset + done, chunk - done)
            offset += chunk
            sent += chunk
        os.close(fd)
        return sent

    return _with_peer(_drain, send)


def kernel_receive_and_append(directory: str) -> float:
    """Receive the Produce frames and append a batch's worth of each to every
    partition's file: the same bytes received and written as the broker's."""
    frame_size = _produce_request_bytes()
    batch_size = len(_batch())

    def receive(conn: socket.socket) -> int:
        disk = OsDisk()
        files = [disk.open(f"{directory}/{p}.log") for p in range(PARTITIONS)]
        frame = bytearray(frame_size)
        view = memoryview(frame)
        received = 0
        while True:
            got = 0
            while got < frame_size:
                n = conn.recv_into(view[got:])
                if not n:
                    for file in files:
                        file.close()
                    return received
                got += n
            received += got
            for p, file in enumerate(files):
                file.append(view[p * batch_size : (p + 1) * batch_size])

    return _with_peer(_send_requests, receive)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-bytes-") as tmp:
        data = Path(tmp) / "data.bin"
        data.write_bytes(os.urandom(64 << 20))
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), {}).start()
        try:
            # Unmeasured: the broker's first batches load the compiled record walker.
            create_topic(broker.bootstrap, "warm-up", PARTITIONS)
            asyncio.run(_produce(broker.port, "warm-up", 50))
            for run in range(args.runs):
                topic = f"bytes-{run}"
                create_topic(broker.bootstrap, topic, PARTITIONS)
                reference = Path(tmp) / "reference"
                reference.mkdir()
                produce_cpu, records = broker_produce(broker, topic)
                results.setdefault("produce", []).append(
                    (produce_cpu, kernel_receive_and_append(str(reference)))
                )
                shutil.rmtree(reference)
                for size in FETCH_SIZES:
                    results.setdefault(f"fetch {size >> 10} KiB", []).append(
                        (
                            broker_fetch(broker, topic, records, size),
                            kernel_sendfile(str(data), size),
                        )
                    )
                print(f"run {run + 1} of {args.runs} done", flush=True)
            broker.stop()
        finally:
            broker.close()
    print(
        f"\nCPU seconds a GB, {PARTITIONS} partitions of {RECORD}-byte records, medians of"
        f" {args.runs} runs (min, max of the ratio):"
    )
    references = {"produce": "receive + append", "fetch": "sendfile"}
    for name, pairs in results.items():
        ratios = [ours / floor for ours, floor in pairs]
        print(
            f"  {name:15} broker {median([p[0] for p in pairs]):.3f}"
            f"  kernel ({references[name.split()[0]]}) {median([p[1] for p in pairs]):.3f}"
            f"  {median(ratios):.2f} of it ({min(ratios):.2f}, {max(ratios):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
