"""Infobox facts as DBpedia reads them, from one infobox span parsed with mwparserfromhell.

An infobox's named parameters become facts: the relation is the parameter name (lower case, underscores,
a trailing group number stripped into `group_index`); image/caption/map/coordinate-like parameters are
skipped. A value is split into items on `<br>`, bullets, new lines and list templates (plainlist, flatlist,
hlist, ubl, ...). In each item, wikilinks outside parentheses are entity objects; date templates, convert,
flags and marriage templates become typed values; parenthesised text becomes a qualifier (dates in it,
"(1990-2010)", "(m. 1980; div. 1995)", "(died 1944)", start/end qualifiers); what is left is a number, a
quantity, a written date or a string. A link inside a phrase ("Chairman of the [[Social Democratic Party of
Germany]]") is not the value: the phrase is, and a property whose values are entities drops it (counted).
References and comments never reach a value.
Titles are normalised here and resolved through redirects later (`extract.classify`, `extract.joins`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field, replace

import mwparserfromhell
from mwparserfromhell.nodes import Comment, ExternalLink, HTMLEntity, Tag, Template, Text, Wikilink
from mwparserfromhell.wikicode import Wikicode

from knowledge.ontology import Ontology, load_ontology
from knowledge.templates import template_vocabulary
from wikitext.markup import (
    BOX_NAMES,
    complete_date,
    is_entity_link,
    is_list_page,
    iso_date,
    normalize_template_name,
    normalize_title,
    parse_quantity,
    parse_text_date,
)

_GROUP_INDEX = re.compile(r"^(?P<base>.*?[a-z_\-)])(?P<index>\d+)$")
_SQUARE_UNIT = re.compile(r"(?:^|_)(?:km|mi|m|ft|sq_mi|sq_km)2$")  # area_total_km2 is a unit, not a group
VOCABULARY = template_vocabulary()  # list, unwrap, flag, marriage, convert templates, ... (data/ontology/)
DATE_TEMPLATE = re.compile(
    r"^(?:(?P<kind>birth|death|start|end|film|release|founded|dissolved)[ _-]?date(?P<age> and age| and years)?"
    r"(?P<two>2)?|(?P<short>dob|bda|dda|dts|date|start date and years)|(?P<yearonly>(?:birth|death) year(?: and age)?))$"
)
_PARENS = re.compile(r"\(([^()]*)\)")
# compiled once: they run for every parameter and item of every infobox
_PARAMETER_SPACES = re.compile(r"[\s_]+")
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,;:.])")
_WORDS = re.compile(r"[a-z]+")
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th)$")
_KEEP_FINAL_PERIOD = re.compile(r"(?:\b[A-Z][a-z]{0,3}|\b[a-z]{1,3})\.$")  # Sr. Jr. Inc. U.S. etc.


@dataclass
class Fact:
    """One infobox fact before redirect resolution: the head is the page, `tail` an unresolved title."""

    relation: str
    parameter: str
    infobox: str
    value_type: str
    group_index: int | None = None
    tail: str | None = None
    value: str | None = None
    unit: str | None = None
    date: dt.date | None = None
    qualifiers: list[tuple[str, str]] = field(default_factory=list)
    property: str | None = None  # the ontology property the parameter maps to (None: unmapped)
    in_phrase: bool = False  # a link inside a phrase naming something else, or that phrase as text


@dataclass
class Infobox:
    """One infobox: its facts, its ontology class (None: unmapped template), the values of the parameters its
    class conditions read, and the count of parameters and values left out as plumbing, by reason."""

    name: str
    facts: list[Fact]
    cls: str | None = None
    condition_values: dict[str, list[str]] = field(default_factory=dict)
    excluded: Counter = field(default_factory=Counter)
    subject: str | None = None  # the plain text of its `name` parameter: whom the box says it is about
    nested: bool = False  # inside another box's parameter (a `module`): about that box's subject


def normalize_parameter(raw: str) -> tuple[str, int | None]:
    """`Spouse2` -> ("spouse", 2); `birth date` -> ("birth_date", None)."""
    name = _PARAMETER_SPACES.sub("_", raw.strip().lower()).strip("_")
    match = _GROUP_INDEX.match(name)
    if match and not _SQUARE_UNIT.search(name):
        return match.group("base").rstrip("_-"), int(match.group("index"))
    return name, None


def is_skipped_parameter(name: str) -> bool:
    """Image, caption, map, coordinate, colour, identifier and page-name parameters carry no facts
    (`data/ontology/overlay.toml`, `plumbing_parameters`)."""
    return load_ontology().plumbing_reason(name) is not None


def is_box_name(name: str) -> bool:
    return name.startswith("infobox") or name in BOX_NAMES


def parse_infoboxes(span_text: str) -> list[Infobox]:
    """Every infobox in a span (the top-level one first, then nested ones) with its facts."""
    return boxes_in(mwparserfromhell.parse(span_text))


def boxes_in(code: Wikicode) -> list[Infobox]:
    """The infoboxes among the top-level templates of parsed wikitext (a span, or a whole page)."""
    ontology = load_ontology()
    boxes: list[Infobox] = []
    for template in code.filter_templates(recursive=False):
        name = normalize_template_name(str(template.name))
        if is_box_name(name):
            _collect_box(template, name, boxes, ontology)
    return boxes


def _collect_box(template: Template, name: str, boxes: list[Infobox], ontology: Ontology,
                 nested: bool = False) -> None:
    box = Infobox(name, [], nested=nested)
    boxes.append(box)
    conditions = ontology.condition_parameters(name)
    other_events = _other_event_groups(template)
    for param in template.params:
        raw_name = str(param.name)
        relation, group = normalize_parameter(_strip_comments(raw_name))
        if not param.showkey or not relation or relation.isdigit():
            continue
        if relation in conditions:
            box.condition_values.setdefault(relation, []).append(param.value.strip_code().strip())
        if relation == SUBJECT_PARAMETER and group is None:
            box.subject = param.value.strip_code().strip() or None
        nested = [t for t in param.value.filter_templates(recursive=False)
                  if is_box_name(normalize_template_name(str(t.name)))]
        for inner in nested:
            _collect_box(inner, normalize_template_name(str(inner.name)), boxes, ontology, nested=True)
        if nested:
            continue
        reason = ontology.plumbing_reason(relation)
        if not reason and relation == ESTABLISHED_DATE and group in other_events:
            reason = "not_a_founding"
        if reason:
            box.excluded[reason] += 1
            continue
        parameter = raw_name.strip()
        mapped = ontology.mapped_name(name, relation)
        for item in split_items(param.value):
            dates = _expects_date(relation) or ontology.expects_date(mapped)
            facts = facts_from_item(item, relation, dates_expected=dates)
            if _holds_places(ontology, mapped) and is_place_chain(item):
                facts, containers = _innermost_place(facts)
                box.excluded["place_container"] += containers
            for fact in facts:
                fact.group_index, fact.parameter, fact.infobox = group, parameter, name
                box.facts.append(fact)
    map_box(box, ontology)


ESTABLISHED_DATE, ESTABLISHED_TITLE = "established_date", "established_title"
SUBJECT_PARAMETER = "name"  # the parameter that names what the box is about (plumbing: no fact of its own)


def _other_event_groups(template: Template) -> set[int | None]:
    """The groups whose `established_titleN` names an event other than the founding ("Incorporated"):
    their `established_dateN` is no founding date."""
    groups = set()
    for param in template.params:
        raw_name = str(param.name)
        if "establish" not in raw_name.lower():  # cheap: this runs over every parameter of every infobox
            continue
        relation, group = normalize_parameter(_strip_comments(raw_name))
        if relation == ESTABLISHED_TITLE and set(_WORDS.findall(param.value.strip_code().lower())) & VOCABULARY.not_founding_titles:
            groups.add(group)
    return groups


_CHAIN_GLUE = re.compile(r"^\s*,\s*$")


def is_place_chain(item: list) -> bool:
    """Whether a value item is a place written with its containers, "[[Wakefield]], [[West Yorkshire]], England":
    links joined by bare commas only. "[[Cincinnati]], [[Ohio]] and [[Covington, Kentucky]]" names two places."""
    links = [index for index, node in enumerate(item) if isinstance(node, Wikilink)]
    if len(links) < 2:
        return False
    return all(isinstance(node, Text) and _CHAIN_GLUE.match(node.value) for node in item[links[0] + 1:links[-1]]
               if not isinstance(node, Wikilink))


def _innermost_place(facts: list[Fact]) -> tuple[list[Fact], int]:
    """The facts of a place chain with only its first link, the place itself: the later links are the
    regions and countries that contain it (a birth place is Wakefield, not also West Yorkshire), kept as its
    `within` qualifiers. Returns the kept facts and how many container links were left out."""
    links = [f for f in facts if f.value_type == "entity" and f.tail and not f.in_phrase]
    links[0].qualifiers = links[0].qualifiers + [("within", container.tail) for container in links[1:]]
    return [f for f in facts if f not in links[1:]], len(links) - 1


def map_box(box: Infobox, ontology: Ontology) -> None:
    """The box's class and each fact's property; plumbing facts (by property or by value) leave the box
    and are counted by reason."""
    box.cls = ontology.template_class(box.name, lambda parameter: box.condition_values.get(parameter, []))
    kept = []
    for fact in box.facts:
        name = ontology.mapped_name(box.name, fact.relation, box.cls, fact.group_index)
        reason = ontology.plumbing_reason(fact.relation, name) or ontology.range_mismatch(name, fact.value_type)
        if not reason and fact.value_type in ("string", "quantity"):  # "220px" reads as 220 with the unit px
            reason = ontology.value_plumbing(f"{fact.value} {fact.unit}" if fact.unit else fact.value)
        if not reason and fact.tail and is_list_page(fact.tail):  # "basin_countries = [[List of ...]]"
            reason = "list_page"
        if not reason and fact.in_phrase and (fact.value_type == "entity" or _holds_entities(ontology, name)):
            reason = "link_in_phrase"  # "known_for = Ex-wife of [[Silvio Berlusconi]]" is not Berlusconi
        if reason:
            box.excluded[reason] += 1
            continue
        fact.property = name if name in ontology.properties else None
        unit = ontology.parameter_unit(fact.relation) if fact.value_type == "number" else None
        if unit:  # area_total_km2 = 350: 350 km2, not a bare number beside area_total_sq_mi's
            fact.value_type, fact.unit = "quantity", unit
        if _holds_entities(ontology, fact.property):
            kept.extend(list_items(fact, _PLACE_SEPARATOR if _holds_places(ontology, name) else _LIST_SEPARATOR))
        else:
            kept.append(fact)
    box.facts = kept
    _qualify_terms(box, ontology)


_TRANSPARENT_HEADS = [[head] for head in VOCABULARY.transparent_phrase_heads]
_LIST_SEPARATOR = re.compile(r"\s*[,;]\s*")
_PLACE_SEPARATOR = re.compile(r"\s*;\s*")
_NOT_A_LIST = re.compile(r"\d|\s[–—-]\s")
MAX_LIST_ITEM_WORDS = 4
PLACE_CLASS = "Place"


def list_items(fact: Fact, separator: re.Pattern = _LIST_SEPARATOR) -> list[Fact]:
    """A plain-text list for a property whose values are entities ("occupation = civil servant, politician")
    is one fact per item: several values, never one value reading "civil servant, politician". A place is
    split only on semicolons: "Austin, Texas" names one place (and its page)."""
    if fact.value_type != "string" or fact.in_phrase or not fact.value or not separator.search(fact.value):
        return [fact]
    items = [item for item in separator.split(fact.value) if item]
    if _NOT_A_LIST.search(fact.value) or any(len(item.split()) > MAX_LIST_ITEM_WORDS for item in items):
        return [fact]  # "40th floor, 11, Seocho-daero" is an address, "Fook – guitar, vocals" a member's roles
    return [replace(fact, value=item, qualifiers=list(fact.qualifiers)) for item in items]


def _holds_places(ontology: Ontology, prop: str | None) -> bool:
    entry = ontology.properties.get(prop) if prop else None
    return entry is not None and ontology.is_a(entry.range, PLACE_CLASS)


def _holds_entities(ontology: Ontology, prop: str | None) -> bool:
    entry = ontology.properties.get(prop) if prop else None
    return entry is not None and entry.is_object


def _qualify_terms(box: Infobox, ontology: Ontology) -> None:
    """A term of office bounds the facts of its group: `office3`, `predecessor3` ... take the start and end
    of `term_start3`/`term_end3` as qualifiers, so that questions phrase an ended term in the past and state
    an as-of date for a running one (`data/ontology/overlay.toml`, `[terms]`)."""
    terms = ontology.terms
    bounds: dict[int | None, list[tuple[str, str]]] = {}
    for fact in box.facts:
        key = terms["start_parameters"].get(fact.relation) or terms["end_parameters"].get(fact.relation)
        if key and fact.value_type == "date" and fact.value:
            bounds.setdefault(fact.group_index, []).append((key, fact.value))
    bound = set(terms["bound_properties"])
    for fact in box.facts:
        if fact.property in bound:
            qualifiers = [q for q in bounds.get(fact.group_index, []) if q[0] not in {k for k, _ in fact.qualifiers}]
            fact.qualifiers = fact.qualifiers + list(dict.fromkeys(qualifiers))


def _strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def _expects_date(relation: str) -> bool:
    return any(token in VOCABULARY.date_parameter_tokens for token in relation.split("_"))


# ------------------------------------------------------------------------------------------- splitting

def split_items(value: Wikicode) -> list[list]:
    """A parameter value as items (lists of nodes): split on <br>, bullets, new lines and list templates."""
    items: list[list] = [[]]
    _split_into(value.nodes, items)
    return [item for item in items if item]


def _split_into(nodes, items: list[list]) -> None:
    for node in nodes:
        if isinstance(node, Comment) or (isinstance(node, Tag) and str(node.tag).lower() in ("ref", "references")):
            continue
        if isinstance(node, Tag) and str(node.tag).lower() in ("br", "li", "p", "hr"):
            items.append([])
            if node.contents is not None and str(node.tag).lower() == "li" and not node.wiki_markup:
                _split_into(node.contents.nodes, items)
                items.append([])
            continue
        if isinstance(node, Text) and "\n" in node.value:
            lines = node.value.split("\n")
            for index, line in enumerate(lines):
                if index:
                    items.append([])
                if line.strip():
                    items[-1].append(Text(line))
            continue
        if isinstance(node, Template):
            name = normalize_template_name(str(node.name))
            if name in VOCABULARY.lists:
                items.append([])
                for param in node.params:
                    if not param.showkey:
                        _split_into(param.value.nodes, items)
                        items.append([])
                continue
            if name in VOCABULARY.unwrap and node.has("1"):
                _split_into(node.get("1").value.nodes, items)
                continue
        items[-1].append(node)


# ------------------------------------------------------------------------------------------ item facts

def facts_from_item(item: list, relation: str, dates_expected: bool = False) -> list[Fact]:
    """The typed facts of one value item."""
    walker = _ItemWalker(relation)
    walker.walk(item)
    facts = walker.facts + [Fact(relation, "", "", "entity", tail=target) for target in walker.links]
    text = _PARENS.sub(" ", "".join(walker.text))
    text = strip_trailing_punctuation(_SPACE_BEFORE_PUNCTUATION.sub(r"\1", _WHITESPACE.sub(" ", text)))
    if walker.headed_phrase and not walker.listed and text:  # "Chairman of the [[SPD]]": the phrase is the value, none of its links
        facts = walker.facts + [Fact(relation, "", "", "string", value=text, in_phrase=True)]
    else:  # "[[Member of the Bundestag|Member]] of the [[Bundestag]]": the first link is the value, the rest
        # complements it; a link after a bare connector with nothing before it ("for [[Bonn]]") has no head
        facts += [Fact(relation, "", "", "entity", tail=target, in_phrase=True) for target in walker.phrase_links]
    if not facts and text:
        facts.append(literal_fact(relation, text, dates_expected))
    notes = [qualifier for note in walker.notes for qualifier in note_qualifiers(note)]
    for fact in facts:
        fact.qualifiers = fact.qualifiers + [q for q in notes if q not in fact.qualifiers]
    return facts


_RANGE = re.compile(r"^(?P<first>.+?)\s*(?:[-–—]|\bto\b)\s*(?P<last>.+)$")
_NOTE_PARTS = re.compile(r"\s*[;,]\s*")


def note_qualifiers(note: str) -> list[tuple[str, str]]:
    """A parenthesised note as qualifiers: its dates as start/end (and the end's reason), the note itself
    when some of it is not read as dates. "(m. 1980; div. 1995)" -> start 1980, end 1995, end_reason divorced;
    "(1924–1944)" -> start, end; "(until 2010)" -> end; "(2005–present)" -> start; "(died 1944)" -> end, died."""
    qualifiers: list[tuple[str, str]] = []
    whole = True
    for part in (p for p in _NOTE_PARTS.split(note) if p):
        reason = VOCABULARY.end_reasons.get(part.lower().rstrip("."))  # "(1984–2019; his death)"
        read = [("end_reason", reason)] if reason and qualifiers else _dated_part(part)
        whole = whole and bool(read)
        qualifiers += [q for q in read if q[0] not in {k for k, _ in qualifiers}]
    if not qualifiers:
        return [("note", note)]
    return qualifiers if whole else [("note", note), *qualifiers]


def _dated_part(part: str) -> list[tuple[str, str]]:
    """One `;`- or `,`-separated piece of a note: "1990-2010", "m. 1980", "div. 1995", "until 2010"."""
    word, _, rest = part.partition(" ")
    key = word.lower().rstrip(".")
    if rest and key in VOCABULARY.note_start_words and (iso := parse_text_date(rest)):
        return [("start", iso)]
    if rest and key in VOCABULARY.note_end_words and (iso := parse_text_date(rest)):
        reason = VOCABULARY.end_reasons.get(key)
        return [("end", iso)] + ([("end_reason", reason)] if reason else [])
    if key in VOCABULARY.note_start_words and rest:  # "m. 1980–1995": the word, then a range
        part = rest
    match = _RANGE.match(part)
    if match and (first := parse_text_date(match.group("first"))):
        last = match.group("last").strip()
        if last.lower().rstrip(".") in VOCABULARY.note_present_words:
            return [("start", first)]
        if (end := parse_text_date(last)) and end >= first:
            return [("start", first), ("end", end)]
    return []


def strip_trailing_punctuation(text: str) -> str:
    """Separators left at the ends of a value go; the period of an abbreviation ("Sr.", "Inc.") stays."""
    text = text.strip(" \t\n,;:")
    while text.endswith(".") and not _KEEP_FINAL_PERIOD.search(text):
        text = text[:-1].rstrip(" \t\n,;:")
    return text


def literal_fact(relation: str, text: str, dates_expected: bool) -> Fact:
    """A plain-text value typed as date, number, quantity or string."""
    if _ORDINAL.match(text):  # "22nd" is an ordinal, not 22 with the unit "nd"
        return Fact(relation, "", "", "string", value=text)
    iso = parse_text_date(text)
    if iso and (len(iso) > 4 or dates_expected):
        return Fact(relation, "", "", "date", value=iso, date=complete_date(iso))
    quantity = parse_quantity(text)
    if quantity:
        number, unit = quantity
        if unit is None:
            return Fact(relation, "", "", "number", value=number)
        return Fact(relation, "", "", "quantity", value=number, unit=unit)
    return Fact(relation, "", "", "string", value=text)


class _ItemWalker:
    """Walks one item's nodes: links outside parentheses, typed template values, the item's text and
    the parenthesised notes. Parenthesis depth is tracked across nested tags (italics, small, ...)."""

    def __init__(self, relation: str):
        self.relation = relation
        self.facts: list[Fact] = []
        self.links: list[str] = []
        self.text: list[str] = []
        self.notes: list[str] = []
        self.phrase_links: list[str] = []  # links right after "of (the)", "for", ... : inside a phrase
        self.headed_phrase = False  # a phrase link after words of its own ("Chairman of the"): a phrase value
        self.listed = False  # links separated by commas: a list, whose phrase items drop only their own links
        self.depth = 0
        self.note: list[str] = []
        self.since_link: list[str] = []  # the text outside parentheses since the last link

    def emit(self, text: str) -> None:
        for char in text:
            if char == "(":
                self.depth += 1
                if self.depth == 1:
                    self.note.clear()
                    continue
            elif char == ")" and self.depth > 0:
                self.depth -= 1
                if self.depth == 0:
                    note = re.sub(r"\s+", " ", "".join(self.note)).strip()
                    if note:
                        self.notes.append(note)
                    continue
            if self.depth > 0:
                self.note.append(char)
            else:
                self.since_link.append(char)
        self.text.append(text)

    def in_phrase(self) -> bool:
        """Whether a link here sits inside a phrase: the text since the last link ends in a connector ("of
        the"). Words before the connector ("Chairman of the") make the whole item a phrase (`headed_phrase`)."""
        before = "".join(self.since_link)
        self.listed = self.listed or (bool(self.links or self.phrase_links) and bool(_LIST_SEPARATOR.search(before)))
        words = " ".join(re.findall(r"[\w'’-]+", _LIST_SEPARATOR.split(before)[-1].lower()))
        connector = next((c for c in VOCABULARY.phrase_connectors if words == c or words.endswith(" " + c)), None)
        if connector is None or words.removesuffix(connector).split()[-1:] in _TRANSPARENT_HEADS:
            return False  # no phrase, or one whose head relates the subject to the link ("Citizen of")
        if words != connector:
            self.headed_phrase = True
        return True

    def walk(self, nodes) -> None:
        for node in nodes:
            if isinstance(node, Text):
                self.emit(node.value)
            elif isinstance(node, HTMLEntity):
                self.emit(node.normalize())
            elif isinstance(node, Wikilink):
                target = str(node.title)
                if not is_entity_link(target):
                    continue
                if self.depth == 0:
                    (self.phrase_links if self.in_phrase() else self.links).append(normalize_title(target))
                self.emit(node.text.strip_code() if node.text is not None else target)
                if self.depth == 0:
                    self.since_link.clear()
            elif isinstance(node, ExternalLink):
                self.emit(str(node.title or ""))
            elif isinstance(node, Tag):
                if str(node.tag).lower() not in ("ref", "references", "sup") and node.contents is not None:
                    self.walk(node.contents.nodes)
            elif isinstance(node, Template) and self.depth == 0:
                facts, text = template_value(node, self.relation)
                self.facts.extend(facts)
                if text and not facts:
                    self.emit(text)


def template_value(template: Template, relation: str) -> tuple[list[Fact], str]:
    """Facts a value template stands for (date, quantity, flag country, spouse) and text it renders."""
    name = normalize_template_name(str(template.name))
    positional = [p.value for p in template.params if not p.showkey]
    date_match = DATE_TEMPLATE.match(name)
    if date_match and positional:
        return date_facts(relation, date_match, positional), ""
    if name in VOCABULARY.convert and positional:
        return convert_fact(relation, [str(p).strip() for p in positional]), ""
    if name in VOCABULARY.flags and positional:
        if name in VOCABULARY.decorative_flags:
            return [], ""
        return [Fact(relation, "", "", "entity", tail=normalize_title(_plain(positional[0])))], ""
    if name in VOCABULARY.marriage and positional:
        return [marriage_fact(relation, template, positional)], ""
    if name in VOCABULARY.keep_last and positional:
        return [], _plain(positional[-1])
    if name.startswith("lang-") and positional:
        return [], _plain(positional[-1])
    if name in VOCABULARY.first_argument_text and positional:
        return [], _plain(positional[0])
    return [], ""


def _plain(code: Wikicode) -> str:
    return code.strip_code().strip()


def date_facts(relation: str, match: re.Match, positional: list[Wikicode]) -> list[Fact]:
    """{{birth date|1961|8|4}}, {{death date and age|2016|4|21|1958|6|7}}, {{film date|2010|7|16|US|...}},
    {{start date|2009}}, {{birth-date|4 August 1961}} -> ISO dates (a film date may list several)."""
    values = [_plain(p) for p in positional]
    if match.group("yearonly"):
        iso = iso_date(values[0])
        return [Fact(relation, "", "", "date", value=iso)] if iso else []
    groups: list[tuple[list[str], str | None]]
    if match.group("kind") == "film" or match.group("kind") == "release":
        groups = []
        for start in range(0, len(values), 4):
            chunk = values[start : start + 4]
            location = chunk[3] if len(chunk) > 3 and chunk[3] else None
            groups.append((chunk[:3], location))
    else:
        groups = [(values[:3], None)]
    facts = []
    for parts, location in groups:
        if not parts or not parts[0]:
            continue
        iso = iso_date(*parts) if parts[0].isdigit() else parse_text_date(parts[0])
        if iso is None:
            continue
        fact = Fact(relation, "", "", "date", value=iso, date=complete_date(iso))
        if location:
            fact.qualifiers.append(("location", location))
        facts.append(fact)
    return facts


def convert_fact(relation: str, positional: list[str]) -> list[Fact]:
    """{{convert|346|km|mi}} -> 346 km; {{convert|10|to|20|km}} -> 10 km (the first number and its unit)."""
    number = positional[0].replace(",", "")
    unit = next((p for p in positional[1:] if p and p.lower() not in VOCABULARY.range_words and not _is_number(p)), None)
    quantity = parse_quantity(number)
    if not quantity:
        return []
    return [Fact(relation, "", "", "quantity" if unit else "number", value=quantity[0], unit=unit)]


def _is_number(text: str) -> bool:
    return parse_quantity(text) is not None and parse_quantity(text)[1] is None


def marriage_fact(relation: str, template: Template, positional: list[Wikicode]) -> Fact:
    """{{marriage|[[Michelle Obama]]|1992|end=div}} -> a spouse with start/end/end_reason qualifiers."""
    spouse_code = positional[0]
    linked = [str(link.title) for link in spouse_code.filter_wikilinks() if is_entity_link(str(link.title))]
    if linked:
        fact = Fact(relation, "", "", "entity", tail=normalize_title(linked[0]))
    else:
        fact = Fact(relation, "", "", "string", value=spouse_code.strip_code().strip())
    for key, raw in zip(("start", "end"), positional[1:3], strict=False):
        iso = _date_of(raw)
        if iso:
            fact.qualifiers.append((key, iso))
    if template.has("end"):
        reason = _plain(template.get("end").value).lower().strip(" .")
        if reason:
            fact.qualifiers.append(("end_reason", VOCABULARY.end_reasons.get(reason, reason)))
    return fact


def _date_of(code: Wikicode) -> str | None:
    for template in code.filter_templates(recursive=False):
        match = DATE_TEMPLATE.match(normalize_template_name(str(template.name)))
        if match:
            positional = [p.value for p in template.params if not p.showkey]
            facts = date_facts("", match, positional) if positional else []
            return facts[0].value if facts else None
    return parse_text_date(code.strip_code())
