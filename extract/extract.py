"""Stage 1 extraction: pages -> typed entity-relation graph (entities, relations, skipped, pages + manifest).

Steps, each a plain function the Beam pipeline and `extract_records` (one process, no Beam) share:

1. `classify_record`: every input record is an article, a redirect, or a SkippedRecord (read errors from
   the source, `non_article` namespaces, `disambiguation` pages).
2. `resolve_redirects`: the redirect map with chains followed to their end; pages in a cycle are skipped
   as `redirect_cycle`, the others as `redirect` (they live on as aliases of their target).
3. `pick_duplicate`: a title seen twice keeps its latest revision (of exact copies, one); the others are
   `duplicate`. Only titles seen more than once are grouped, so the shuffle holds only their pages.
4. `extract_article`: one article -> Entity, Relations (infobox facts + lead `links_to`) and its Page,
   or a SkippedRecord (`oversized`, `timeout`, `parse_error`, `broken_markup`). Head entities are those
   whose revision lies within `window_days` before `as_of` (default: the newest plausible revision in the
   input; see `AsOfChoice`).
5. `attach_aliases`: redirect titles become the aliases of the entity they resolve to.

Every input record ends as exactly one kept entity or one skipped row, so `pages_in == kept + skipped`
holds and is checked before the manifest is written.

Speed: a full mwparserfromhell parse runs at ~2 MB/s. Here only the infobox spans, found by brace matching
on the raw text (`wikitext.markup.infobox_spans`), are parsed; the lead is read with regexes.

Scale (the Beam pipeline, `ExtractUnits` + `ExtractGraph`): phase 1 extracts each work unit (a multistream
byte range) into parts, so a killed run redoes only the units without parts; phase 2 resolves redirect
chains, link targets and aliases by keyed joins (CoGroupByKey), so no worker holds the redirect map. The
side inputs left are the as-of choice (one value), the duplicated titles with the losing revisions'
keys (sized by the duplicates, a few hundred in an enwiki dump), the unit ids and two counts. Each table
is written as `part-NNNNN-of-NNNNN.parquet` shards keyed by a hash of the title and sorted inside, so the
files are the same bytes whatever the runner, worker count or units reused.

Time limit per page: mwparserfromhell's C tokenizer holds the GIL, so no thread can interrupt it and an
alarm only fires between Python bytecodes. The guard is therefore layered: (1) the size cap and the
brace/bracket balance check keep pathological input (the usual cause of parser blow-ups) away from the
tokenizer, and spans are parsed one at a time; (2) Python-level work (tree walks, the pure-Python parts
of the parser, fact extraction) is interrupted when the time is up: in the main thread by a SIGALRM
timer, in any other thread (Beam's worker threads with `--direct_num_workers 2`, in every running mode)
by one watchdog thread per process that raises the timeout in the late thread between two bytecodes, as
the alarm does; (3) a deadline is also checked between spans and infoboxes. A page over its time becomes
`timeout`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import logging
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
from mwparserfromhell.parser import ParserError
from pydantic import AwareDatetime

from extract.sources import add_source_arguments, check_readable, source_config, source_transform
from extract.sources.dump import DumpUnit, dump_work_units, read_dump_unit
from ground.deadline import Deadline, PageTimeout
from ground.errors import StageIncomplete, UserError
from ground.io import (
    WorkUnits,
    atomic_write_text,
    gather_tables,
    merge_sorted_batches,
    read_column,
    read_records,
    run_batches,
    shard_files,
    write_records,
    write_run,
    write_table_stream,
)
from ground.stage import begin_stage
from ground.storage import as_path, remove_tree
from knowledge.ontology import load_ontology
from runtime.beam import BoundedHeapDoFn, pipeline_options, use_filesystem_options
from runtime.heap import release_freed_memory
from schemas.base import Record, arrow_schema, to_table, utc
from schemas.config import BeamOptions, ExtractConfig
from schemas.manifest import Manifest
from schemas.wiki import Entity, Page, Provenance, Qualifier, Relation, SkippedRecord
from wikitext.infobox import Fact, Infobox, parse_infoboxes
from wikitext.markup import (
    BrokenMarkup,
    TooDeep,
    infobox_spans,
    is_disambiguation,
    is_list_page,
    lead_sentences,
    normalize_title,
    redirect_target,
)

log = logging.getLogger(__name__)

STAGE = "extract"
TABLES = {"entities": Entity, "relations": Relation, "skipped": SkippedRecord, "pages": Page}
UNTYPED_ENTITY = "thing"
MAX_TITLE_CHARS = 255  # MediaWiki's limit: a longer value names no page
LIST_CLASS = "List"
_CATEGORY = re.compile(r"\[\[\s*[Cc]ategory\s*:\s*([^\]|\n]+)")
_STATS_FILE = ".extract-stats.json"
IMPLAUSIBLE_COUNT = "implausible_timestamps"  # revisions dated after the dump's date or the run


# ------------------------------------------------------------------------------------ classification

@dataclasses.dataclass(frozen=True)
class Redirect:
    title: str
    target: str
    page_id: int


def classify_record(record: Page | SkippedRecord) -> Page | Redirect | SkippedRecord:
    """An article Page, a Redirect, or a SkippedRecord (source errors, non-article, disambiguation)."""
    if isinstance(record, SkippedRecord):
        return record
    if record.ns != 0:
        return _skip(record, "non_article", f"namespace {record.ns}")
    title = normalize_title(record.title)
    target = normalize_title(record.redirect_to) if record.redirect_to else redirect_target(record.text)
    if target:
        return Redirect(title, target, record.page_id)
    if is_disambiguation(title, record.text):
        return _skip(record, "disambiguation", "")
    return record


def _skip(page: Page, reason: str, detail: str) -> SkippedRecord:
    return SkippedRecord(title=page.title, stage=STAGE, reason=reason, detail=detail[:500], page_id=page.page_id)


# ------------------------------------------------------------------------------------------ redirects

@dataclasses.dataclass
class RedirectTable:
    """Every redirect title -> its final target; titles caught in a cycle map nowhere."""

    resolved: dict[str, str]
    cycles: frozenset[str]

    def resolve(self, title: str) -> str:
        return self.resolved.get(title, title)


def resolve_redirects(redirects: dict[str, str]) -> RedirectTable:
    """Follow each redirect chain to its end (A -> B -> C gives A -> C, B -> C); chains that loop are cycles."""
    resolved: dict[str, str] = {}
    cycles: set[str] = set()
    for start in redirects:
        if start in resolved or start in cycles:
            continue
        chain, seen, current = [], set(), start
        while current in redirects and current not in seen and current not in resolved and current not in cycles:
            seen.add(current)
            chain.append(current)
            current = redirects[current]
        if current in seen or current in cycles:
            cycles.update(chain)
        else:
            final = resolved.get(current, current)
            for title in chain:
                resolved[title] = final
    return RedirectTable(resolved, frozenset(cycles))


def redirect_outcome(redirect: Redirect, table: RedirectTable) -> SkippedRecord:
    """A redirect page's row in `skipped`: it is not an entity, but it is accounted for."""
    if redirect.title in table.cycles:
        return SkippedRecord(title=redirect.title, stage=STAGE, reason="redirect_cycle",
                             detail=f"-> {redirect.target}", page_id=redirect.page_id)
    return SkippedRecord(title=redirect.title, stage=STAGE, reason="redirect",
                         detail=f"-> {table.resolve(redirect.title)}", page_id=redirect.page_id)


