"""The article core: one article -> its Entity, Relations (infobox facts + lead `links_to`) and Page, or a
SkippedRecord (`oversized`, `timeout`, `parse_error`, `broken_markup`); then the steps that need the whole
input, as plain functions: the recency window (`is_head`), plain-text values that name a page
(`named_value_key`, `name_value`), the range check of linked pages by their class (`check_ranges`) and
redirect titles as aliases (`attach_aliases`).

Speed: a full mwparserfromhell parse runs at ~2 MB/s. Here only the infobox spans, found by brace matching
on the raw text (`wikitext.markup.infobox_spans`), are parsed; the lead is read with regexes.

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

import dataclasses
import datetime as dt
import functools
import itertools
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from mwparserfromhell.parser import ParserError

from extract.classify import skip_page
from ground.deadline import Deadline, PageTimeout
from knowledge.category_years import checks_year, dated_years, stated_in_lead
from knowledge.ontology import lead_noun_phrase, load_ontology
from schemas.base import utc
from schemas.config import ExtractConfig
from schemas.wiki import Entity, Page, Provenance, Qualifier, Relation, SkippedRecord
from wikitext.infobox import Fact, Infobox, parse_infoboxes
from wikitext.markup import (
    BrokenMarkup,
    TooDeep,
    infobox_spans,
    is_list_page,
    lead_sentences,
    normalize_title,
)

log = logging.getLogger(__name__)

UNTYPED_ENTITY = "thing"
MAX_TITLE_CHARS = 255  # MediaWiki's limit: a longer value names no page
LIST_CLASS = "List"
PERSON_CLASS = "Person"
OCCUPATION_PROPERTIES = frozenset({"occupation", "profession"})
R = TypeVar("R", "Relation", "RelationFacts")  # what the page rules take: a relation, or its facts
_CATEGORY = re.compile(r"\[\[\s*[Cc]ategory\s*:\s*([^\]|\n]+)")
_SHORT_DESCRIPTION = re.compile(r"\{\{\s*[Ss]hort description\s*\|\s*([^{}|]+?)\s*[|}]")
PAGE_OVER_TEMPLATE = "typed:page_over_template"  # counted: a page's own kind replaced its template's class


@dataclasses.dataclass
class ArticleResult:
    entity: Entity
    relations: list[Relation]
    page: Page
    excluded: Counter = dataclasses.field(default_factory=Counter)  # plumbing left out, by reason


class RelationFacts(NamedTuple):
    """The fields of a `Relation` that the page rules read (`distinct_relations`, `named_value_key`,
    `value_naming`, `check_ranges`). Phase 2 reads them column by column from a unit's relations part and
    applies the rules to them, so that no relation row is decoded, validated and encoded again: the kept
    ones are copied as Arrow rows (`row`: the relation's row in its part) with the fields the rules changed."""

    row: int
    head: str
    relation: str
    mapped: bool
    group_index: int | None
    tail: str | None
    value: str | None
    value_type: str
    unit: str | None
    qualifiers: list[Qualifier]
    source: str


RELATION_FACT_COLUMNS = RelationFacts._fields[1:]  # the relations part's columns a RelationFacts holds


def relation_facts(columns: dict[str, list]) -> list[RelationFacts]:
    """The RelationFacts of a relations part's rows, from its `RELATION_FACT_COLUMNS` as Python lists. Built
    with `_make` over the zipped columns: a NamedTuple's own constructor is a Python call per row (phase 2
    builds every relation's facts twice, in `UnitKeys` and `FinishUnit`)."""
    qualifiers = [[Qualifier(**pair) for pair in pairs] if pairs else [] for pairs in columns["qualifiers"]]
    fields = [qualifiers if name == "qualifiers" else columns[name] for name in RELATION_FACT_COLUMNS]
    return list(map(RelationFacts._make, zip(range(len(qualifiers)), *fields, strict=True)))


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
        return skip_page(page, "oversized", f"{size} bytes > max_page_bytes {config.max_page_bytes}")
    deadline = Deadline(config.page_timeout_s)
    try:
        with deadline.alarm():
            return _read_article(page, resolve, as_of, config, deadline)
    except PageTimeout as error:
        return skip_page(page, "timeout", str(error))
    except BrokenMarkup as error:
        return skip_page(page, "broken_markup", str(error))
    except TooDeep as error:
        return skip_page(page, "parse_error", str(error))
    except RecursionError as error:
        return skip_page(page, "parse_error", f"RecursionError: {error}")
    except Exception as error:  # mwparserfromhell.ParserError and anything else a page trips over
        if not isinstance(error, ParserError):  # counted, but loud: it may be a bug rather than bad markup
            log.warning("extract: %r skipped as parse_error", page.title, exc_info=True)
        return skip_page(page, "parse_error", f"{type(error).__name__}: {error}")


def _read_article(
    page: Page, resolve: Callable[[str], str], as_of: dt.datetime | None, config: ExtractConfig, deadline: Deadline
) -> ArticleResult:
    title = normalize_title(page.title)
    text = page.text
    found = []
    for span in infobox_spans(text):
        found.extend(parse_infoboxes(text[span.start : span.end]))
        deadline.check()
    excluded: Counter = Counter()
    for box in found:
        excluded.update(box.excluded)
    sentences = lead_sentences(text)
    lead = sentences[0].text if sentences else ""
    boxes = own_boxes(found, title, functools.cache(lambda: _lead_class(lead, text)), excluded)
    against_year_categories(boxes, text, [sentence.text for sentence in sentences], excluded)
    provenance = {"page_id": page.page_id, "page_title": title, "revision_id": page.revision_id,
                  "timestamp": page.timestamp}
    relations = [_relation(title, fact, resolve, provenance) for box in boxes for fact in box.facts]
    deadline.check()
    link_provenance = Provenance(**provenance)  # validated once: the page's lead links all share it
    for sentence in sentences:
        for link in sentence.links:
            relations.append(Relation(head=title, relation="links_to", tail=resolve(link.target),
                                      value_type="entity", source="link", evidence=sentence.text,
                                      provenance=link_provenance))
    relations = distinct_relations(title, relations)
    first_box = boxes[0].name if boxes else None
    entity = Entity(
        title=title,
        type=entity_class(title, boxes, sentences[0].text if sentences else "", text, excluded),
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


OTHER_SUBJECT = "other_subject"  # counted as `excluded:other_subject`: a fact of another entity's infobox
WORK_KINDS = ("MusicalWork", "Work")  # a work's box is another entity's on a page of another kind than it


def own_boxes(boxes: list[Infobox], title: str, lead_class: Callable[[], str | None],
              excluded: Counter) -> list[Infobox]:
    """The page's infoboxes about its own subject, the others' facts counted out. The first top-level box is
    the page's; a later one is another entity's when
    - it is a second box of the page's template naming another subject (her husband's `Infobox person` in a
      section on their work) or crediting another artist (a song's cover version);
    - one of it and the page is a work and the other is not, or another kind of work (`WORK_KINDS`: an
      album's box on its band's or its film's page);
    - it names neither the page (disambiguator aside) nor the first box's subject and is of no class or of
      another top class than the page (a wrestling promotion's championships and television channel).
    The page's class is its first typed box's, else `lead_class()` (its lead noun or categories, read once). A box of
    another template naming the subject otherwise and of its top class ("Dwight David Eisenhower" in a
    military box, "München" in a settlement box) stays the page's. A box nested in another shares its
    verdict."""
    ontology = load_ontology()
    kept: list[Infobox] = []
    first, page_class, keep = boxes[0] if boxes else None, None, True
    for box in boxes:
        if box is not first and not box.nested:
            page_class = page_class or lead_class()
            keep = not _other_subject(ontology, box, first, title, page_class)
        if keep:
            kept.append(box)
            page_class = page_class or box.cls
        else:
            excluded[OTHER_SUBJECT] += len(box.facts)
    return kept


def _other_subject(ontology, box: Infobox, first: Infobox, title: str, page_class: str | None) -> bool:
    if box.name == first.name and (box.subject and first.subject and not _same_name(box.subject, first.subject)
                                   or _artists(box) and _artists(first) and not _artists(box) & _artists(first)):
        return True  # her husband's box; a song's cover version by another artist
    if box.cls and page_class and _work_kind(ontology, box.cls) != _work_kind(ontology, page_class):
        return True
    names_page = any(_same_name(box.subject, known) for known in (_DISAMBIGUATOR.sub("", title), first.subject)
                     if known) if box.subject else True
    return not names_page and not (box.cls and page_class and _top_class(ontology, box.cls) == _top_class(ontology, page_class))


_DISAMBIGUATOR = re.compile(r"\s*\([^()]*\)$")


def _same_name(name: str, other: str) -> bool:
    """Whether two names name one subject: the words of one hold the other's ("Sir John Smith" and "John
    Smith"; 'Dwayne "The Rock" Johnson' and "Dwayne Johnson"; not "Keller Breland" and "Marian Breland")."""
    words, others = (set(_WORD.findall(n.casefold())) for n in (name, other))
    return bool(words and others) and (words <= others or others <= words)


_WORD = re.compile(r"\w+")
ARTIST = "artist"  # a work's performer: a song's box for another artist's version is that version's


def _artists(box: Infobox) -> set[str]:
    return {fact.tail or fact.value or "" for fact in box.facts if fact.property == ARTIST}


def _work_kind(ontology, cls: str) -> str:
    return next((kind for kind in WORK_KINDS if ontology.is_a(cls, kind)), "")


def _top_class(ontology, cls: str) -> str:
    """The class's top class under the ontology's root (Person -> Species, Album -> Work, Band -> Agent)."""
    return (ontology.ancestors(cls) or (cls,))[-1]


CATEGORY_YEAR = "category_year"  # counted as `excluded:category_year`: a date its page's categories contradict
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def against_year_categories(boxes: list[Infobox], text: str, lead: list[str], excluded: Counter) -> None:
    """Leave out of the page's own box (the first, with the boxes nested in it) the dates that the page's year
    categories contradict: a date of a relation the categories date (`knowledge.category_years`) whose year
    none of the page's categories of its kind names ("last_aired = 2006" under "2003 American television
    series endings": the DVD release of the unaired episodes, not the end of the run), unless the lead
    section states that year (`stated_in_lead`: a wrong "1975 births" under "born January 4, 1985"; IBM
    "founded in 1911" under the 1888 categories of its predecessor). Later boxes (an anime franchise's films
    and series) may be other works the categories date. Categories outside comments are read only for a page
    with such a date."""
    own = boxes[:1] + list(itertools.takewhile(lambda box: box.nested, boxes[1:]))
    if not any(_year(f) is not None and checks_year(f.property or f.relation) for box in own for f in box.facts):
        return
    categories = [c.replace("_", " ") for c in _CATEGORY.findall(_COMMENT.sub("", text))]
    for box in own:
        kept = []
        for fact in box.facts:
            relation, year = fact.property or fact.relation, _year(fact)
            if year is not None and (years := dated_years(relation, categories)):
                if year not in years and not stated_in_lead(relation, year, lead):
                    excluded[CATEGORY_YEAR] += 1
                    continue
            kept.append(fact)
        box.facts = kept


def _year(fact: Fact) -> int | None:
    """The year of a date fact: its date's, or a year-only value's ("founded = 1990")."""
    if fact.date is not None:
        return fact.date.year
    value = fact.value or ""
    return int(value) if fact.value_type == "date" and len(value) == 4 and value.isdigit() else None


def entity_class(title: str, boxes: list[Infobox], lead: str, text: str, counts: Counter | None = None) -> str:
    """The page's ontology class: its first mapped infobox's (or the page's own kind where that is a sibling of
    it: `own_class`), `List` for a list page, else the lead sentence's "X is a ..." noun, else a category's
    words (the overlay's tables), else `thing` (untyped). A person whose infobox names an office
    (`role_templates`) is typed by occupation: `person_class`."""
    ontology = load_ontology()
    for box in boxes:
        if box.cls:
            if ontology.is_role_template(box.name) and ontology.is_a(box.cls, PERSON_CLASS):
                return person_class(box, lead)
            if (own := own_class(box, lead, text)) is not None:
                if counts is not None:
                    counts[PAGE_OVER_TEMPLATE] += 1
                return own
            return box.cls
    if is_list_page(title):
        return LIST_CLASS
    return _lead_class(lead, text) or UNTYPED_ENTITY


def _lead_class(lead: str, text: str) -> str | None:
    """The class the page's lead sentence's noun names, else one its categories' words name."""
    ontology = load_ontology()
    return ontology.type_from_lead(lead) or ontology.type_from_categories(_CATEGORY.findall(text))


def own_class(box: Infobox, lead: str, text: str) -> str | None:
    """The class the page names itself by where its infobox template's class is too coarse a fit: the value of
    the box's own-kind parameter ("type = Private women's liberal arts college", the overlay's
    `own_type_parameters`), else its short description ("Private women's college in New York City"), else its
    lead sentence's noun, when that class is a sibling of the template's (`Infobox university` also serves
    Barnard College: a College, not a University). None: the template's class stands."""
    ontology = load_ontology()
    nouns = [fact.value or "" for fact in box.facts if fact.relation in ontology.own_type_parameters]
    nouns += [lead_noun_phrase(f"It is a {found}") or "" for found in _SHORT_DESCRIPTION.findall(text)[:1]]
    candidates = [ontology.lead_noun_class(lead_noun_phrase(f"It is a {noun}") or "") for noun in nouns]
    candidates.append(ontology.type_from_lead(lead))
    own = next((cls for cls in candidates if cls), None)
    return own if own is not None and ontology.siblings(own, box.cls) else None


def person_class(box: Infobox, lead: str) -> str:
    """An officeholder's class by occupation: the lead sentence's noun ("is a German politician"), else the
    first occupation value the overlay's lead nouns know, else Person: the office alone is no occupation (a
    prime minister's spouse, a bishop)."""
    ontology = load_ontology()
    candidates = [ontology.type_from_lead(lead)]
    candidates += [ontology.lead_noun_class(fact.tail or fact.value or "") for fact in box.facts
                   if fact.property in OCCUPATION_PROPERTIES]
    return next((cls for cls in candidates if cls and ontology.is_a(cls, PERSON_CLASS)), PERSON_CLASS)


def distinct_relations(title: str, relations: Iterable[R]) -> list[R]:
    """A page's relations in order, without repeats: an infobox fact stated twice is kept once, a lead
    link once per target and never to the page itself. Keeping the first of each kind is stable under
    redirect resolution, so the join-based pipeline applies it again after resolving the tails."""
    kept: list[R] = []
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


def named_value_key(relation: Relation | RelationFacts) -> str | None:
    """The title a plain-text infobox value would name ("country = Angola"), or None when it cannot."""
    value = relation.value
    if relation.source != "infobox" or relation.value_type != "string" or not value:
        return None
    if len(value) > MAX_TITLE_CHARS or any(char in value for char in "#<>[]{}|"):
        return None
    if relation.mapped and load_ontology().range_mismatch(relation.relation, "entity"):
        return None  # a date, number or measure that happens to spell a page title stays a value
    return normalize_title(value) or None


def value_naming(relation: Relation | RelationFacts, target: str | None) -> dict | None:
    """The fields that change when a plain-text value exactly names a page `target` (or a redirect to one):
    it becomes an edge to that page. None when it names none (or its own page)."""
    if target is None or target == relation.head:
        return None
    return {"tail": target, "value": None, "value_type": "entity"}


def name_value(relation: Relation, target: str | None) -> Relation:
    """`value_naming` applied to a relation."""
    update = value_naming(relation, target)
    return relation if update is None else relation.model_copy(update=update)


RANGE_VIOLATION = "range"  # counted as `excluded:range`; the other outcomes as `range_check:<outcome>`


def check_ranges(relations: Iterable[R], class_of: Callable[[str], str | None], counts: Counter) -> list[R]:
    """A page's relations without the infobox facts whose linked page the property's range rules out
    (`Ontology.range_check`): "office = [[Social Democratic Party of Germany]]" names a party, not an office.
    `class_of(tail)` is the class of the page a (resolved) tail names, None when the input lacks it; each
    checked fact is counted by its outcome, so the check says how much it could not judge."""
    ontology = load_ontology()
    kept = []
    for relation in relations:
        if relation.source != "infobox" or not relation.mapped or relation.tail is None:
            kept.append(relation)
            continue
        outcome = ontology.range_check(relation.relation, class_of(relation.tail))
        if outcome == "violates":
            counts[RANGE_VIOLATION] += 1
            continue
        counts[f"range_check:{outcome}"] += 1
        kept.append(relation)
    return kept


def attach_aliases(entity: Entity, aliases: Iterable[str]) -> Entity:
    names = sorted(set(aliases) - {entity.title})
    return entity.model_copy(update={"aliases": names}) if names else entity
