"""Stage 1's two paths give the same bytes: the default in-process runner with one worker calls the
pipeline's steps as plain functions (`extract.in_process`), every other runner runs the Beam pipeline
(`extract.transforms`). On the shipped sample and on a crafted hostile dump both write the same files
(the manifest's sha256 of each), counts, work units and as-of; and the default path imports no Beam."""

from __future__ import annotations

import bz2
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extract.sources.dump_writer import page_xml, write_multistream
from extract.stage import run_extract
from schemas.config import BeamOptions, ExtractConfig
from schemas.wiki import Page

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
DUMP = SAMPLE / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = SAMPLE / "enwiki-sample-pages-articles-multistream-index.txt.bz2"
THE_PIPELINE = BeamOptions(direct_running_mode="multi_threading")  # the same runner, through Beam
NEWEST = dt.datetime(2024, 5, 20, tzinfo=dt.UTC)


def _page(page_id: int, title: str, text: str, days_old: int = 1, ns: int = 0, revision: int = 0) -> Page:
    return Page(page_id=page_id, title=title, ns=ns, revision_id=revision or 1000 + page_id,
                timestamp=NEWEST - dt.timedelta(days=days_old), text=text)


def _person(name: str, spouse: str, place: str) -> str:
    return (f"{{{{Infobox person\n| name = {name}\n| image = {name}.jpg\n| spouse = [[{spouse}]]\n"
            f"| birth_place = [[{place}]]\n| occupation = lawyer, [[Politician]]\n}}}}\n"
            f"'''{name}''' is a person from [[{place}]]. {name} married [[{spouse}]].")


def _hostile_pages() -> list[Page]:
    """Redirect chains and a cycle across units, links and a named value through them, a title twice with
    two revisions (the later one in the earlier unit), an exact copy, a disambiguation page, a template,
    a broken and an oversized page, a revision dated in 2099 and an entity outside the window."""
    ada = _page(1, "Ada Lovelace", _person("Ada Lovelace", "Lord King", "London"))
    return [
        ada,
        _page(2, "William King", _person("William King", "Countess Lovelace", "Ockham"), days_old=300),
        _page(3, "London", "{{Infobox settlement\n| name = London\n| country = Kingdom\n}}\n"
              "'''London''' is the capital of [[England]].", days_old=30),
        _page(4, "Lord King", "#REDIRECT [[King William]]"),
        _page(5, "King William", "#REDIRECT [[William King]]"),
        _page(6, "Countess Lovelace", "#REDIRECT [[Ada Lovelace]]"),
        _page(7, "Loop A", "#REDIRECT [[Loop B]]"),
        _page(8, "Loop B", "#REDIRECT [[Loop A]]"),
        _page(9, "Kingdom", "#REDIRECT [[England]]"),
        _page(10, "Ada (disambiguation)", "'''Ada''' may refer to:\n* [[Ada Lovelace]]\n{{disambiguation}}"),
        _page(11, "Template:Infobox person", "{{{name}}}", ns=10),
        _page(12, "Broken", "{{Infobox person\n| name = Broken\n| spouse = [[Nobody\n\n'''Broken''' is."),
        _page(13, "Oversized", "'''Oversized''' is big. " + "word " * 6000),
        _page(14, "England", "'''England''' is a country. Its capital is [[London]].", days_old=500),
        _page(15, "William King", _person("William King", "Ada Lovelace", "Ockham"), days_old=2, revision=9000),
        ada.model_copy(update={"page_id": 16}),  # an exact copy under another page id
        _page(17, "Future", "'''Future''' is a town in [[England]].", days_old=-27_000),
        _page(18, "Ockham", "'''Ockham''' is a village in [[Kingdom]].", days_old=10),
        _page(19, "Lost One", "'''Lost One''' is in a damaged stream."),
        _page(20, "Lost Two", "'''Lost Two''' is in a damaged stream."),
    ]


@pytest.fixture(scope="module")
def hostile_dump(tmp_path_factory) -> tuple[Path, Path]:
    """The pages above in streams of 2, the last one damaged (its pages lost: one index mismatch), and a
    stream whose second half is cut off after the end (truncated)."""
    folder = tmp_path_factory.mktemp("hostile")
    dump, index = folder / "hostilewiki-20240601-pages-articles-multistream.xml.bz2", folder / "index.txt.bz2"
    pages = _hostile_pages()
    offsets = write_multistream(pages, dump, index, pages_per_stream=2)
    data = bytearray(dump.read_bytes())
    data[offsets[9] + 4:offsets[9] + 40] = b"\x00" * 36  # the stream of "Lost One" and "Lost Two"
    last = bz2.compress(page_xml(_page(19, "Cut Short", "'''Cut Short''' never arrives. " * 40)).encode())
    dump.write_bytes(bytes(data) + last[: len(last) // 2])
    return dump, index


def _both_paths(config: ExtractConfig, folder: Path):
    plain = run_extract(config, folder / "plain")
    beam = run_extract(config, folder / "beam", THE_PIPELINE)
    return plain, beam


def _same(plain, beam) -> None:
    assert plain.files == beam.files  # every output file: the same size and sha256
    assert plain.outputs == beam.outputs and plain.counts == beam.counts
    assert (plain.as_of, plain.as_of_reason, plain.work_units) == (beam.as_of, beam.as_of_reason, beam.work_units)


def test_both_paths_write_the_same_files_on_the_sample(tmp_path):
    plain, beam = _both_paths(ExtractConfig(dump=str(DUMP), index=str(INDEX), streams_per_unit=2), tmp_path)
    _same(plain, beam)
    assert plain.work_units["units"] > 1 and plain.counts["pages_in"] == plain.counts["kept"] + plain.counts["skipped"]


def test_both_paths_write_the_same_files_and_accounting_on_a_hostile_dump(tmp_path, hostile_dump):
    dump, index = hostile_dump
    config = ExtractConfig(dump=str(dump), index=str(index), streams_per_unit=2, max_page_bytes=20_000,
                           output_shards=3)
    plain, beam = _both_paths(config, tmp_path)
    _same(plain, beam)
    counts = plain.counts
    assert counts["pages_in"] == counts["kept"] + counts["skipped"]
    for reason in ("redirect", "redirect_cycle", "duplicate", "disambiguation", "non_article", "broken_markup",
                   "oversized", "corrupt_bz2", "index_mismatch", "truncated_bz2"):
        assert counts.get(f"skipped:{reason}", 0) >= 1, reason
    assert counts["implausible_timestamps"] == 1 and counts["head_entities"] >= 1


def test_the_default_path_imports_no_beam(tmp_path):
    """`hopsmith extract` with Beam's defaults runs to the end without importing apache_beam (about 1.3
    CPU-s of start-up)."""
    script = (
        "import sys\n"
        "from cli.main import main\n"
        f"code = main(['extract', '--dump', {str(DUMP)!r}, '--out', {str(tmp_path / 'g')!r}])\n"
        "print(code, 'apache_beam' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.stdout.strip().splitlines()[-1] == "0 False", result.stdout + result.stderr
