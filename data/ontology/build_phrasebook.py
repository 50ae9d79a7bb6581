"""Draft the phrasebook from DBpedia's English property labels; a reviewer keeps what reads right.

Writes `phrasebook_draft.tsv` beside it: one row per ontology property that an infobox mapping can produce
(`parameters.tsv`), with a draft noun, plural, answer class (from the property's range), a forward and an
inverse clause, and `problems`: why the draft likely reads wrong ("verb label": "merged with" is no noun;
"preposition end"; "abbreviation"; ...). A property whose entry in `phrasebook.toml` is marked
`reviewed = true` shows `reviewed` in its row instead of a draft of its own; questions ask only those
(knowledge/phrasebook.py). Reviewing a draft row means copying it into phrasebook.toml, fixing what its
problems column says, and setting `reviewed = true`.

Run: `.venv/bin/python data/ontology/build_phrasebook.py` (reads only this folder; deterministic).
"""

from __future__ import annotations

import csv
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from knowledge.ontology import load_ontology  # noqa: E402

PREPOSITIONS = ("of", "by", "with", "to", "from", "in", "into", "at", "for", "on", "as")
VERB_ENDINGS = ("ed", "ing")
IRREGULAR_PLURALS = {"child": "children", "person": "people", "headquarters": "headquarters", "series": "series",
                     "species": "species", "man": "men", "woman": "women", "alumnus": "alumni"}
CLASS_OF_RANGE = (("Person", "person"), ("Place", "place"), ("Location", "place"))
DATE_RANGES = ("xsd:date", "xsd:gYear", "xsd:gYearMonth", "xsd:dateTime")
TEXT_RANGES = ("xsd:string", "rdf:langString", "xsd:anyURI", "xsd:boolean", "")


def plural(noun: str) -> str:
    """"genre" -> "genres", "date of birth" -> "dates of birth", "child" -> "children"."""
    head, sep, tail = noun.partition(" of ")
    words = head.split(" ")
    last = words[-1]
    if last in IRREGULAR_PLURALS:
        last = IRREGULAR_PLURALS[last]
    elif last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    elif last.endswith(("s", "sh", "ch", "x", "z")):
        last += "es"
    else:
        last += "s"
    return " ".join([*words[:-1], last]) + sep + tail


def answer_class(prop) -> str:
    """person / place / date / number / thing, from the property's range."""
    ontology = load_ontology()
    if prop.range in DATE_RANGES:
        return "date"
    if not prop.is_object:
        return "thing" if prop.range in TEXT_RANGES else "number"  # xsd numbers and DBpedia's unit datatypes
    for ancestor, name in CLASS_OF_RANGE:
        if ontology.find_class(prop.range) and ontology.is_a(ontology.find_class(prop.range), ancestor):
            return name
    return "thing"


def problems(label: str) -> list[str]:
    words = label.split()
    found = []
    if not words:
        return ["no label"]
    if words[-1] in PREPOSITIONS:
        found.append("preposition end")
    if words[0].endswith(VERB_ENDINGS) and words[0] not in ("building", "wedding", "heading", "ceiling"):
        found.append("verb label")
    if any(w.isupper() and len(w) > 1 for w in words) or "(" in label:
        found.append("abbreviation")
    if any(w in ("number", "total", "start", "end", "year", "date") for w in words):
        found.append("qualifier or count word")
    return found


def draft_row(prop) -> dict[str, str]:
    noun = prop.label.lower()
    return {"property": prop.name, "label": prop.label, "status": "draft", "noun": noun, "plural": plural(noun),
            "answer": answer_class(prop), "forward": f"The {noun} of {{s}} is {{o}}.",
            "inverse": f"{{o}} is the {noun} of {{s}}.", "problems": "; ".join(problems(noun))}


def main() -> None:
    ontology = load_ontology()
    relations = tomllib.loads((HERE / "phrasebook.toml").read_text(encoding="utf-8"))["relations"]
    reviewed = {name for name, entry in relations.items() if entry.get("reviewed")}
    with (HERE / "parameters.tsv").open(encoding="utf-8") as handle:
        mapped = sorted({row["property"] for row in csv.DictReader(handle, delimiter="\t")} & set(ontology.properties))
    fields = ["property", "label", "status", "noun", "plural", "answer", "forward", "inverse", "problems"]
    with (HERE / "phrasebook_draft.tsv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fields, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for name in mapped:
            row = draft_row(ontology.properties[name])
            if name in reviewed:
                row = {**dict.fromkeys(fields, ""), "property": name, "label": row["label"], "status": "reviewed"}
            writer.writerow(row)


if __name__ == "__main__":
    main()