# ----------------------------------------------------------------------------------------- duplicates

def revision_rank(page: Page) -> tuple:
    return (utc(page.timestamp), page.revision_id, page.page_id)


def duplicate_titles(articles: Iterable[Page]) -> set[str]:
    """Titles that occur more than once."""
    seen: Counter[str] = Counter(normalize_title(page.title) for page in articles)
    return {title for title, count in seen.items() if count > 1}


def duplicate_rank(page: Page) -> tuple:
    """Which of pages sharing a title is kept: the highest rank (exact copies of one revision tie)."""
    return revision_rank(page), page.model_dump_json()


def pick_duplicate(pages: Iterable[Page]) -> tuple[Page, list[SkippedRecord]]:
    """Of pages sharing a title: the latest revision, and a `duplicate` skip for each other one. Exact
    copies of one revision tie; the first by content is kept, so every runner keeps the same one."""
    ordered = sorted(pages, key=duplicate_rank, reverse=True)
    kept, rank = ordered[0], revision_rank(ordered[0])
    title = normalize_title(kept.title)
    skipped = [_skip(page, "duplicate", f"an exact copy of the kept revision of {title!r}"
                     if revision_rank(page) == rank else f"a later revision of {title!r} is kept")
               for page in ordered[1:]]
    return kept, skipped


# ------------------------------------------------------------------------------------------ articles

@dataclasses.dataclass
class ArticleResult:
    entity: Entity
    relations: list[Relation]
    page: Page
    excluded: Counter = dataclasses.field(default_factory=Counter)  # plumbing left out, by reason


def is_head(timestamp: dt.datetime, as_of: dt.datetime | None, window_days: int) -> bool:
    """Inside the recency window: `0 <= as_of - timestamp <= window_days` (measured against the dump)."""
    if as_of is None:
        return False
    age = utc(as_of) - utc(timestamp)
    return dt.timedelta(0) <= age <= dt.timedelta(days=window_days)


def extract_article(
    page: Page, resolve: Callable[[str], str], as_of: dt.datetime | None, config: ExtractConfig
) -> ArticleResult | SkippedRecord:
    """One article -> its entity, relations and page, or a SkippedRecord with the reason it was not read."""
    size = len(page.text.encode("utf-8"))
    if size > config.max_page_bytes:
        return _skip(page, "oversized", f"{size} bytes > max_page_bytes {config.max_page_bytes}")
    deadline = Deadline(config.page_timeout_s)
    try:
        with deadline.alarm():
            return _read_article(page, resolve, as_of, config, deadline)
    except PageTimeout as error:
        return _skip(page, "timeout", str(error))
    except BrokenMarkup as error:
        return _skip(page, "broken_markup", str(error))
    except TooDeep as error:
        return _skip(page, "parse_error", str(error))
    except RecursionError as error:
        return _skip(page, "parse_error", f"RecursionError: {error}")
    except Exception as error:  # mwparserfromhell.ParserError and anything else a page trips over
        if not isinstance(error, ParserError):  # counted, but loud: it may be a bug rather than bad markup
            log.warning("extract: %r skipped as parse_error", page.title, exc_info=True)
        return _skip(page, "parse_error", f"{type(error).__name__}: {error}")


def _read_article(
    page: Page, resolve: Callable[[str], str], as_of: dt.datetime | None, config: ExtractConfig, deadline: Deadline
) -> ArticleResult:
    title = normalize_title(page.title)
    text = page.text
    boxes = []
    for span in infobox_spans(text):
        boxes.extend(parse_infoboxes(text[span.start : span.end]))
        deadline.check()
    provenance = {"page_id": page.page_id, "page_title": title, "revision_id": page.revision_id,
                  "timestamp": page.timestamp}
    relations = [_relation(title, fact, resolve, provenance) for box in boxes for fact in box.facts]
    deadline.check()
    sentences = lead_sentences(text)
    for sentence in sentences:
        for link in sentence.links:
            relations.append(Relation(head=title, relation="links_to", tail=resolve(link.target),
                                      value_type="entity", source="link", evidence=sentence.text,
                                      provenance=Provenance(**provenance)))
    relations = distinct_relations(title, relations)
    first_box = boxes[0].name if boxes else None
    excluded: Counter = Counter()
    for box in boxes:
        excluded.update(box.excluded)
    entity = Entity(
        title=title,
        type=entity_class(title, boxes, sentences[0].text if sentences else "", text),
        description=sentences[0].text if sentences else "",
        last_modified=page.timestamp,
        is_head=is_head(page.timestamp, as_of, config.window_days),
        page_id=page.page_id,
        revision_id=page.revision_id,
        infobox=first_box,
        is_list=is_list_page(title),
    )
    kept_page = page if page.title == title else page.model_copy(update={"title": title})
    return ArticleResult(entity, relations, kept_page, excluded)


def entity_class(title: str, boxes: list[Infobox], lead: str, text: str) -> str:
    """The page's ontology class: its first mapped infobox's, `List` for a list page, else the lead sentence's
    "X is a ..." noun, else a category's words (the overlay's tables), else `thing` (untyped)."""
    for box in boxes:
        if box.cls:
            return box.cls
    if is_list_page(title):
        return LIST_CLASS
    ontology = load_ontology()
    return (ontology.type_from_lead(lead) or ontology.type_from_categories(_CATEGORY.findall(text))
            or UNTYPED_ENTITY)


def distinct_relations(title: str, relations: Iterable[Relation]) -> list[Relation]:
    """A page's relations in order, without repeats: an infobox fact stated twice is kept once, a lead
    link once per target and never to the page itself. Keeping the first of each kind is stable under
    redirect resolution, so the join-based pipeline applies it again after resolving the tails."""
    kept: list[Relation] = []
    seen: set[tuple] = set()
    for relation in relations:
        if relation.source == "link":
            if relation.tail == title:
                continue
            key = ("link", relation.tail)
        else:
            key = (relation.relation, relation.group_index, relation.tail, relation.value, relation.unit,
                   tuple((q.key, q.value) for q in relation.qualifiers))
        if key not in seen:
            seen.add(key)
            kept.append(relation)
    return kept


