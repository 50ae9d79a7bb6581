"""Stage 1 at scale: redirect chains resolved by a keyed join exactly as the in-memory reference does, and
an extract killed mid-run resuming per work unit (multistream byte range) to identical shards."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from bench.scale import AS_OF, synthetic_pages
from cli.main import main
from extract import tables
from extract.article import (
    RELATION_FACT_COLUMNS,
    check_ranges,
    distinct_relations,
    named_value_key,
    relation_facts,
    value_naming,
)
from extract.classify import Redirect, classify_record, resolve_redirects
from extract.joins import resolve_pointers
from extract.oracle import extract_records
from extract.shards import kept_rows
from extract.sources import iter_dump_pages
from extract.sources.dump_writer import write_multistream
from extract.stage import run_extract
from extract.tables import TABLES
from extract.transforms import ResolveRedirects
from extract.units import UNIT_TABLES
from ground import io
from ground.io import WorkUnits, read_manifest, read_records, read_table
from schemas.base import arrow_schema, to_table
from schemas.config import ExtractConfig
from schemas.wiki import Relation, SkippedRecord

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream-index.txt.bz2"


def _sample_redirects() -> dict[str, str]:
    classified = (classify_record(r) for r in iter_dump_pages(DUMP))
    return {c.title: c.target for c in classified if isinstance(c, Redirect)}


def _joined(redirects: dict[str, str]):
    """The keyed join (Beam) and its in-memory twin (`resolve_pointers`) against the reference."""
    expected = resolve_redirects(redirects)
    with beam.Pipeline() as pipeline:
        out = pipeline | beam.Create(sorted(redirects.items())) | ResolveRedirects()
        assert_that(out.resolved, equal_to(sorted(expected.resolved.items())), label="Resolved")
        assert_that(out.cycles, equal_to(sorted(expected.cycles)), label="Cycles")
    resolved, cycles = resolve_pointers(redirects.items())
    assert (sorted(resolved), sorted(cycles)) == (sorted(expected.resolved.items()), sorted(expected.cycles))
    return expected


def test_join_resolves_the_sample_redirects_as_the_reference():
    redirects = _sample_redirects()
    assert len(redirects) >= 10
    expected = _joined(redirects)
    assert any(redirects[t] != final for t, final in expected.resolved.items())  # the sample has chains


def test_join_resolves_chains_and_cycles_as_the_reference():
    long_chain = {f"Step {i}": f"Step {i + 1}" for i in range(20)}  # 20 hops to the article "Step 20"
    redirects = {"A": "B", "B": "C", "C": "D", "X": "Y", "Y": "X", "Z": "X", "Self": "Self",
                 "Into": "Loop 1", "Loop 1": "Loop 2", "Loop 2": "Loop 1", "Fan 1": "D", "Fan 2": "A",
                 **long_chain}
    expected = _joined(redirects)
    assert expected.resolved["Step 0"] == "Step 20" and expected.resolved["Fan 2"] == "D"
    assert {"X", "Y", "Z", "Self", "Into", "Loop 1", "Loop 2"} == expected.cycles


def _shards(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.glob("*/*.parquet"))}


def test_killed_extract_resumes_only_unfinished_units(tmp_path):
    args = ["extract", "--dump", str(DUMP), "--index", str(INDEX), "--streams-per-unit", "1"]
    fresh, resumed = tmp_path / "fresh", tmp_path / "resumed"
    assert main([*args, "--out", str(fresh)]) == 0
    units = read_manifest(fresh).work_units["units"]
    assert units > 2 and read_manifest(fresh).work_units == {"units": units, "extracted": units, "reused": 0}
    assert not (fresh / "parts").exists()  # a finished stage keeps no parts

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "cli.main", *args, "--out", str(resumed)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = WorkUnits(resumed, UNIT_TABLES)
    stats = parts.table_folder("stats")
    deadline = time.monotonic() + 240
    while process.poll() is None and not list(stats.glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert read_manifest(resumed) is None, "the run finished before it could be killed"
    done = {p.stem for p in stats.glob("*.parquet") if parts.is_done(p.stem)}
    assert 1 <= len(done) < units

    assert main([*args, "--out", str(resumed)]) == 0
    assert read_manifest(resumed).work_units == {"units": units, "extracted": units - len(done), "reused": len(done)}
    assert _shards(resumed) == _shards(fresh)


def test_runs_merge_in_steps_in_order_keeping_ties_in_run_order(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "MERGE_FAN_IN", 2)  # 5 runs: two levels of intermediate merges
    monkeypatch.setattr(io, "RUN_BATCH_ROWS", 2)
    monkeypatch.setattr(io, "MERGE_TAKE_ROWS", 3)
    runs, expected = [], []
    for run in range(5):
        rows = [SkippedRecord(title=f"T{n:02d}", stage="extract", reason=f"run{run}")
                for n in range(run, 12, 2 if run % 2 else 3)] if run != 3 else []
        runs.append(tmp_path / f"run{run}.arrows")
        io.write_run(arrow_schema(SkippedRecord), [to_table(SkippedRecord, rows)], runs[-1], 2)
        expected += rows
    expected.sort(key=lambda row: row.title)  # stable: equal titles in run order
    out = tmp_path / "out" / "part.parquet"
    with monkeypatch.context() as patch:  # rows are copied as Arrow, never decoded into records
        patch.setattr(io, "from_row", lambda *args: pytest.fail("the merge decoded a row"))
        assert io.merge_runs(SkippedRecord, runs, tables.title_sort_keys, out, tmp_path / "scratch",
                             group_bytes=1) == len(expected)
    assert list(read_records(SkippedRecord, out)) == expected
    assert [group.num_rows for group in _row_groups(out)] == [3] * 5 + [2]  # each copy of 3 rows is >= 1 byte
    steps = sorted((tmp_path / "scratch").glob("merge*"))
    assert [step.name for step in steps] == [*(f"merge0-{n:05d}.arrows" for n in range(3)),
                                             *(f"merge1-{n:05d}.arrows" for n in range(2))]  # 5 -> 3 -> 2 -> 1
    # intermediate runs are runs too: Arrow streams (no footer to hold) in batches of RUN_BATCH_ROWS
    assert {batch.num_rows for step in steps for batch in io.run_batches(step)} == {1, 2}
    default = tmp_path / "default.parquet"  # row groups of OUTPUT_GROUP_BYTES: all 17 rows in one
    assert io.merge_runs(SkippedRecord, runs, tables.title_sort_keys, default, tmp_path / "scratch") == 17
    assert [group.num_rows for group in _row_groups(default)] == [17]
    assert list(read_records(SkippedRecord, default)) == expected
    assert io.merge_runs(SkippedRecord, runs[3:4], tables.title_sort_keys, tmp_path / "none.parquet",
                         tmp_path / "scratch") == 0 and not (tmp_path / "none.parquet").exists()


def _row_groups(path: Path) -> list:
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(index) for index in range(metadata.num_row_groups)]


def test_merge_keys_read_from_arrow_are_the_records_sort_keys():
    skipped = [SkippedRecord(title="A", stage="extract", reason="redirect", page_id=7, detail="to B"),
               SkippedRecord(title="A", stage="extract", reason="redirect")]
    relations = extract_records(synthetic_pages(30, seed=2), ExtractConfig(as_of=AS_OF)).relations
    assert relations
    batches = {model: to_table(model, records).to_batches()[0]
               for model, records in ((SkippedRecord, skipped), (Relation, relations))}
    assert tables.skipped_sort_keys(batches[SkippedRecord]) == [tables.skipped_sort_key(r) for r in skipped]
    assert tables.relation_merge_keys(batches[Relation]) == [(r.head, r.provenance.page_id) for r in relations]


def _apply_page_rules(relations, replace):
    """The rules `FinishUnit` applies to a page's relations, with `replace(relation, fields)` making the
    changed copy: every third tail resolved elsewhere, each value that could name a page named "Named
    Page", then the range check with every linked page a Person."""
    resolved = [replace(r, {"tail": f"{r.tail} (final)"}) if r.tail is not None and i % 3 == 0 else r
                for i, r in enumerate(relations)]
    named = []
    for relation in distinct_relations(relations[0].head, resolved):
        update = value_naming(relation, "Named Page" if named_value_key(relation) else None)
        named.append(relation if update is None else replace(relation, update))
    counts = Counter()
    return check_ranges(named, lambda _: "Person", counts), counts


