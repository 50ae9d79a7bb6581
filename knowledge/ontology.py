"""The relation ontology: infobox template -> class, template parameter -> property, and what each property is.

Read from the committed tables in `data/ontology/` (never from ../shared): the DBpedia-derived TSVs written by
`data/ontology/build_ontology.py`, the hand-kept `overlay.toml` with what the mappings lack for the
infoboxes hopsmith meets (template redirects, unmapped templates and parameters, plumbing, lead-sentence
and category types), and `non_facts.tsv`: the names that carry no fact (parameters extraction drops, relations
walks never take). Extraction names relations by property (`birthPlace`), phrasing and gates read a
property's label, domain, range, object-vs-literal, single-valuedness and whether one value identifies its
subject in the world (inverse-functional), and a class's ancestors here.
"""

from __future__ import annotations

import csv
import functools
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "ontology"
ANY_TEMPLATE = "*"
ROOT_CLASS = "owl:Thing"
_TOKEN = re.compile(r"[a-z]+")
_DATE_RANGES = frozenset({"xsd:date", "xsd:gYear", "xsd:gYearMonth", "xsd:dateTime"})
_TEXT_RANGES = frozenset({"", "xsd:string", "rdf:langString", "xsd:anyURI"})  # a page may name such a value
_IS_A = re.compile(r"\b(?:is|was|are|were)\s+(?:one of\s+)?(?:(?:a|an|the)\s+)?"
                   r"(?:(?:series|type|kind|set|group|pair|family|collection|variety|class) of\s+)?"
                   r"(.+?)(?=[,.;:]|\s(?:of|in|on|at|from|for|by|that|which|who|whose|with|and|located)\s|$)")


@dataclass(frozen=True)
class Property:
    name: str
    kind: str  # "object" (its values are entities) or "datatype" (literals)
    label: str  # English label: "birth place"
    domain: str
    range: str
    wikidata: str  # "P19" ("" when DBpedia gives none)
    functional: bool  # at most one value per subject (owl:FunctionalProperty, or the overlay says so)
    inverse_functional: bool = False  # one value picks out its subject in the world (the overlay says which)
    inverse_functional_class: str = ""  # ... only a value of this class (a novel names its writer, a film no one)

    @property
    def is_object(self) -> bool:
        return self.kind == "object"


@dataclass(frozen=True)
class OntologyClass:
    name: str
    parent: str
    label: str
    wikidata: str


@dataclass(frozen=True)
class ClassRule:
    """One row of a template's class mapping: `cls` when `parameter operator value` holds (or always)."""

    cls: str
    parameter: str = ""
    operator: str = ""
    value: str = ""

    def holds(self, values: Callable[[str], list[str]]) -> bool:
        if not self.operator or self.operator == "otherwise":
            return True
        found = values(self.parameter)
        if self.operator == "isSet":
            return any(v.strip() for v in found)
        wanted = self.value.lower()
        if self.operator == "equals":
            return any(v.strip().lower() == wanted for v in found)
        if self.operator == "contains":
            return any(wanted in v.lower() for v in found)
        return False