def _relation(head: str, fact: Fact, resolve: Callable[[str], str], provenance: dict) -> Relation:
    return Relation(
        head=head,
        relation=fact.property or fact.relation,
        mapped=fact.property is not None,
        group_index=fact.group_index,
        tail=resolve(fact.tail) if fact.tail else None,
        value=fact.value,
        value_type=fact.value_type,
        unit=fact.unit,
        date=fact.date,
        qualifiers=[Qualifier(key=k, value=v) for k, v in fact.qualifiers],
        source="infobox",
        provenance=Provenance(**provenance, infobox=fact.infobox, parameter=fact.parameter),
    )


def named_value_key(relation: Relation) -> str | None:
    """The title a plain-text infobox value would name ("country = Angola"), or None when it cannot."""
    value = relation.value
    if relation.source != "infobox" or relation.value_type != "string" or not value:
        return None
    if len(value) > MAX_TITLE_CHARS or any(char in value for char in "#<>[]{}|"):
        return None
    if relation.mapped and load_ontology().range_mismatch(relation.relation, "entity"):
        return None  # a date, number or measure that happens to spell a page title stays a value
    return normalize_title(value) or None


def name_value(relation: Relation, target: str | None) -> Relation:
    """A plain-text value that exactly names a page (or a redirect to one) becomes an edge to that page."""
    if target is None or target == relation.head:
        return relation
    return relation.model_copy(update={"tail": target, "value": None, "value_type": "entity"})


def attach_aliases(entity: Entity, aliases: Iterable[str]) -> Entity:
    names = sorted(set(aliases) - {entity.title})
    return entity.model_copy(update={"aliases": names}) if names else entity


# ------------------------------------------------------------------------------- one process, no Beam

@dataclasses.dataclass
class Extraction:
    """The whole stage output of `extract_records`, in the order it is written."""

    entities: list[Entity]
    relations: list[Relation]
    skipped: list[SkippedRecord]
    pages: list[Page]
    as_of: dt.datetime | None
    pages_in: int
    as_of_choice: AsOfChoice | None = None
    excluded: Counter = dataclasses.field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        counts = outcome_counts(self.pages_in, len(self.entities), [s.reason for s in self.skipped],
                                [r.source for r in self.relations], sum(e.is_head for e in self.entities),
                                self.excluded)
        if self.as_of_choice is not None and self.as_of_choice.implausible:
            counts[IMPLAUSIBLE_COUNT] = self.as_of_choice.implausible
        return counts


# ------------------------------------------------------------------------------------------- as-of

DUMP_DATE_SLACK = dt.timedelta(days=7)  # a dump named for the day it started takes days to write
_DUMP_DATE = re.compile(r"(?:^|[-_.])((?:19|20)\d{2})(\d{2})(\d{2})(?=[-_.])")


def dump_date(path: str | None) -> dt.date | None:
    """The date in a Wikimedia dump's file name (`enwiki-20240601-pages-articles...`), when it has one."""
    match = _DUMP_DATE.search(os.path.basename(path or ""))
    if match is None:
        return None
    try:
        return dt.date(*(int(part) for part in match.groups()))
    except ValueError:
        return None


def timestamp_ceiling(config: ExtractConfig, now: dt.datetime | None = None) -> tuple[dt.datetime, str]:
    """The latest plausible revision time and what set it: the dump's date (plus DUMP_DATE_SLACK) or now.
    A revision dated later (year 9999, a clock in the future) would otherwise become the default as-of."""
    now = utc(now or dt.datetime.now(dt.UTC))
    day = dump_date(config.dump)
    if day is not None:
        dated = dt.datetime.combine(day, dt.time(), dt.UTC) + DUMP_DATE_SLACK
        if dated < now:
            return dated, f"the dump's date {day.isoformat()} + {DUMP_DATE_SLACK.days} days"
    return now, "the time of the run"


@dataclasses.dataclass(frozen=True)
class AsOfChoice:
    """The snapshot time of a run and why it was chosen; `implausible` counts revisions dated after the
    ceiling, which are kept (never head entities) but never choose the as-of."""

    as_of: dt.datetime | None
    reason: str
    implausible: int = 0

    @classmethod
    def choose(cls, given: dt.datetime | None, newest: dt.datetime | None, implausible: int,
               ceiling: tuple[dt.datetime, str]) -> AsOfChoice:
        ignored = (f"; {implausible} revision(s) dated after {ceiling[0].isoformat()} ({ceiling[1]}) ignored"
                   if implausible else "")
        if given is not None:
            return cls(utc(given), "given by --as-of" + ignored, implausible)
        if newest is None:
            return cls(None, "no page with a plausible revision time" + ignored, implausible)
        return cls(newest, "the newest plausible revision in the input" + ignored, implausible)


class NewestPlausible(beam.CombineFn):
    """(newest revision time not after the ceiling, count of revisions after it) over Page records."""

    def __init__(self, ceiling: dt.datetime):
        self.ceiling = ceiling

    def create_accumulator(self):
        return (None, 0)

    def add_input(self, accumulator, record):
        newest, implausible = accumulator
        if not isinstance(record, Page):
            return accumulator
        stamp = utc(record.timestamp)
        if stamp > self.ceiling:
            return newest, implausible + 1
        return (stamp if newest is None or stamp > newest else newest), implausible

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        stamps = [newest for newest, _ in accumulators if newest is not None]
        return (max(stamps) if stamps else None), sum(n for _, n in accumulators)

    def extract_output(self, accumulator):
        return accumulator


def choose_as_of(records: Iterable[Page | SkippedRecord], config: ExtractConfig,
                 now: dt.datetime | None = None) -> AsOfChoice:
    ceiling = timestamp_ceiling(config, now)
    combine = NewestPlausible(ceiling[0])
    accumulator = combine.create_accumulator()
    for record in records:
        accumulator = combine.add_input(accumulator, record)
    return AsOfChoice.choose(config.as_of, *accumulator, ceiling)


