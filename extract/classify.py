"""Classification, redirects and duplicates: which input records are articles, which are redirects (and
where their chains end), and which of the articles sharing a title is kept. Plain functions, used by the
one-process `extract_records` and (as keyed joins) by the Beam pipeline's phase 2."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

from extract.tables import STAGE
from schemas.base import utc
from schemas.wiki import Page, SkippedRecord
from wikitext.markup import is_disambiguation, normalize_title, redirect_target


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
        return skip_page(record, "non_article", f"namespace {record.ns}")
    title = normalize_title(record.title)
    target = normalize_title(record.redirect_to) if record.redirect_to else redirect_target(record.text)
    if target:
        return Redirect(title, target, record.page_id)
    if is_disambiguation(title, record.text):
        return skip_page(record, "disambiguation", "")
    return record


def skip_page(page: Page, reason: str, detail: str) -> SkippedRecord:
    return SkippedRecord(title=page.title, stage=STAGE, reason=reason, detail=detail[:500], page_id=page.page_id)


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
    skipped = [skip_page(page, "duplicate", f"an exact copy of the kept revision of {title!r}"
                     if revision_rank(page) == rank else f"a later revision of {title!r} is kept")
               for page in ordered[1:]]
    return kept, skipped