class Ontology:
    """Lookups over the tables; one instance per process (`load_ontology`)."""

    def __init__(self, properties: dict[str, Property], classes: dict[str, OntologyClass],
                 templates: dict[str, list[ClassRule]], parameters: dict[tuple[str, str], str],
                 overlay: dict, non_facts: list[dict[str, str]], object_ranges: list[dict[str, str]] = ()):
        self.properties = properties
        self.classes = classes
        self.templates = templates
        self.parameters = parameters
        self.template_aliases: dict[str, str] = overlay.get("template_aliases", {})
        self.property_aliases: dict[str, str] = overlay.get("property_aliases", {})
        self.parameter_units: dict[str, str] = overlay.get("parameter_units", {})
        self.plumbing_properties: dict[str, str] = overlay.get("plumbing_properties", {})
        plumbing = overlay.get("plumbing_parameters", {})
        self.plumbing_tokens: dict[str, str] = plumbing.get("tokens", {})
        self.plumbing_prefixes: dict[str, str] = plumbing.get("prefixes", {})
        self.plumbing_suffixes: dict[str, str] = plumbing.get("suffixes", {})
        self.plumbing_names = {row["name"]: row["extraction"] for row in non_facts if row["extraction"] != "-"}
        self.non_fact_relations = tuple(row["name"] for row in non_facts if row["walks"] == "skip")  # walks skip these
        self.template_renames: dict[str, dict[str, str]] = overlay.get("template_property_renames", {})
        self.terms: dict = {"start_parameters": {}, "end_parameters": {}, "bound_properties": [],
                            **overlay.get("terms", {})}
        self.unmapped_parameters = {(template, parameter) for template, parameters
                                    in overlay.get("unmapped_parameters", {}).items() for parameter in parameters}
        self.value_patterns = [(reason, re.compile(pattern))
                               for reason, pattern in overlay.get("plumbing_values", {}).items()]
        types = overlay.get("types", {})
        self.lead_nouns: dict[str, str] = types.get("lead_nouns", {})
        self.category_words: dict[str, str] = types.get("category_words", {})
        self.lead_noun_drop: frozenset[str] = frozenset(types.get("lead_noun_drop", []))
        self.role_templates: frozenset[str] = frozenset(types.get("role_templates", []))
        self.own_type_parameters: frozenset[str] = frozenset(types.get("own_type_parameters", []))
        self.range_role_classes: tuple[str, ...] = tuple(overlay.get("range_role_classes", []))
        self.range_superclasses: dict[str, list[str]] = overlay.get("range_superclasses", {})
        self.object_ranges: dict[str, tuple[str, tuple[str, ...]]] = {
            row["property"]: (_dash(row["range"]), tuple(_dash(row["excludes"]).split())) for row in object_ranges}
        self._ancestors: dict[str, tuple[str, ...]] = {}
        self._plumbing: dict[str, str | None] = {}
        self._lower_classes = {name.lower(): name for name in classes}
        self._conditions = {template: frozenset(rule.parameter for rule in rules if rule.parameter)
                            for template, rules in templates.items()}

    # --- templates and classes --------------------------------------------------------------------------

    def canonical_template(self, template: str) -> str:
        return self.template_aliases.get(template, template)

    def condition_parameters(self, template: str) -> frozenset[str]:
        """The parameters a template's class conditions read (`settlement_type`, `background`)."""
        return self._conditions.get(self.canonical_template(template), frozenset())

    def template_class(self, template: str, values: Callable[[str], list[str]] = lambda _: []) -> str | None:
        """The class of an infobox, its conditions read through `values(parameter)`; None when unmapped."""
        for rule in self.templates.get(self.canonical_template(template), ()):
            if rule.holds(values):
                return rule.cls
        return None

    def is_role_template(self, template: str) -> bool:
        """Whether an infobox's class names an office its subject held rather than an occupation."""
        return template in self.role_templates or self.canonical_template(template) in self.role_templates

    def ancestors(self, cls: str) -> tuple[str, ...]:
        """`cls` and its superclasses, nearest first (`Politician`, `Person`, `Animal`, ...)."""
        if cls not in self._ancestors:
            chain, current = [], cls
            while current and current in self.classes and current not in chain:
                chain.append(current)
                current = self.classes[current].parent
            self._ancestors[cls] = tuple(chain)
        return self._ancestors[cls]

    def find_class(self, name: str) -> str | None:
        """The class called `name`, in any letter case (`person` -> `Person`); None for no class."""
        if name in self.classes:
            return name
        return self._lower_classes.get(name.lower().replace(" ", ""))

    def is_a(self, cls: str, ancestor: str) -> bool:
        return ancestor in (ROOT_CLASS, "") or ancestor in self.ancestors(cls)

    def type_from_lead(self, sentence: str) -> str | None:
        """A class from a lead sentence's "X is a ..." phrase ("... is an American rock band" -> Band): the
        last word (or two) of the phrase the overlay knows, before "of", "in", a comma, ..."""
        match = _IS_A.search(re.sub(r"\([^)]*\)", "", sentence))
        if not match:
            return None
        return _known_noun(_TOKEN.findall(match.group(1).lower()), self.lead_nouns)

    def lead_noun_class(self, noun: str) -> str | None:
        """The class a lead noun phrase's head names ("Ukrainian ska band" -> Band): its last two words or
        its last word as the overlay knows them; None when the head is no known noun ("American adult")."""
        words = noun.lower().split()
        for size in (2, 1):
            if len(words) >= size and (cls := _known_noun([" ".join(words[-size:])], self.lead_nouns)) is not None:
                return cls
        return None

    def lead_noun(self, noun: str | None, entity_class: str) -> str | None:
        """A lead noun phrase fit to describe an entity of `entity_class`: its head is a known noun whose class
        agrees with the entity's (one is the other's ancestor, they are siblings, or the entity is untyped), and evaluative
        words ("famous", "popular") are dropped. None otherwise: the caller uses the class noun."""
        if not noun:
            return None
        kept = " ".join(w for w in noun.split() if w.lower() not in self.lead_noun_drop)
        cls = self.lead_noun_class(kept) if kept else None
        if cls is None:
            return None
        entity = self.find_class(entity_class) or ""
        if entity in ("", ROOT_CLASS) or self.is_a(cls, entity) or self.is_a(entity, cls) or self.siblings(cls, entity):
            return kept  # "a liberal arts college" for a University: a sibling class reads right too
        return None

    def siblings(self, cls: str, other: str) -> bool:
        """Two different classes under one parent (College and University under EducationalInstitution)."""
        return (cls != other and cls in self.classes and other in self.classes
                and self.classes[cls].parent == self.classes[other].parent)

    def type_from_categories(self, categories: Iterable[str]) -> str | None:
        """A class from category names ("1954 births" -> Person); the first category that names one."""
        for category in categories:
            cls = _known_noun(_TOKEN.findall(category.lower()), self.category_words)
            if cls:
                return cls
        return None

    # --- parameters and properties ----------------------------------------------------------------------

    def mapped_name(self, template: str, parameter: str, cls: str | None = None,
                     group_index: int | None = None) -> str | None:
        """The name a (normalised) parameter of a template maps to: the template's own mapping (of the
        numbered name first: `subdivision_name1` is not `subdivision_name`), else the parameter's mapping
        across templates when its domain fits the entity's class; None when unmapped (or the overlay unmaps
        it: `unmapped_parameters`). Names outside the
        DBpedia ontology (`foaf:name`) come back as they are: they are plumbing."""
        template = self.canonical_template(template)
        if (template, parameter) in self.unmapped_parameters:
            return None
        name = None
        if group_index is not None:
            name = self.parameters.get((template, f"{parameter}{group_index}"))
            if name is None and self.parameters.get((template, f"{parameter}1")) is not None:
                name = self.parameters.get((template, f"{parameter}1"))
        if name is None:
            name = self.parameters.get((template, parameter))
        name = self.template_renames.get(template, {}).get(name, name)
        if name is None:
            name = self.parameters.get((ANY_TEMPLATE, parameter))
            if name is not None and cls is not None and not self.domain_fits(name, cls):
                return None
        return self.property_aliases.get(name, name)

    def domain_fits(self, prop: str, cls: str) -> bool:
        entry = self.properties.get(prop)
        return entry is None or not entry.domain or self.is_a(cls, entry.domain)

    def label(self, prop: str) -> str:
        entry = self.properties.get(prop)
        return entry.label if entry and entry.label else _split_camel(prop)

    def plumbing_reason(self, parameter: str, prop: str | None = None) -> str | None:
        """Why a parameter (or the property it maps to) carries template plumbing, not a fact; None if it
        does not. The tables say: image, caption, map, coordinates, colour, identifier, ..."""
        if prop and prop in self.plumbing_properties:
            return self.plumbing_properties[prop]
        if parameter not in self._plumbing:
            self._plumbing[parameter] = self._parameter_plumbing(parameter)
        return self._plumbing[parameter]

    def _parameter_plumbing(self, parameter: str) -> str | None:
        if parameter in self.plumbing_names:
            return self.plumbing_names[parameter]
        for suffix, reason in self.plumbing_suffixes.items():  # `image_size` is a size, not an image
            if parameter.endswith(suffix):
                return reason
        for prefix, reason in self.plumbing_prefixes.items():
            if parameter.startswith(prefix):
                return reason
        for token in parameter.split("_"):
            if token in self.plumbing_tokens:
                return self.plumbing_tokens[token]
        return None

    def identifies_subject(self, prop: str | None, object_class: str | None) -> bool:
        """Whether one object of `prop`, of class `object_class`, picks its subject out in the world: the
        property is inverse-functional, or is so for objects of its `inverse_functional_class`."""
        entry = self.properties.get(prop) if prop else None
        if entry is None or entry.inverse_functional:
            return entry is not None
        cls = self.find_class(object_class or "") if entry.inverse_functional_class else None
        return cls is not None and self.is_a(cls, entry.inverse_functional_class)

    def expects_date(self, prop: str | None) -> bool:
        """Whether the property holds dates or years (a bare "1990" is then a year, not a number)."""
        entry = self.properties.get(prop) if prop else None
        return entry is not None and entry.range in _DATE_RANGES

    def range_mismatch(self, prop: str | None, value_type: str) -> str | None:
        """`range_mismatch` when a value cannot be what the property holds: a page for a date, number or
        measure ("foundation = 1949, [[Wakefield]]" as the founding date), or a date for an entity."""
        entry = self.properties.get(prop) if prop else None
        if entry is None:
            return None
        if value_type == "entity" and not entry.is_object and entry.range not in _TEXT_RANGES:
            return "range_mismatch"
        if value_type == "date" and entry.is_object:
            return "range_mismatch"
        return None

    def range_check(self, prop: str, object_class: str | None) -> str:
        """How a linked page of class `object_class` meets what `prop` holds (its range as object_ranges.tsv
        corrects it): `violates` (the class is outside the range, or one the table excludes: not that fact),
        `fits`, `broader_class` (a superclass of the range: it may fit), `no_range` or `unknown_class` (an untyped
        page, or one the input lacks). Only `violates` excludes. Classes under one of `range_role_classes`
        (persons, settlements) are roles: a musician typed by his band infobox may still star in a film."""
        entry = self.properties.get(prop)
        default = entry.range if entry is not None and entry.range in self.classes else ""
        range_, excludes = self.object_ranges.get(prop, (default, ()))
        if not range_ and not excludes:
            return "no_range"
        cls = self.find_class(object_class or "")
        if cls is None or cls == ROOT_CLASS:
            return "unknown_class"
        if any(self._falls_under(cls, excluded) for excluded in excludes):
            return "violates"
        if not range_ or self._falls_under(cls, range_):
            return "fits"
        if self._falls_under(range_, cls):
            return "broader_class"
        if any(self.is_a(cls, role) and self.is_a(range_, role) for role in self.range_role_classes):
            return "fits"
        return "violates"

    def _falls_under(self, cls: str, ancestor: str) -> bool:
        """`is_a`, with the superclasses the overlay adds for the range check (`range_superclasses`)."""
        return self.is_a(cls, ancestor) or any(self.is_a(extra, ancestor) for own in self.ancestors(cls)
                                               for extra in self.range_superclasses.get(own, ()))

    def parameter_unit(self, parameter: str) -> str | None:
        """The unit a parameter's name states (`area_total_km2` -> km2, `elevation_ft` -> ft), if any."""
        for suffix, unit in self.parameter_units.items():
            if parameter.endswith(suffix):
                return unit
        return None

    def value_plumbing(self, value: str | None) -> str | None:
        """Why a literal value is plumbing (an image size, a file name, a colour, coordinates, an ordinal)."""
        if value:
            for reason, pattern in self.value_patterns:
                if pattern.search(value):
                    return reason
        return None