def extract_records(records: Iterable[Page | SkippedRecord], config: ExtractConfig,
                    now: dt.datetime | None = None) -> Extraction:
    """The stage on records in memory (tests, small inputs): the same steps the Beam pipeline runs."""
    records = list(records)
    choice = choose_as_of(records, config, now)
    as_of = choice.as_of
    classified = [classify_record(r) for r in records]
    skipped = [c for c in classified if isinstance(c, SkippedRecord)]
    redirects = [c for c in classified if isinstance(c, Redirect)]
    articles = [c for c in classified if isinstance(c, Page)]
    table = resolve_redirects({r.title: r.target for r in redirects})
    skipped += [redirect_outcome(r, table) for r in redirects]
    contested = duplicate_titles(articles)
    groups: dict[str, list[Page]] = {}
    for page in articles:
        if normalize_title(page.title) in contested:
            groups.setdefault(normalize_title(page.title), []).append(page)
    kept_pages = [page for page in articles if normalize_title(page.title) not in contested]
    for group in groups.values():
        winner, duplicates = pick_duplicate(group)
        kept_pages.append(winner)
        skipped += duplicates
    aliases: dict[str, list[str]] = {}
    for redirect in redirects:
        if redirect.title not in table.cycles:
            aliases.setdefault(table.resolve(redirect.title), []).append(redirect.title)
    entities, relations, pages = [], [], []
    excluded: Counter = Counter()
    for page in kept_pages:
        result = extract_article(page, table.resolve, as_of, config)
        if isinstance(result, SkippedRecord):
            skipped.append(result)
            continue
        entities.append(attach_aliases(result.entity, aliases.get(result.entity.title, ())))
        relations.extend(result.relations)
        pages.append(result.page)
        excluded.update(result.excluded)
    names = {entity.title: entity.title for entity in entities}
    names.update((alias, target) for target, titles in aliases.items() for alias in titles)
    relations = [name_value(r, names.get(named_value_key(r) or "")) for r in relations]
    order = sorted(range(len(relations)), key=lambda i: relation_sort_key(relations[i], i))
    return Extraction(
        entities=sorted(entities, key=lambda e: e.title),
        relations=[relations[i] for i in order],
        skipped=sorted(skipped, key=skipped_sort_key),
        pages=sorted(pages, key=lambda p: p.title),
        as_of=as_of,
        pages_in=len(records),
        as_of_choice=choice,
        excluded=excluded,
    )


def relation_sort_key(relation: Relation, ordinal: int) -> tuple:
    return (relation.head, relation.provenance.page_id, ordinal)


def skipped_sort_key(record: SkippedRecord) -> tuple:
    return (record.title, record.stage, record.reason, record.page_id or 0, record.detail)


def outcome_counts(pages_in: int, kept: int, skip_reasons: Iterable[str], relation_sources: Iterable[str],
                   heads: int, excluded: dict[str, int] | None = None) -> dict[str, int]:
    """Counts by outcome: `pages_in == kept + skipped`, `skipped == sum(skipped:<reason>)`, and the infobox
    values left out as plumbing by reason (`excluded:image_size`, ...)."""
    reasons = Counter(skip_reasons)
    sources = Counter(relation_sources)
    counts = {"pages_in": pages_in, "kept": kept, "skipped": sum(reasons.values()), "head_entities": heads,
              "relations": sum(sources.values())}
    counts.update({f"skipped:{reason}": n for reason, n in reasons.items()})
    counts.update({f"relations:{source}": n for source, n in sources.items()})
    counts.update({f"excluded:{reason}": n for reason, n in sorted((excluded or {}).items())})
    return counts


# -------------------------------------------------------------------------------- work units (phase 1)
#
# Beam runs the stage in two phases. Phase 1 reads each work unit (a multistream byte range; the API's
# pages in hash buckets), classifies its records and extracts every article with its link targets as
# written, and stores the unit's rows as parts (`parts/<table>/<unit>.parquet`). A unit whose parts all
# exist is finished: a rerun after a kill reads and parses only the units that are not. Phase 2 joins
# the parts: duplicates, redirect chains (a keyed join, not a side input), link targets, aliases and
# the recency window, and writes the shards. Phase 2 is the same whichever units were reused.


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
API_UNITS = 16  # hash buckets an API read is cut into


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


def _plan_dump_units(config: ExtractConfig) -> list[tuple[str, DumpUnit]]:
    units = (dump_work_units(config.dump, config.index, config.streams_per_unit) if config.index
             else [DumpUnit(config.dump)])
    return [(dump_unit_id(unit), unit) for unit in units]


class _ExtractUnit(BoundedHeapDoFn):
    """Phase 1 for one unit, unless its parts exist: yields (unit id, True when extracted in this run).

    A dump unit arrives as its DumpUnit and is read here only when needed."""

    def __init__(self, config: ExtractConfig, out_dir: str, ceiling: dt.datetime):
        self.config, self.out_dir, self.ceiling = config, out_dir, ceiling

    def setup(self):
        super().setup()
        load_ontology()  # once per worker, before any page's time limit starts

    def process(self, element):
        unit_id, source = element
        parts = WorkUnits(self.out_dir, UNIT_TABLES)
        # An API unit holds what this run fetched (a rerun fetches again): only dump units are reused.
        if isinstance(source, DumpUnit) and parts.is_done(unit_id):
            beam.metrics.Metrics.counter("hopsmith.extract", "units.reused").inc()
            yield unit_id, False
            return
        records = read_dump_unit(DumpUnit(*source)) if isinstance(source, DumpUnit) else source
        rows = extract_unit(unit_id, records, self.config, self.ceiling)
        parts.write(unit_id, {table: (model, rows[table]) for table, model in UNIT_TABLES.items()})
        beam.metrics.Metrics.counter("hopsmith.extract", "units.extracted").inc()
        del rows
        release_freed_memory()
        yield unit_id, True


class _UnitParts:
    """One finished unit's parts, read from disk on demand: phase 2 moves keys through the shuffle and
    reads each unit's rows (page text, relations) only where they are rewritten, one unit at a time."""

    def __init__(self, out_dir: str, unit_id: str):
        self.parts, self.unit_id = WorkUnits(out_dir, UNIT_TABLES), unit_id

    def rows(self, table: str) -> Iterator:
        return read_records(UNIT_TABLES[table], self.parts.part_path(table, self.unit_id))

    def articles(self) -> Iterator[tuple[tuple[str, int], ArticleRow, Page]]:
        """(key, row, page) for every article in the unit's order; `key` names it across the run."""
        for seq, (row, page) in enumerate(zip(self.rows("articles"), self.rows("article_pages"), strict=True)):
            yield (self.unit_id, seq), row, page


# ------------------------------------------------------------------------------- joins (phase 2)
#
# Only small keyed records cross the shuffle: titles, the link and value targets a unit asks about (once
# per unit), redirect pairs. What comes back to a unit is its own fix-ups (final targets of its links,
# names of its values, aliases of its entities, outcomes of its redirects and duplicates); `_FinishUnit`
# then rewrites the unit's rows from its parts and writes them as sorted runs per output shard, and
# `_MergeShard` merges each shard's runs into the output file, streaming. So no step holds more than one
# unit's rows, and the shuffle carries keys, not pages.

REDIRECT_ROUNDS = 6  # pointer doubling: chains of up to 2**(6-1) = 32 redirects resolve; longer ones count as cycles
RUN_BATCH_ROWS = 64  # rows per batch of a run: the merge holds one batch of each run (~0.5 MB of pages)
MERGE_FAN_IN = 32  # runs merged at once; more are merged in steps
MERGE_TAKE_ROWS = 256  # rows the merge copies out of its runs at a time (~2 MB of pages)
# decoded bytes per row group of an output shard: a parquet writer holds every row group's metadata (~1 KB
# per column) until it closes, so groups of a fixed 256 rows cost a 1.8-million-row relations shard ~110 MiB
OUTPUT_GROUP_BYTES = 8 * 2**20


