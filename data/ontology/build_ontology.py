"""Build hopsmith's relation ontology tables from DBpedia's English mappings and ontology.

Reads (never at run time, only here) `../shared/dbpedia/Mapping_en.xml.bz2` and `ontology.xml.bz2`, both
MediaWiki exports of the DBpedia mappings wiki (see that folder's README), and writes into this folder:

  classes.tsv     class, parent (rdfs:subClassOf; one named in another letter case resolved to its class),
                  English label, Wikidata id
  properties.tsv  property, kind (object | datatype), English label, domain, range, Wikidata id, functional
                  (owl:FunctionalProperty: one value per subject), inverse_functional
                  (owl:InverseFunctionalProperty: one value picks out its subject; the ontology marks none at
                  the source commit, so the hand-kept overlay's `inverse_functional_properties` say which)
  templates.tsv   infobox template (normalised name; stub templates left out) -> class; rows with a condition (ConditionalMapping)
                  give the class when `parameter operator value` holds, tried in order, the plain row last
  parameters.tsv  template, parameter (lower case, underscores; `spouse2` and `subdivision_name1` keep their
                  number, extraction tries them before the bare name) -> property; template `*` rows give a
                  parameter's property in any template: the property most templates map it to, when at least
                  3 templates map it and two thirds of them agree; a template's row that says what the `*` row says is
                  left out
A parameter a template maps to several properties keeps its first top-level mapping (`birth_date` ->
`birthDate`, not `birthYear`); mappings inside an IntermediateNodeMapping are used only where the template
has no top-level one. Template redirects of the mappings wiki map to their target's mappings. The output is
sorted and deterministic: rebuilding from the same inputs gives the same bytes.

Run: `.venv/bin/python data/ontology/build_ontology.py [--dbpedia ../shared/dbpedia]`.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections import Counter, defaultdict
from pathlib import Path

import mwparserfromhell

from extract.sources.dump import iter_dump_pages
from knowledge.ontology import parameter_key
from wikitext.infobox import is_box_name
from wikitext.markup import normalize_template_name

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[2] / "shared" / "dbpedia"
_REDIRECT = re.compile(r"#REDIRECT\s*\[\[\s*Mapping en:([^\]|]+)", re.IGNORECASE)
_FUNCTIONAL = re.compile(r"(?<!Inverse)FunctionalProperty")
_WIKIDATA = re.compile(r"wikidata:(Q\d+|P\d+)")
_VALUE_TEMPLATES = ("PropertyMapping", "DateIntervalMapping")
MIN_TEMPLATES_FOR_ANY = 3


def _param(template, name: str) -> str:
    return template.get(name).value.strip_code().strip() if template.has(name) else ""


def _local(name: str) -> str:
    """`dbo:birthPlace` -> `birthPlace`; other vocabularies (`foaf:name`) keep their prefix."""
    return name.removeprefix("dbo:").strip()


def _label(template) -> str:
    if template.has("rdfs:label@en"):
        return _param(template, "rdfs:label@en")
    if not template.has("labels"):
        return ""
    for label in template.get("labels").value.filter_templates(recursive=False):
        positional = [p.value.strip_code().strip() for p in label.params if not p.showkey]
        if len(positional) >= 2 and positional[0] == "en":
            return positional[1]
    return ""


def _first(text: str) -> str:
    """The first name of a comma-separated list (`rdfs:subClassOf = Person, schema:Person`)."""
    return _local(text.split(",")[0]) if text else ""


def read_ontology(path: Path) -> tuple[list[tuple], list[tuple]]:
    classes, properties = [], []
    for page in iter_dump_pages(str(path)):
        title = getattr(page, "title", "")
        if not title.startswith(("OntologyClass:", "OntologyProperty:")):
            continue
        code = mwparserfromhell.parse(page.text)
        templates = code.filter_templates(recursive=False)
        if not templates:
            continue
        box = templates[0]
        kind = str(box.name).strip()
        name = title.split(":", 1)[1]
        wikidata = ",".join(_WIKIDATA.findall(
            _param(box, "owl:equivalentClass") + " " + _param(box, "owl:equivalentProperty")))
        if kind == "Class":
            classes.append((name, _first(_param(box, "rdfs:subClassOf")), _label(box), wikidata))
        elif kind in ("ObjectProperty", "DatatypeProperty"):
            name = name[:1].lower() + name[1:]
            types = _param(box, "rdf:type")
            functional = "1" if _FUNCTIONAL.search(types) else "0"
            inverse_functional = "1" if "InverseFunctionalProperty" in types else "0"
            properties.append((name, "object" if kind == "ObjectProperty" else "datatype", _label(box),
                               _first(_param(box, "rdfs:domain")), _first(_param(box, "rdfs:range")),
                               wikidata, functional, inverse_functional))
    return sorted(_resolve_parents(classes)), sorted(properties)


def _resolve_parents(classes: list[tuple]) -> list[tuple]:
    """A superclass named in another letter case (`Novel` under `book`, `Hospital` under `building`) is the
    class of that name, so that the hierarchy does not stop there (a Novel is a Book, a WrittenWork)."""
    names = {row[0].lower(): row[0] for row in classes}
    return [(name, names.get(parent.lower(), parent), *rest) for name, parent, *rest in classes]


def _value_mappings(mappings, top_level: bool, found: list[tuple[str, str, bool]]) -> None:
    for template in mappings.filter_templates(recursive=False):
        kind = str(template.name).strip()
        if kind == "PropertyMapping":
            found.append((_param(template, "templateProperty"), _local(_param(template, "ontologyProperty")),
                          top_level))
        elif kind == "IntermediateNodeMapping" and template.has("mappings"):
            _value_mappings(template.get("mappings").value, False, found)


def _template_mapping(template, found: list[tuple[str, str, bool]]) -> str:
    """The class of a TemplateMapping; its property mappings are appended to `found`."""
    if template.has("mappings"):
        _value_mappings(template.get("mappings").value, True, found)
    return _local(_param(template, "mapToClass"))


def read_mappings(path: Path) -> tuple[list[tuple], list[tuple]]:
    templates: list[tuple] = []
    by_template: dict[str, list[tuple[str, str, bool]]] = {}
    redirects: dict[str, str] = {}
    for page in iter_dump_pages(str(path)):
        title = getattr(page, "title", "")
        if not title.startswith("Mapping en:"):
            continue
        name = normalize_template_name(title.split(":", 1)[1])
        if not is_box_name(name):  # stub templates and navigation boxes: extraction reads infoboxes only
            continue
        redirect = _REDIRECT.match(page.text.strip())
        if redirect:
            redirects[name] = normalize_template_name(redirect.group(1))
            continue
        found: list[tuple[str, str, bool]] = []
        for box in mwparserfromhell.parse(page.text).filter_templates(recursive=False):
            kind = str(box.name).strip()
            if kind == "TemplateMapping":
                templates.append((name, _template_mapping(box, found), "", "", ""))
            elif kind == "ConditionalMapping" and box.has("cases"):
                for case in box.get("cases").value.filter_templates(recursive=False):
                    inner = case.get("mapping").value.filter_templates(recursive=False) if case.has("mapping") else []
                    if not inner:
                        continue
                    cls = _template_mapping(inner[0], found)
                    condition = (parameter_key(_param(case, "templateProperty")),
                                 _param(case, "operator"), _param(case, "value"))
                    templates.append((name, cls, *condition) if condition[1] else (name, cls, "", "", ""))
                if box.has("defaultMappings"):
                    _value_mappings(box.get("defaultMappings").value, True, found)
        by_template[name] = found
    for alias, target in redirects.items():
        if target in by_template and alias not in by_template:
            by_template[alias] = by_template[target]
            templates.extend((alias, *row[1:]) for row in templates if row[0] == target)
    return templates, _parameter_rows(by_template)


def _parameter_rows(by_template: dict[str, list[tuple[str, str, bool]]]) -> list[tuple]:
    rows: dict[tuple[str, str], str] = {}
    for template, found in by_template.items():
        for want_top in (True, False):
            for raw, prop, top_level in found:
                parameter = parameter_key(raw)
                usable = re.search("[a-z]", parameter) and prop
                if top_level == want_top and usable and (template, parameter) not in rows:
                    rows[(template, parameter)] = prop
    votes: dict[str, Counter] = defaultdict(Counter)
    for (_, parameter), prop in rows.items():
        votes[parameter][prop] += 1
    for parameter, counter in votes.items():
        prop, count = counter.most_common(1)[0]
        total = sum(counter.values())
        if total >= MIN_TEMPLATES_FOR_ANY and count * 3 >= total * 2:
            rows[("*", parameter)] = prop
    return sorted((template, parameter, prop) for (template, parameter), prop in rows.items()
                  if template == "*" or rows.get(("*", parameter)) != prop)


def _write(path: Path, header: tuple[str, ...], rows: list[tuple]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def build(source: Path, out: Path) -> dict[str, int]:
    classes, properties = read_ontology(source / "ontology.xml.bz2")
    templates, parameters = read_mappings(source / "Mapping_en.xml.bz2")
    _write(out / "classes.tsv", ("class", "parent", "label", "wikidata"), classes)
    _write(out / "properties.tsv", ("property", "kind", "label", "domain", "range", "wikidata", "functional",
                                                "inverse_functional"),
           properties)
    templates = list(dict.fromkeys(templates))  # order kept: conditions are tried in order
    _write(out / "templates.tsv", ("template", "class", "condition_parameter", "operator", "value"), templates)
    _write(out / "parameters.tsv", ("template", "parameter", "property"), parameters)
    return {"classes": len(classes), "properties": len(properties), "templates": len({t[0] for t in templates}),
            "parameters": len(parameters)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dbpedia", type=Path, default=DEFAULT_SOURCE, help="folder with the DBpedia files")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    print(build(args.dbpedia, args.out))


if __name__ == "__main__":
    main()