_DESCRIPTION_NOUN = re.compile(r"\b(?:is|was) (?:an?) ([^,.;:()]+)")
_NOUN_STOP = {"directed", "written", "by", "in", "on", "from", "who", "that", "which", "based", "and", "with", "of",
              "for", "set", "known", "best", "starring", "produced", "released", "published", "founded", "located",
              "at", "near", "born", "created", "whose", "where", "to", "as", "about", "adapted", "the", "first"}


def lead_noun_phrase(description: str) -> str | None:
    """The head noun phrase of a lead sentence: "Amy Adams (born 1974) is an American actress." -> "American actress".

    Numbers are dropped (they would state dates exactly); None when no short phrase is found.
    """
    first_sentence = re.sub(r"\([^)]*\)", "", description).split(". ")[0]
    match = _DESCRIPTION_NOUN.search(first_sentence)
    if not match:
        return None
    words = []
    for word in match.group(1).split():
        if word in _NOUN_STOP or (words and word.endswith(("ing", "ed"))):  # "a country comprising ..."
            break
        if not any(ch.isdigit() for ch in word):
            words.append(word)
    if not 1 <= len(words) <= 5 or not words[-1].isalpha() or not words[-1].islower():
        return None
    return " ".join(words)


def _known_noun(words: list[str], table: dict[str, str]) -> str | None:
    """The class of the rightmost word pair or word of `words` that `table` knows (plurals read as singular)."""
    for size in (2, 1):
        for end in range(len(words), size - 1, -1):
            phrase = " ".join(words[end - size : end])
            forms = [phrase, phrase.removesuffix("s")] + ([phrase[:-3] + "y"] if phrase.endswith("ies") else [])
            for form in forms:
                if form in table:
                    return table[form]
    return None