def _step_pointers(joined):
    """One pointer-doubling round at title `p`: each redirect pointing at p moves on to p's own pointer,
    or ends at p when p is not a redirect (a state is (pointer, done))."""
    pointer, grouped = joined
    own = list(grouped["state"])
    for title in grouped["askers"]:
        yield title, own[0] if own else (pointer, True)


class ResolveRedirects(beam.PTransform):
    """(redirect title, target) pairs -> (title, final target) for resolved chains, and the titles caught
    in a cycle (tag "cycles"): `resolve_redirects` as a keyed join, whose memory grows with the largest
    key group (the redirects pointing at one title), not with the wiki."""

    def __init__(self, rounds: int = REDIRECT_ROUNDS):
        super().__init__()
        self.rounds = rounds

    def expand(self, pairs):
        state = pairs | "OneTargetPerTitle" >> beam.CombinePerKey(max) | "Start" >> beam.MapTuple(
            lambda title, target: (title, (target, False)))
        for round_ in range(self.rounds):
            askers = state | f"Askers{round_}" >> beam.Filter(lambda kv: not kv[1][1]) | f"ByPointer{round_}" >> (
                beam.MapTuple(lambda title, s: (s[0], title)))
            done = state | f"Done{round_}" >> beam.Filter(lambda kv: kv[1][1])
            stepped = {"askers": askers, "state": state} | f"Join{round_}" >> beam.CoGroupByKey() | (
                f"Step{round_}" >> beam.FlatMap(_step_pointers))
            state = (done, stepped) | f"Next{round_}" >> beam.Flatten()
        return state | "Final" >> beam.ParDo(_SplitResolved()).with_outputs("cycles", main="resolved")


class _SplitResolved(beam.DoFn):
    def process(self, element):
        title, (pointer, done) = element
        yield (title, pointer) if done else beam.pvalue.TaggedOutput("cycles", title)


def _unit_stats(unit, out_dir: str) -> Iterator[UnitStats]:
    return _UnitParts(out_dir, unit[0]).rows("stats")


def _unit_redirects(unit, out_dir: str) -> Iterator[tuple[str, str]]:
    """(title, target) for each redirect page of a unit: what redirect resolution starts from."""
    for row in _UnitParts(out_dir, unit[0]).rows("redirects"):
        yield row.title, row.target


def _unit_titles(unit, out_dir: str) -> Iterator[tuple[str, int]]:
    """(title, 1) for each article of a unit: a title counted twice is contested."""
    for row in _UnitParts(out_dir, unit[0]).rows("articles"):
        yield row.title, 1


def _contested_title(grouped):
    title, counts = grouped
    if sum(counts) > 1:
        yield title, True


def _contested_articles(unit, out_dir: str, contested: dict):
    """The unit's articles whose title another article shares, with their pages: (title, (key, page))."""
    if not contested:
        return
    for key, row, page in _UnitParts(out_dir, unit[0]).articles():
        if row.title in contested:
            yield row.title, (key, page)


def _decide_duplicates(keyed):
    """`pick_duplicate` over the articles sharing a title: the losers' keys (tag "losers"), and each
    loser's `duplicate` skip addressed to its unit. Ties go to the smaller key, whatever the runner."""
    _, articles = keyed
    articles = sorted(articles, key=lambda article: article[0])
    _, skips = pick_duplicate([page for _, page in articles])
    order = sorted(range(len(articles)), key=lambda i: duplicate_rank(articles[i][1]), reverse=True)
    for i, skip in zip(order[1:], skips, strict=True):
        key = articles[i][0]
        yield beam.pvalue.TaggedOutput("losers", (key, True))
        yield key[0], ("skip", skip)


class _UnitKeys(BoundedHeapDoFn):
    """What one unit asks the title join about, each title once per unit, as (title, (kind, value)): its
    kept entities' titles ("entity", unit id), its link targets ("tail", unit id), its plain-text values
    that could name a page ("name", unit id) and its redirects ("redirect", (unit id, page id, target)).

    One output, not one per kind: the join's shuffle then takes a unit's keys in one piece, and the unit's
    result is let go once that piece is sent (a result read by four steps is held until the last of them
    runs). And it runs once redirect resolution is done (`_resolved`, read for that alone): emitted before,
    every unit's keys wait for the resolved side of the join, and a worker holds them all at once (at
    100,000 articles, 148 MiB in Dask's store)."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def process(self, unit, losers, _resolved):
        unit_id = unit[0]
        parts = _UnitParts(self.out_dir, unit_id)
        entities, relations = parts.rows("entities"), parts.rows("relations")
        tails, names = set(), set()
        for seq, row in enumerate(parts.rows("articles")):
            if row.skip_reason is not None:
                continue
            entity, page_relations = next(entities), [next(relations) for _ in range(row.relations)]
            if (unit_id, seq) in losers:
                continue
            yield entity.title, ("entity", unit_id)
            for relation in page_relations:
                if relation.tail is not None:
                    tails.add(relation.tail)
                if (name := named_value_key(relation)) is not None:
                    names.add(name)
        yield from ((title, ("tail", unit_id)) for title in sorted(tails))
        yield from ((title, ("name", unit_id)) for title in sorted(names))
        for redirect in parts.rows("redirects"):
            yield redirect.title, ("redirect", (unit_id, redirect.page_id, redirect.target))
        release_freed_memory()


def _title_fixups(joined):
    """At one title, the fix-ups of the units that asked about it, as (unit id, fix-up): the outcome of each
    redirect page with this title, the final target of links to it, the page a value spelling it names,
    and the aliases of the entity it is the title of. The title's records are (kind, value): the kinds of
    `_UnitKeys`, its final target if it is a resolved redirect ("final") and the resolved redirects to it
    ("alias")."""
    title, records = joined
    grouped: dict[str, list] = {kind: [] for kind in ("entity", "tail", "name", "redirect", "final", "alias")}
    for kind, value in records:
        grouped[kind].append(value)
    final = grouped["final"][0] if grouped["final"] else None
    for unit_id, page_id, target in grouped["redirect"]:
        if final is not None:
            yield unit_id, ("skip", SkippedRecord(title=title, stage=STAGE, reason="redirect",
                                                  detail=f"-> {final}", page_id=page_id))
        else:
            yield unit_id, ("skip", SkippedRecord(title=title, stage=STAGE, reason="redirect_cycle",
                                                  detail=f"-> {target}", page_id=page_id))
    if final is not None:
        yield from ((unit_id, ("tail", title, final)) for unit_id in grouped["tail"])
    owners = grouped["entity"]
    named = sorted(({title} if owners else set()) | ({final} if final is not None else set()))
    if named:
        yield from ((unit_id, ("name", title, named[0])) for unit_id in grouped["name"])
    aliases = sorted(set(grouped["alias"]))
    if aliases:
        yield from ((unit_id, ("aliases", title, aliases)) for unit_id in owners)


def shard_of(key, shards: int) -> int:
    """A record's output shard: a stable hash of its sort key's first field (the title)."""
    return zlib.crc32(str(key[0] if isinstance(key, tuple) else key).encode("utf-8")) % shards


# how the rows of each output table are ordered (a page's relations: by the order `_FinishUnit` gave them),
# read from a batch of rows: the merge orders rows by these keys without decoding the rows
def title_sort_keys(batch: pa.RecordBatch) -> list:
    """Each row's title (entities, pages)."""
    return batch.column("title").to_pylist()