def test_page_rules_on_relation_facts_copy_the_rows_the_records_give():
    """Phase 2 reads a unit's relations as `RelationFacts` and copies the kept rows as Arrow with the
    fields the rules changed (`kept_rows`): the table is the one the records give, rewritten and encoded."""
    sample = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
    relations = extract_records(itertools.islice(iter_dump_pages(sample), 30), ExtractConfig()).relations
    assert any(r.qualifiers for r in relations)
    part = to_table(Relation, relations)
    facts = relation_facts({name: part.column(name).to_pylist() for name in RELATION_FACT_COLUMNS})
    kept_records, record_counts = _apply_page_rules(relations, lambda r, fields: r.model_copy(update=fields))
    kept_facts, fact_counts = _apply_page_rules(facts, lambda f, fields: f._replace(**fields))
    assert kept_rows(part, kept_facts).equals(to_table(Relation, kept_records))
    assert fact_counts == record_counts and fact_counts["range"]  # the check dropped some
    assert 0 < len(kept_records) < len(relations)
    assert any(r.value_type == "entity" and r.tail == "Named Page" for r in kept_records)
    assert any(r.tail and r.tail.endswith("(final)") for r in kept_records)


def test_joins_across_units_match_the_plain_functions(tmp_path):
    """Phase 2 on a dump of 6 units: redirect chains, links and named values pointing into other units,
    and a title duplicated across units (the later revision in an earlier unit) give the rows
    `extract_records` gives, and each table's rows come out in order."""
    pages = list(synthetic_pages(450, seed=5))
    late = next(p for p in pages if p.title == "Entity 7")
    pages[-1] = late.model_copy(update={"page_id": 9_999, "revision_id": 1, "text": late.text + " Older."})
    pages[100] = pages[100].model_copy(update={"text": pages[100].text.replace(
        "{{Infobox", "{{Infobox settlement\n| country = Entity 3\n| capital = Alias 10\n}}\n{{Infobox", 1)})
    dump, index = tmp_path / "syn-pages-articles-multistream.xml.bz2", tmp_path / "syn-index.txt.bz2"
    write_multistream(pages, dump, index)
    config = ExtractConfig(dump=str(dump), index=str(index), streams_per_unit=1, output_shards=3, as_of=AS_OF)
    manifest = run_extract(config, tmp_path / "graph")
    assert manifest.work_units["units"] == 6 and manifest.counts["skipped:duplicate"] == 1
    local = extract_records(iter_dump_pages(dump), config)
    assert any(r.source == "infobox" and r.tail == "Entity 10" and r.relation == "capital" for r in local.relations)
    for table, model in TABLES.items():
        written = [row for shard in manifest.outputs[table] for row in read_table(model, tmp_path / "graph" / shard).to_pylist()]
        expected = to_table(model, getattr(local, table)).to_pylist()
        assert sorted(map(repr, written)) == sorted(map(repr, expected)), table
    for shard in manifest.outputs["relations"]:
        heads = read_table(Relation, tmp_path / "graph" / shard).column("head").to_pylist()
        assert heads == sorted(heads)
