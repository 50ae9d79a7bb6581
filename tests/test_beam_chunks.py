"""The in-process runner hands a GroupByKey's output to its workers in chunks (pipeline.beam): the same
groups, in the same order and partitions as Beam's one-string-per-worker buffer, cut at group boundaries,
and a pipeline's grouped results are unchanged when every chunk holds only a few groups."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.coders import coders
from apache_beam.coders.coder_impl import create_InputStream, create_OutputStream
from apache_beam.runners.portability.fn_api_runner import execution
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.window import GlobalWindows

from pipeline import beam as hopsmith_beam

KEY, VALUE = coders.StrUtf8Coder(), coders.VarIntCoder()
WINDOW = coders.GlobalWindowCoder()


def _buffer(pairs) -> execution.GroupingBuffer:
    """A GroupingBuffer filled as the runner fills it: encoded windowed (key, value) elements."""
    pre = coders.WindowedValueCoder(coders.TupleCoder([KEY, VALUE]), WINDOW)
    post = coders.WindowedValueCoder(coders.TupleCoder([KEY, coders.IterableCoder(VALUE)]), WINDOW)
    buffer = execution.GroupingBuffer(pre, post, Windowing(GlobalWindows()))
    stream = create_OutputStream()
    for pair in pairs:
        pre.get_impl().encode_to_stream(GlobalWindows.windowed_value(pair), stream, True)
    buffer.append(stream.get())
    return buffer


def _decoded(chunks: list[bytes]) -> list[tuple]:
    post = coders.WindowedValueCoder(coders.TupleCoder([KEY, coders.IterableCoder(VALUE)]), WINDOW).get_impl()
    groups = []
    for chunk in chunks:
        stream = create_InputStream(chunk)
        while stream.size() > 0:
            key, values = post.decode_from_stream(stream, True).value
            groups.append((key, list(values)))
    return groups


@pytest.fixture
def small_chunks(monkeypatch):
    hopsmith_beam._fn_api_runner_class()  # installs the chunked partition
    monkeypatch.setattr(hopsmith_beam, "GROUPED_CHUNK_BYTES", 64)


def test_grouped_output_is_cut_at_group_boundaries_with_beams_order_and_partitions(small_chunks):
    pairs = [(f"title {i % 37}", i) for i in range(500)]
    chunked = _buffer(pairs).partition(2)
    whole = execution.GroupingBuffer.partition.whole(_buffer(pairs), 2)
    assert [len(part) for part in whole] == [1, 1]  # Beam: the whole partition as one string
    assert all(len(part) > 5 for part in chunked)
    for cut, one in zip(chunked, whole, strict=True):
        assert _decoded(cut) == _decoded(one)
    assert sorted(key for part in chunked for key, _ in _decoded(part)) == sorted({k for k, _ in pairs})


def test_an_empty_group_by_key_still_gives_each_worker_one_empty_input(small_chunks):
    assert _buffer([]).partition(3) == [[b""], [b""], [b""]]


def test_a_pipeline_groups_the_same_through_small_chunks(small_chunks):
    pairs = [(f"k{i % 50}", i) for i in range(2000)]
    expected = [(f"k{k}", sum(range(k, 2000, 50))) for k in range(50)]
    with beam.Pipeline(options=hopsmith_beam.pipeline_options()) as pipeline:
        sums = (pipeline | beam.Create(pairs) | beam.GroupByKey()
                | beam.MapTuple(lambda key, values: (key, sum(values))))
        assert_that(sums, equal_to(expected))