def skipped_sort_keys(batch: pa.RecordBatch) -> list:
    """`skipped_sort_key` of each row."""
    title, stage, reason, page_id, detail = (batch.column(name).to_pylist()
                                             for name in ("title", "stage", "reason", "page_id", "detail"))
    return [(t, s, r, p or 0, d) for t, s, r, p, d in zip(title, stage, reason, page_id, detail, strict=True)]


def relation_merge_keys(batch: pa.RecordBatch) -> list:
    """(head, provenance page id) of each row (a page's relations keep the order of their run)."""
    page_ids = batch.column("provenance").field("page_id").to_pylist()
    return list(zip(batch.column("head").to_pylist(), page_ids, strict=True))


_SORT_KEYS: dict[str, Callable[[pa.RecordBatch], list]] = {
    "entities": title_sort_keys, "pages": title_sort_keys, "skipped": skipped_sort_keys,
    "relations": relation_merge_keys}


class _FinishUnit(BoundedHeapDoFn):
    """Phase 2 for one unit: its rows with its fix-ups applied (duplicates dropped, link targets resolved,
    named values turned into edges, aliases and the recency window set), written as one sorted run per
    output table and shard. Yields the plumbing counts of its kept articles."""

    def __init__(self, out_dir: str, shards: int, window_days: int):
        self.out_dir, self.shards, self.window_days = out_dir, shards, window_days

    def process(self, joined, as_of, losers):
        unit_id, grouped = joined
        fixes: dict[str, dict] = {"tail": {}, "name": {}, "aliases": {}}
        parts = _UnitParts(self.out_dir, unit_id)
        rows: dict[str, list] = {table: [] for table in TABLES}
        for kind, *fix in grouped["fixups"]:
            if kind == "skip":
                rows["skipped"].append((skipped_sort_key(fix[0]), fix[0]))
            else:
                fixes[kind][fix[0]] = fix[1]
        rows["skipped"].extend((skipped_sort_key(skip), skip) for skip in parts.rows("skipped"))
        entities, relations = parts.rows("entities"), parts.rows("relations")
        excluded: Counter = Counter()
        for key, row, page in parts.articles():
            if row.skip_reason is None:
                entity, page_relations = next(entities), [next(relations) for _ in range(row.relations)]
            if key in losers:
                continue
            if row.skip_reason is not None:
                skip = _skip(page, row.skip_reason, row.skip_detail)
                rows["skipped"].append((skipped_sort_key(skip), skip))
                continue
            excluded.update(row.excluded)
            entity = entity.model_copy(update={"is_head": is_head(entity.last_modified, as_of, self.window_days)})
            rows["entities"].append((entity.title, attach_aliases(entity, fixes["aliases"].get(entity.title, ()))))
            rows["pages"].append((entity.title, page.model_copy(update={"title": normalize_title(page.title)})))
            resolved = [r.model_copy(update={"tail": fixes["tail"][r.tail]}) if r.tail in fixes["tail"] else r
                        for r in page_relations]
            for ordinal, relation in enumerate(distinct_relations(entity.title, resolved)):
                name = named_value_key(relation)
                rows["relations"].append((relation_sort_key(relation, ordinal),
                                          name_value(relation, fixes["name"].get(name) if name else None)))
        for table, keyed in rows.items():
            model = TABLES[table]
            by_shard: list[list] = [[] for _ in range(self.shards)]
            for sort_key, record in sorted(keyed, key=lambda pair: pair[0]):
                by_shard[shard_of(sort_key, self.shards)].append(record)
            for shard, records in enumerate(by_shard):
                write_run(arrow_schema(model), [to_table(model, records)], _run_path(self.out_dir, table, unit_id, shard),
                          RUN_BATCH_ROWS)
        del rows
        release_freed_memory()
        yield dict(excluded)


def _run_path(out_dir: str, table: str, unit_id: str, shard: int) -> Path:
    return WorkUnits(out_dir, ()).folder / "runs" / table / f"{unit_id}-{shard:05d}.arrows"


def merge_runs(model: type[Record], runs: list[Path], sort_keys: Callable[[pa.RecordBatch], list], path: Path,
               scratch: Path, group_bytes: int = OUTPUT_GROUP_BYTES) -> int:
    """Sorted runs (`write_run`) -> one sorted parquet file at `path` in row groups of at least
    `group_bytes` decoded (none when all runs are empty), MERGE_FAN_IN runs at a time: more are first merged
    in order into intermediate runs under `scratch`, level by level. Memory holds one batch of each of at
    most MERGE_FAN_IN runs and one output group, however many units and levels there are: a run has no
    footer to hold, so the last level's long runs cost no more than the first level's short ones, and the
    output's row groups grow with its rows' size, so the writer's metadata stays small. Equal keys keep the
    order of their runs. Rows are copied as Arrow, never decoded (`merge_sorted_batches`). Returns the rows
    written."""
    schema = arrow_schema(model)

    def merged(paths: list[Path]) -> Iterator[pa.Table]:
        return merge_sorted_batches(schema, [run_batches(run) for run in paths], sort_keys, MERGE_TAKE_ROWS)

    level = 0
    while len(runs) > MERGE_FAN_IN:
        steps = []
        for start in range(0, len(runs), MERGE_FAN_IN):
            steps.append(scratch / f"merge{level}-{start // MERGE_FAN_IN:05d}.arrows")
            write_run(schema, merged(runs[start:start + MERGE_FAN_IN]), steps[-1], RUN_BATCH_ROWS)
        runs, level = steps, level + 1
    return write_table_stream(schema, gather_tables(merged(runs), group_bytes), path)


class _MergeShard(BoundedHeapDoFn):
    """One output shard: every unit's run for it merged in order (`merge_runs`) and written a row group at
    a time; an empty shard is not written."""

    def __init__(self, out_dir: str, shards: int):
        self.out_dir, self.shards = out_dir, shards

    def process(self, task, unit_ids, _finished):
        table, shard = task
        runs = [_run_path(self.out_dir, table, unit_id, shard) for unit_id in sorted(unit_ids)]
        path = as_path(self.out_dir) / table / f"part-{shard:05d}-of-{self.shards:05d}.parquet"
        scratch = WorkUnits(self.out_dir, ()).folder / "merges" / f"{table}-{shard:05d}"
        written = merge_runs(TABLES[table], runs, _SORT_KEYS[table], path, scratch)
        release_freed_memory()
        if written:
            yield str(path)