def parameter_key(raw: str) -> str:
    """A template parameter as the tables key it: lower case, runs of spaces and underscores as one `_`."""
    return re.sub(r"[\s_]+", "_", raw.strip().lower()).strip("_")


def _dash(cell: str) -> str:
    """A table cell with `-` for none."""
    return "" if cell.strip() == "-" else cell.strip()


def _split_camel(name: str) -> str:
    """`birthPlace` -> "birth place" (for properties without an English label)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name.split(":")[-1]).lower()


def _rows(path: Path) -> list[dict[str, str]]:
    """A tab-separated table's rows by its header (lines starting `#` before the header are its comment)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader((line for line in handle if not line.startswith("#")), delimiter="\t"))


@functools.lru_cache(maxsize=4)
def load_ontology(data_dir: str | Path = DATA_DIR) -> Ontology:
    """The committed tables with the overlay applied (cached: every caller in a process shares one)."""
    data_dir = Path(data_dir)
    overlay = tomllib.loads((data_dir / "overlay.toml").read_text(encoding="utf-8"))
    properties = {
        row["property"]: Property(row["property"], row["kind"], row["label"], row["domain"], row["range"],
                                  row["wikidata"], row["functional"] == "1", row["inverse_functional"] == "1")
        for row in _rows(data_dir / "properties.tsv")
    }
    for name in overlay.get("functional_properties", []):
        if name in properties:
            properties[name] = _replace(properties[name], functional=True)
    for name, rule in overlay.get("inverse_functional_properties", {}).items():
        if name in properties:
            only = rule.get("object_class", "") if isinstance(rule, dict) else ""
            properties[name] = _replace(properties[name], inverse_functional=not only, inverse_functional_class=only)
    classes = {row["class"]: OntologyClass(row["class"], row["parent"], row["label"], row["wikidata"])
               for row in _rows(data_dir / "classes.tsv")}
    templates: dict[str, list[ClassRule]] = {}
    for row in _rows(data_dir / "templates.tsv"):
        templates.setdefault(row["template"], []).append(
            ClassRule(row["class"], row["condition_parameter"], row["operator"], row["value"]))
    for template, cls in overlay.get("template_classes", {}).items():
        templates[template] = [ClassRule(cls)]
    parameters = {(row["template"], row["parameter"]): row["property"] for row in _rows(data_dir / "parameters.tsv")}
    for row in overlay.get("parameters", []):
        parameters[(row.get("template", ANY_TEMPLATE), row["parameter"])] = row["property"]
    return Ontology(properties, classes, templates, parameters, overlay, _rows(data_dir / "non_facts.tsv"),
                    _rows(data_dir / "object_ranges.tsv"))


def _replace(prop: Property, **changes) -> Property:
    return Property(**{**prop.__dict__, **changes})
