"""A worker's memory follows what it holds, not the size of a stage's input: its large allocations are
mapped and unmapped (`runtime.heap`), and the in-process runner streams a stage's input to a worker process
in element-aligned pieces (`runtime.beam`) instead of one message as large as a GroupByKey's output."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.coders import coder_impl, coders
from apache_beam.runners.worker import data_plane

from runtime import beam as hopsmith_beam
from runtime.beam import piece_ends, pipeline_options
from runtime.heap import fewer_young_collections, map_large_allocations

REPO = Path(__file__).resolve().parent.parent

# In a fresh process: a freed 16 MiB block raises glibc's dynamic mmap threshold, then 64 blocks of 4 MiB
# are allocated between small objects that stay and are freed; prints the resident MiB they leave behind.
HEAP_CHURN = """
import sys
sys.path.insert(0, {repo!r})
from runtime.heap import map_large_allocations

def rss_mib():
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS")).split()[1]) / 1024

if {mapped}:
    map_large_allocations()
freed = bytearray(16 << 20)
del freed
before = rss_mib()
kept, blocks = [], []
for _ in range(64):
    blocks.append(bytearray(4 << 20))
    kept.append(bytearray(64 << 10))
del blocks
print(rss_mib() - before)
"""


def _left_behind_mib(mapped: bool) -> float:
    script = HEAP_CHURN.format(repo=str(REPO), mapped=mapped)
    return float(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)


@pytest.mark.skipif(not map_large_allocations(), reason="glibc only")
def test_mapped_large_allocations_are_returned_when_freed():
    assert _left_behind_mib(mapped=True) < 32  # 4 MiB kept small objects, nothing of the 256 MiB freed
    assert _left_behind_mib(mapped=False) > 128  # glibc's default keeps the freed blocks resident


def test_worker_processes_map_large_allocations_and_bound_their_send_queue_before_beam_starts():
    script = ("from unittest import mock; import runtime.beam_worker as w\n"
              "from apache_beam.runners.worker import data_plane\n"
              "calls = []\n"
              "started = lambda argv: calls.append(('worker', data_plane._DEFAULT_SEND_QUEUE_MAX_BYTES))\n"
              "with mock.patch.object(w, 'map_large_allocations', lambda: calls.append('heap')),"
              " mock.patch('apache_beam.runners.worker.sdk_worker_main.main', started):\n"
              "    w.main()\n"
              "print(calls)")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True, capture_output=True, text=True)
    assert result.stdout.strip().splitlines()[-1] == f"['heap', ('worker', {16 << 20})]"


def _encoded(values: list[tuple[str, list[int]]]) -> tuple[bytes, coder_impl.CoderImpl]:
    coder = coders.TupleCoder([coders.StrUtf8Coder(), coders.IterableCoder(coders.VarIntCoder())]).get_impl()
    stream = coder_impl.create_OutputStream()
    for value in values:
        coder.encode_to_stream(value, stream, True)
    return stream.get(), coder


def _decoded(data: bytes, coder) -> list:
    stream = coder_impl.create_InputStream(data)
    decoded = []
    while stream.size() > 0:
        decoded.append(coder.decode_from_stream(stream, True))
    return decoded


def test_piece_ends_cut_between_elements_at_about_the_limit():
    values = [(f"key {i}", list(range(i % 40))) for i in range(3_000)]
    data, coder = _encoded(values)
    limit = 4_096
    ends = piece_ends(data, coder, limit)
    pieces = [data[start:end] for start, end in zip([0, *ends], ends, strict=False)]
    assert b"".join(pieces) == data and ends[-1] == len(data)
    assert [value for piece in pieces for value in _decoded(piece, coder)] == [tuple(v) for v in _decoded(data, coder)]
    largest = max(len(_encoded([value])[0]) for value in values)
    assert len(pieces) > 10 and all(limit <= len(piece) < limit + largest for piece in pieces[:-1])
    assert 0 < len(pieces[-1]) < limit + largest
    assert piece_ends(data, coder, len(data)) == [len(data)]  # small enough: one piece, nothing decoded
    assert piece_ends(b"", coder, limit) == []


def _grouped_sums(options, out: Path) -> list[list]:
    """Sum per key of 20,000 numbers in 2,000 groups, written by the worker to `out` and read back."""
    with beam.Pipeline(options=options) as pipeline:
        _ = (pipeline | beam.Create(range(20_000)) | beam.Map(lambda i: (f"key {i % 2_000}", i))
             | beam.GroupByKey() | beam.MapTuple(lambda key, values: (key, sum(values)))
             | beam.combiners.ToList() | beam.Map(lambda rows: out.write_text(json.dumps(sorted(rows)))))
    return json.loads(out.read_text())


def test_a_worker_process_gets_a_grouped_input_in_pieces_with_the_same_result(monkeypatch, tmp_path):
    sent: list[tuple[str, int]] = []
    enqueue = data_plane._GrpcDataChannel._enqueue_to_send

    def record(channel, element):
        if isinstance(element, data_plane.beam_fn_api_pb2.Elements.Data) and element.data:
            sent.append((element.transform_id, len(element.data)))
        return enqueue(channel, element)

    monkeypatch.setattr(hopsmith_beam, "INPUT_MESSAGE_BYTES", 8 << 10)
    monkeypatch.setattr(data_plane._GrpcDataChannel, "_enqueue_to_send", record)
    expected = sorted([f"key {k}", sum(range(k, 20_000, 2_000))] for k in range(2_000))
    in_process = _grouped_sums(pipeline_options(None, []), tmp_path / "in_process.json")
    assert in_process == expected and not sent  # in-memory workers: nothing crosses a channel
    in_worker = _grouped_sums(pipeline_options(None, ["--direct_running_mode", "multi_processing",
                                                      "--direct_num_workers", "1"]), tmp_path / "in_worker.json")
    assert in_worker == expected
    grouped = [size for transform, size in sent if "GroupByKey" in transform]
    assert len(grouped) > 5 and max(grouped) < (8 << 10) + 1_024  # ~60 KiB of groups, in pieces of ~8 KiB


# In a fresh process: a set-up DoFn freezes what is alive (the imports, Beam's modules), after which a unit's
# collection scans only what came later, and still collects a cycle the unit left.
FREEZE_AT_SET_UP = """
import gc, sys, weakref
sys.path.insert(0, {repo!r})
from runtime.beam import BoundedHeapDoFn
from runtime.heap import release_freed_memory

BoundedHeapDoFn().setup()
frozen = gc.get_freeze_count()
BoundedHeapDoFn().setup()  # once per process: a second DoFn freezes nothing more
class Node:
    pass
node = Node()
node.self = node
alive = weakref.ref(node)
del node
release_freed_memory()
print(frozen, gc.get_freeze_count(), len(gc.get_objects()), alive() is None)
"""


def test_a_workers_start_up_objects_are_frozen_once_and_later_cycles_still_collected():
    script = FREEZE_AT_SET_UP.format(repo=str(REPO))
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True, capture_output=True, text=True)
    frozen, frozen_again, tracked, collected = result.stdout.split()
    assert int(frozen) == int(frozen_again) > 50_000 and int(tracked) < int(frozen) / 10
    assert collected == "True"


def test_fewer_young_collections_restores_the_thresholds_even_when_its_block_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_young_collections(12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
        raise RuntimeError("a step failed")
    assert gc.get_threshold() == before