class _SumCounts(beam.CombineFn):
    """Per-page counters (plumbing left out, by reason) summed over the run."""

    def create_accumulator(self):
        return Counter()

    def add_input(self, total, counts):
        total.update(counts)
        return total

    def merge_accumulators(self, accumulators):
        merged = Counter()
        for accumulator in accumulators:
            merged.update(accumulator)
        return merged

    def extract_output(self, total):
        return dict(total)


def _choose_as_of(stats: list[UnitStats], config: ExtractConfig, ceiling) -> AsOfChoice:
    merged = NewestPlausible(ceiling[0]).merge_accumulators((s.newest_plausible, s.implausible) for s in stats)
    return AsOfChoice.choose(config.as_of, *merged, ceiling)


def _write_stats(stats: list[UnitStats], choice: AsOfChoice, excluded: dict, units: list, out_dir: str) -> None:
    summary = {"pages_in": sum(s.pages_in for s in stats),
               "as_of": choice.as_of.isoformat() if choice.as_of else None,
               "as_of_reason": choice.reason, "implausible": choice.implausible, "excluded": excluded,
               "units": len(units), "units_extracted": sum(extracted for _, extracted in units)}
    atomic_write_text(as_path(out_dir) / _STATS_FILE, json.dumps(summary))


class ExtractUnits(beam.PTransform):
    """PBegin -> (unit id, extracted now?) once each unit's parts exist under `out_dir/parts` (phase 1)."""

    def __init__(self, config: ExtractConfig, out_dir: str | Path, ceiling: tuple[dt.datetime, str]):
        super().__init__()
        self.config, self.out_dir, self.ceiling = config, str(out_dir), ceiling

    def expand(self, pbegin):
        config = self.config
        if config.dump is not None:
            units = (pbegin | "Source" >> beam.Create([config]) | "PlanUnits" >> beam.FlatMap(_plan_dump_units)
                     | "SpreadUnits" >> beam.Reshuffle())
        else:
            units = (
                pbegin
                | "Read" >> source_transform(config)
                | "Bucket" >> beam.Map(lambda r: (f"api-{shard_of(normalize_title(r.title), API_UNITS):02d}", r))
                | "Units" >> beam.GroupByKey()
            )
        return units | "ExtractUnit" >> beam.ParDo(_ExtractUnit(config, self.out_dir, self.ceiling[0]))


class ExtractGraph(beam.PTransform):
    """(unit id, extracted now?) -> the stage's tables written under `out_dir` (phase 2: the joins).

    Only keys cross the shuffle (see "joins (phase 2)"). Side inputs: the as-of choice (one value), the
    titles seen twice and the duplicates' keys (sized by the duplicated titles, not by the wiki), the
    unit ids (one per unit) and the count of resolved redirects (one value, read by `_UnitKeys` to wait)."""

    def __init__(self, config: ExtractConfig, out_dir: str | Path, ceiling: tuple[dt.datetime, str]):
        super().__init__()
        self.config, self.out_dir, self.ceiling = config, str(out_dir), ceiling

    def expand(self, units):
        config, out_dir, shards = self.config, self.out_dir, self.config.output_shards
        stats = units | "ReadStats" >> beam.FlatMap(_unit_stats, out_dir) | "AllStats" >> beam.combiners.ToList()
        choice = stats | "ChooseAsOf" >> beam.Map(_choose_as_of, config, self.ceiling)
        as_of = beam.pvalue.AsSingleton(choice | "AsOf" >> beam.Map(lambda chosen: chosen.as_of))
        contested = beam.pvalue.AsDict(
            units
            | "Titles" >> beam.FlatMap(_unit_titles, out_dir)
            | "GroupTitles" >> beam.GroupByKey()  # not CombinePerKey: its lifting holds up to 10^6 titles per worker
            | "OnlyDuplicates" >> beam.FlatMap(_contested_title)
        )
        decided = (
            units
            | "Contested" >> beam.FlatMap(_contested_articles, out_dir, contested)
            | "GroupDuplicates" >> beam.GroupByKey()
            | "DecideDuplicates" >> beam.FlatMap(_decide_duplicates).with_outputs("losers", main="skips")
        )
        losers = beam.pvalue.AsDict(decided.losers)
        resolved = (units | "RedirectPairs" >> beam.FlatMap(_unit_redirects, out_dir)
                    | "ResolveRedirects" >> ResolveRedirects())
        resolved_count = beam.pvalue.AsSingleton(resolved.resolved | "CountResolved" >> beam.combiners.Count.Globally())
        keys = units | "UnitKeys" >> beam.ParDo(_UnitKeys(out_dir), losers, resolved_count)
        fixups = (
            (keys,
             resolved.resolved | "Finals" >> beam.MapTuple(lambda title, final: (title, ("final", final))),
             resolved.resolved | "AliasOf" >> beam.MapTuple(lambda title, final: (final, ("alias", title))))
            | "AllTitleKeys" >> beam.Flatten()
            | "JoinTitles" >> beam.GroupByKey()
            | "TitleFixups" >> beam.FlatMap(_title_fixups)
        )
        excluded = (
            {"fixups": (decided.skips, fixups) | "AllFixups" >> beam.Flatten(), "unit": units}
            | "ByUnit" >> beam.CoGroupByKey()
            | "FinishUnits" >> beam.ParDo(_FinishUnit(out_dir, shards, config.window_days), as_of, losers)
            | "SumExcluded" >> beam.CombineGlobally(_SumCounts())
        )
        excluded = beam.pvalue.AsSingleton(excluded)
        unit_ids = beam.pvalue.AsList(units | "UnitIds" >> beam.Map(lambda unit: unit[0]))
        _ = (units.pipeline
             | "MergeTasks" >> beam.Create([(table, shard) for table in TABLES for shard in range(shards)])
             | "SpreadMerges" >> beam.Reshuffle()
             | "MergeShards" >> beam.ParDo(_MergeShard(out_dir, shards), unit_ids, excluded))
        all_units = units | "AllUnits" >> beam.combiners.ToList()
        return stats | "Stats" >> beam.Map(_write_stats, beam.pvalue.AsSingleton(choice), excluded,
                                           beam.pvalue.AsSingleton(all_units), out_dir)


# ----------------------------------------------------------------------------------- stage entry point

def run_extract(
    config: ExtractConfig, out_dir: str | Path, beam: BeamOptions | None = None, beam_args=()
) -> Manifest:
    """Run stage 1 over the configured source into `out_dir`; a finished identical run is skipped."""
    out_dir = as_path(out_dir)
    use_filesystem_options(pipeline_options(beam, list(beam_args)))  # s3:// or gs:// dump and output folder
    run = begin_stage(STAGE, out_dir, _stage_config(config), input_files=_input_files(config))
    if run.done:
        log.info("extract: %s is up to date", out_dir)
        return run.finished
    for table in TABLES:
        for stale in shard_files(out_dir / table):
            stale.unlink()
    ceiling = timestamp_ceiling(config)
    with _pipeline(beam, beam_args) as pipeline:
        _ = (pipeline | "ExtractUnits" >> ExtractUnits(config, out_dir, ceiling)
             | "ExtractGraph" >> ExtractGraph(config, out_dir, ceiling))
    return _finish(run, config, out_dir)


