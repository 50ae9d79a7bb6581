"""Phase 1 of the Beam pipeline: work units.

Beam runs the stage in two phases. Phase 1 reads each work unit (a multistream byte range; the API's pages
in hash buckets), classifies its records and extracts every article with its link targets as written, and
stores the unit's rows as parts (`parts/<table>/<unit>.parquet`). A unit whose parts all exist is finished:
a rerun after a kill reads and parses only the units that are not. Phase 2 (`extract.joins`,
`extract.shards`) joins the parts: duplicates, redirect chains (a keyed join, not a side input), link
targets, aliases and the recency window, and writes the shards. Phase 2 is the same whichever units were
reused."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pydantic import AwareDatetime

from extract.article import RELATION_FACT_COLUMNS, RelationFacts, extract_article, relation_facts
from extract.as_of import AsOfChoice, NewestPlausible
from extract.classify import Redirect, classify_record
from extract.sources.dump import DumpUnit, dump_work_units, read_dump_unit
from ground.io import WorkUnits, atomic_write_text, read_column, read_records, read_table
from ground.storage import as_path
from knowledge.ontology import load_ontology
from runtime.heap import release_freed_memory
from schemas.base import Record, from_row
from schemas.config import ExtractConfig
from schemas.wiki import Entity, Page, Relation, SkippedRecord
from wikitext.markup import normalize_title


class ArticleRow(Record):
    """Phase 1's row for every article page, in the unit's order: when extraction skipped the page, why;
    else how many relations it has (the unit's entities, pages and relations follow the same order)."""

    title: str
    skip_reason: str | None = None
    skip_detail: str = ""
    relations: int = 0
    excluded: dict[str, int] = {}


class RedirectRow(Record):
    title: str
    target: str
    page_id: int


class UnitStats(Record):
    """A unit's page count and its part of the as-of choice (`NewestPlausible`'s accumulator)."""

    unit: str
    pages_in: int
    newest_plausible: AwareDatetime | None = None
    implausible: int = 0


UNIT_TABLES = {"articles": ArticleRow, "article_pages": Page, "entities": Entity, "relations": Relation,
               "skipped": SkippedRecord, "redirects": RedirectRow, "stats": UnitStats}


def _as_written(title: str) -> str:
    return title


def extract_unit(unit_id: str, records: Iterable[Page | SkippedRecord], config: ExtractConfig,
                 ceiling: dt.datetime) -> dict[str, list]:
    """Phase 1 on one unit's records: every table of `UNIT_TABLES`. Link targets stay as written and no
    entity is a head yet; duplicates are not decided (all three need the whole input: phase 2)."""
    rows: dict[str, list] = {table: [] for table in UNIT_TABLES}
    newest = NewestPlausible(ceiling)
    accumulator = newest.create_accumulator()
    pages_in = 0
    for record in records:
        pages_in += 1
        accumulator = newest.add_input(accumulator, record)
        outcome = classify_record(record)
        if isinstance(outcome, SkippedRecord):
            rows["skipped"].append(outcome)
            continue
        if isinstance(outcome, Redirect):
            rows["redirects"].append(RedirectRow(title=outcome.title, target=outcome.target, page_id=outcome.page_id))
            continue
        result = extract_article(outcome, _as_written, None, config)
        rows["article_pages"].append(outcome)
        if isinstance(result, SkippedRecord):
            rows["articles"].append(ArticleRow(title=normalize_title(outcome.title), skip_reason=result.reason,
                                               skip_detail=result.detail))
            continue
        rows["articles"].append(ArticleRow(title=result.entity.title, relations=len(result.relations),
                                           excluded=dict(result.excluded)))
        rows["entities"].append(result.entity)
        rows["relations"].extend(result.relations)
    rows["stats"].append(UnitStats(unit=unit_id, pages_in=pages_in, newest_plausible=accumulator[0],
                                   implausible=accumulator[1]))
    return rows


def dump_unit_id(unit: DumpUnit) -> str:
    """A unit's name: its byte range of the dump (the dump itself is pinned by the stage key)."""
    return f"bytes-{unit.start:015d}-{'end' if unit.end is None else f'{unit.end:015d}'}"


def plan_dump_units(config: ExtractConfig) -> list[tuple[str, DumpUnit]]:
    units = (dump_work_units(config.dump, config.index, config.streams_per_unit) if config.index
             else [DumpUnit(config.dump)])
    return [(dump_unit_id(unit), unit) for unit in units]


class ExtractUnit:
    """Phase 1 for one unit, unless its parts exist: yields (unit id, True when extracted in this run).
    A step with `setup` and `process`, as Beam's DoFns have (`extract.transforms` runs it as one).

    A dump unit arrives as its DumpUnit and is read here only when needed."""

    def __init__(self, config: ExtractConfig, out_dir: str, ceiling: dt.datetime):
        self.config, self.out_dir, self.ceiling = config, out_dir, ceiling

    def setup(self):
        load_ontology()  # once per worker, before any page's time limit starts (and before the freeze)

    def process(self, element):
        unit_id, source = element
        parts = WorkUnits(self.out_dir, UNIT_TABLES)
        # An API unit holds what this run fetched (a rerun fetches again): only dump units are reused.
        if isinstance(source, DumpUnit) and parts.is_done(unit_id):
            yield unit_id, False
            return
        records = read_dump_unit(DumpUnit(*source)) if isinstance(source, DumpUnit) else source
        rows = extract_unit(unit_id, records, self.config, self.ceiling)
        parts.write(unit_id, {table: (model, rows[table]) for table, model in UNIT_TABLES.items()})
        del rows
        release_freed_memory()
        yield unit_id, True


STATS_FILE = ".extract-stats.json"


def unit_stats(unit, out_dir: str) -> Iterator[UnitStats]:
    return UnitParts(out_dir, unit[0]).rows("stats")


def choose_as_of_from_stats(stats: list[UnitStats], config: ExtractConfig, ceiling) -> AsOfChoice:
    """The run's as-of from every unit's part of the choice."""
    merged = NewestPlausible(ceiling[0]).merge_accumulators((s.newest_plausible, s.implausible) for s in stats)
    return AsOfChoice.choose(config.as_of, *merged, ceiling)


def write_stats(stats: list[UnitStats], choice: AsOfChoice, excluded: dict, units: list, out_dir: str) -> None:
    """The run's counts for the manifest (`STATS_FILE`), written once phase 2 is done."""
    summary = {"pages_in": sum(s.pages_in for s in stats),
               "as_of": choice.as_of.isoformat() if choice.as_of else None,
               "as_of_reason": choice.reason, "implausible": choice.implausible, "excluded": excluded,
               "units": len(units), "units_extracted": sum(extracted for _, extracted in units)}
    atomic_write_text(as_path(out_dir) / STATS_FILE, json.dumps(summary))


class UnitParts:
    """One finished unit's parts, read from disk on demand: phase 2 moves keys through the shuffle and
    reads each unit's rows (page text, relations) only where they are rewritten, one unit at a time."""

    def __init__(self, out_dir: str, unit_id: str):
        self.parts, self.unit_id = WorkUnits(out_dir, UNIT_TABLES), unit_id

    def rows(self, table: str) -> Iterator:
        return read_records(UNIT_TABLES[table], self.parts.part_path(table, self.unit_id))

    def columns(self, table: str, *names: str) -> list[list]:
        """Some fields of a part, each as a list of its values: a join that reads a few fields of every row
        decodes and validates no record."""
        return [list(read_column(self.parts.part_path(table, self.unit_id), name)) for name in names]

    def relations(self) -> tuple[list[RelationFacts], pa.Table]:
        """The unit's relations as the facts the page rules read (`RelationFacts`, in the part's order),
        and the part itself as Arrow, whose rows the kept relations are copied from."""
        table = read_table(Relation, self.parts.part_path("relations", self.unit_id))
        return relation_facts({name: table.column(name).to_pylist() for name in RELATION_FACT_COLUMNS}), table

    def articles(self) -> Iterator[tuple[tuple[str, int], ArticleRow]]:
        """(key, row) for every article in the unit's order; `key` names it across the run, and its second
        part is the article's row in `pages()`."""
        for seq, row in enumerate(self.rows("articles")):
            yield (self.unit_id, seq), row

    def pages(self) -> pa.Table:
        """The unit's article pages as Arrow, one row per article in the unit's order: the kept ones are
        copied as rows (most of a unit's bytes are page text), and only a page that is judged is decoded
        (`page_at`)."""
        table = read_table(Page, self.parts.part_path("article_pages", self.unit_id))
        return table.combine_chunks()


def page_at(pages: pa.Table, row: int) -> Page:
    """One row of `UnitParts.pages` as a validated Page."""
    return from_row(Page, pages.slice(row, 1).to_pylist()[0])
