"""The whole stage on records in memory, in one process and without Beam (`extract_records`): tests and
small inputs, and the reference the Beam pipeline's output is checked against. The same steps, the same
order and the same counts (`extract.tables`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Iterable

from extract.article import attach_aliases, check_ranges, extract_article, name_value, named_value_key
from extract.as_of import AsOfChoice, choose_as_of
from extract.classify import (
    Redirect,
    classify_record,
    duplicate_titles,
    pick_duplicate,
    redirect_outcome,
    resolve_redirects,
)
from extract.tables import IMPLAUSIBLE_COUNT, outcome_counts, relation_sort_key, skipped_sort_key
from schemas.config import ExtractConfig
from schemas.wiki import Entity, Page, Relation, SkippedRecord
from wikitext.markup import normalize_title


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
    classes = {entity.title: entity.type for entity in entities}
    relations = check_ranges(relations, classes.get, excluded)
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