def _stage_config(config: ExtractConfig) -> dict:
    """The config the stage is keyed by. A dump is pinned by its checksum; a live wiki is not, so an API run
    is keyed by the UTC day it fetches on: rerun the same day, it is skipped; the next day, it fetches anew."""
    keyed = config.model_dump(mode="json")
    if config.api_url is not None:
        keyed["api_fetch_day"] = dt.datetime.now(dt.UTC).date().isoformat()
    return keyed


def _input_files(config: ExtractConfig) -> list[str]:
    """The dump and index files the manifest checksums (an API run has none); missing ones are UserErrors."""
    if (config.dump is None) == (config.api_url is None):
        raise UserError("choose one source: --dump PATH or --api URL")
    files = [(config.dump, "dump"), (config.index, "index")]
    return [check_readable(path, what) for path, what in files if path is not None]


def _pipeline(beam_options: BeamOptions | None, beam_args) -> beam.Pipeline:
    return beam.Pipeline(options=pipeline_options(beam_options, list(beam_args)))


def no_page_message(config: ExtractConfig, counts: dict[str, int], out_dir: Path) -> str:
    """Why an input gave no page to build on: nothing readable, or every page skipped (top reasons)."""
    source = config.dump or config.api_url
    if not counts["pages_in"]:
        return (f"extract: no readable page in {source}: is it a MediaWiki XML export (.xml or .xml.bz2)? "
                "Nothing to build a dataset from")
    reasons = sorted(((n, k.removeprefix("skipped:")) for k, n in counts.items() if k.startswith("skipped:")),
                     reverse=True)
    listed = ", ".join(f"{reason} {n:,}" for n, reason in reasons[:4])
    return (f"extract: {counts['pages_in']:,} pages read from {source}, none kept ({listed}); the skipped "
            f"records are in {out_dir / 'skipped'}. Nothing to build a dataset from")


def _finish(run, config: ExtractConfig, out_dir: Path) -> Manifest:
    stats_path = out_dir / _STATS_FILE
    stats = json.loads(stats_path.read_text())
    outputs: dict[str, list[str]] = {}
    for table, model in TABLES.items():
        if not shard_files(out_dir / table):
            write_records(model, [], out_dir / table / "part-00000-of-00001.parquet")
        outputs[table] = [str(p.relative_to(out_dir)) for p in shard_files(out_dir / table)]
    entities = Counter(read_column(out_dir / "entities", "is_head"))
    reasons = read_column(out_dir / "skipped", "reason")
    sources = read_column(out_dir / "relations", "source")
    counts = outcome_counts(stats["pages_in"], entities.total(), reasons, sources, entities[True], stats["excluded"])
    if counts["pages_in"] != counts["kept"] + counts["skipped"]:
        raise RuntimeError(f"extract counts do not reconcile: {counts}")
    if unavailable := counts.get("skipped:api_unavailable", 0):  # transient: not finished work
        raise StageIncomplete(f"extract: {unavailable} of {counts['pages_in']} titles could not be fetched (the API "
                              "kept failing until its retries ran out); rerun the same command to fetch again")
    if counts["kept"] == 0:
        raise UserError(no_page_message(config, counts, out_dir))
    if stats["implausible"]:
        counts[IMPLAUSIBLE_COUNT] = stats["implausible"]
    as_of = dt.datetime.fromisoformat(stats["as_of"]) if stats["as_of"] else None
    units = {"units": stats["units"], "extracted": stats["units_extracted"],
             "reused": stats["units"] - stats["units_extracted"]}
    manifest = run.finish(counts, outputs, as_of=as_of, work_units=units, as_of_reason=stats["as_of_reason"],
                          window_days=config.window_days)
    stats_path.unlink()
    remove_tree(WorkUnits(out_dir, ()).folder)  # only an unfinished run needs the parts
    return manifest


# ------------------------------------------------------------------------------------------------ CLI

def parse_as_of(text: str) -> dt.datetime:
    """`--as-of`: an ISO timestamp, or `YYYY-MM-DD` (that day at 00:00 UTC); naive times are UTC."""
    try:
        return utc(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or timestamp: {text!r}") from None


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="stage 1: a Wikipedia dump (or the Action API) -> typed entity-relation graph",
        description="Read pages, resolve redirects, drop disambiguation and non-article pages, and write "
        "entities/, relations/, skipped/, pages/ (parquet) and manifest.json to --out. Other --options are "
        "Apache Beam pipeline options (--runner, --direct_num_workers 2, ...).",
    )
    add_source_arguments(parser)
    defaults = ExtractConfig()
    parser.add_argument("--out", default="out/graph", metavar="DIR", help="output folder (default: %(default)s)")
    parser.add_argument("--as-of", type=parse_as_of, metavar="ISO", help="snapshot time (default: the newest revision in the input that is not dated after "
                        "the dump's own date or the time of the run)")
    parser.add_argument("--window", type=int, default=defaults.window_days, dest="window_days", metavar="DAYS",
                        help="head entities: latest revision at most this many days before --as-of "
                        "(default: %(default)s)")
    parser.add_argument("--max-page-bytes", type=int, default=defaults.max_page_bytes, metavar="N",
                        help="skip larger pages as 'oversized' (default: %(default)s)")
    parser.add_argument("--page-timeout", type=float, default=defaults.page_timeout_s, dest="page_timeout_s", metavar="SECONDS",
                        help="skip pages whose extraction takes longer, in seconds (default: %(default)s)")
    parser.add_argument("--shards", type=int, default=defaults.output_shards, dest="output_shards", metavar="N",
                        help="parquet shards per output table (default: %(default)s)")
    parser.set_defaults(func=_command)


def _command(args, beam_args) -> int:
    config = ExtractConfig(
        **source_config(args),
        as_of=args.as_of,
        window_days=args.window_days,
        max_page_bytes=args.max_page_bytes,
        page_timeout_s=args.page_timeout_s,
        output_shards=args.output_shards,
    )
    manifest = run_extract(config, args.out, beam_args=beam_args)
    counts = manifest.counts
    print(f"extract: {counts['pages_in']} pages in, {counts['kept']} entities ({counts['head_entities']} head), "
          f"{counts['relations']} relations, {counts['skipped']} skipped -> {args.out}")
    print(f"  as-of {manifest.as_of.isoformat() if manifest.as_of else 'none'}: {manifest.as_of_reason}")
    for key, value in counts.items():
        if key.startswith(("skipped:", "excluded:")) or key == IMPLAUSIBLE_COUNT:
            print(f"  {key:<28} {value}")
    return 0
