"""`--runner DaskRunner` on a real dask.distributed cluster (2 worker processes on 127.0.0.1): a pipeline
with tagged outputs, side inputs and several sinks, and stages 1 and 2a on the shipped sample, byte for
byte the DirectRunner's output."""

from __future__ import annotations

import bz2
import json
from pathlib import Path

import apache_beam as beam
import pytest

from cli.main import main
from ground.io import read_manifest
from runtime.beam import pipeline_options

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.scale

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
DUMP = SAMPLE / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = SAMPLE / "enwiki-sample-pages-articles-multistream-index.txt.bz2"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as local:
        yield local


def _dask_args(cluster) -> list[str]:
    return ["--runner", "DaskRunner", "--dask_client_address", cluster.scheduler_address]


class _Split(beam.DoFn):
    def process(self, number, offset):
        if number % 3 == 0:
            yield beam.pvalue.TaggedOutput("fizz", number + offset)
        else:
            yield number


def _write(values, path: str) -> None:
    Path(path).write_text(json.dumps(sorted(values)))


def _toy_pipeline(options, out: Path) -> None:
    with beam.Pipeline(options=options) as pipeline:
        numbers = pipeline | beam.Create(range(40))
        offset = pipeline | "Offset" >> beam.Create([1000])
        split = numbers | beam.ParDo(_Split(), beam.pvalue.AsSingleton(offset)).with_outputs("fizz", main="rest")
        names = pipeline | "Names" >> beam.Create([(n, f"n{n}") for n in range(0, 40, 5)])
        joined = (
            {"rest": split.rest | beam.Map(lambda n: (n % 10, n)), "names": names}
            | beam.CoGroupByKey()
            | beam.MapTuple(lambda k, g: (k, sorted(g["rest"]), sorted(g["names"])))
        )
        joined | "CollectJoined" >> beam.combiners.ToList() | "WriteJoined" >> beam.Map(_write, str(out / "joined"))
        split.fizz | "CollectFizz" >> beam.combiners.ToList() | "WriteFizz" >> beam.Map(_write, str(out / "fizz"))


def test_tagged_outputs_side_inputs_and_every_sink_run(cluster, tmp_path):
    direct, dask = tmp_path / "direct", tmp_path / "dask"
    direct.mkdir()
    dask.mkdir()
    _toy_pipeline(pipeline_options(), direct)
    _toy_pipeline(pipeline_options(extra_args=_dask_args(cluster)), dask)
    assert json.loads((dask / "fizz").read_text()) == [1000 + n for n in range(0, 40, 3)]
    for sink in ("fizz", "joined"):  # both sinks ran, each on its own tag's records
        assert (dask / sink).read_text() == (direct / sink).read_text()


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.parquet"))}


def test_extract_and_walk_on_dask_match_the_direct_runner(cluster, tmp_path):
    source = ["--dump", str(DUMP), "--index", str(INDEX)]
    for runner, extra in (("direct", []), ("dask", _dask_args(cluster))):
        out = tmp_path / runner
        assert main(["extract", *source, "--out", str(out / "graph"), *extra]) == 0
        assert main(["walk", "--graph", str(out / "graph"), "--out", str(out / "paths"), *extra]) == 0
    for stage in ("graph", "paths"):
        direct, dask = _files(tmp_path / "direct" / stage), _files(tmp_path / "dask" / stage)
        assert direct and dask == direct
        assert read_manifest(tmp_path / "dask" / stage).counts == read_manifest(tmp_path / "direct" / stage).counts
    with bz2.open(INDEX, "rt") as index:  # one line per page of the sample
        assert read_manifest(tmp_path / "dask" / "graph").counts["pages_in"] == len(index.read().splitlines())
