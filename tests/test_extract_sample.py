"""Stage 1 on the shipped sample, through Beam with the multistream index: the hand-checked facts of
tests/data/sample_facts.json hold exactly, absent facts are absent, exclusions, redirects and the window."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from extract.stage import run_extract
from extract.tables import TABLES
from ground.io import read_records
from schemas.config import ExtractConfig
from wikitext.infobox import normalize_parameter

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream.xml.bz2"
INDEX = ROOT / "data" / "sample" / "enwiki-sample-pages-articles-multistream-index.txt.bz2"
EXPECTED = json.loads((ROOT / "tests" / "data" / "sample_facts.json").read_text())
SKIP_PARAMETERS = ("image", "caption", "map", "coordinates", "logo", "signature", "alt")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph")
    # Two streams per work unit: the index splits the sample into several units read in parallel.
    manifest = run_extract(ExtractConfig(dump=str(DUMP), index=str(INDEX), streams_per_unit=2), out)
    entities = {e.title: e for e in read_records(TABLES["entities"], out / "entities")}
    relations = list(read_records(TABLES["relations"], out / "relations"))
    skipped = {s.title: s for s in read_records(TABLES["skipped"], out / "skipped")}
    return manifest, entities, relations, skipped


def parameter(relation) -> str:
    return normalize_parameter(relation.provenance.parameter)[0] if relation.provenance.parameter else ""


def matches(fact: dict, relation) -> bool:
    """A relation row matches a fact's head, property (`relation`), raw parameter and object, as given."""
    if relation.head != fact["head"] or relation.relation != fact.get("relation", relation.relation):
        return False
    if "parameter" in fact and parameter(relation) != fact["parameter"]:
        return False
    if "tail" in fact and (relation.tail, relation.value_type) != (fact["tail"], "entity"):
        return False
    if "value" in fact and (relation.value, relation.value_type) != (fact["value"], fact["value_type"]):
        return False
    if "unit" in fact and relation.unit != fact["unit"]:
        return False
    if "group_index" in fact and relation.group_index != fact["group_index"]:
        return False
    if "qualifiers" in fact and {q.key: q.value for q in relation.qualifiers} != fact["qualifiers"]:
        return False
    return True


def test_hand_checked_facts(sample):
    _, _, relations, _ = sample
    assert len(EXPECTED["facts"]) >= 30
    missing = [fact for fact in EXPECTED["facts"] if not any(matches(fact, r) for r in relations)]
    assert missing == []
    for fact in EXPECTED["facts"]:
        found = next(r for r in relations if matches(fact, r))
        assert found.provenance.page_title == fact["head"] and found.provenance.revision_id > 0
        if fact["relation"] == "links_to":
            assert found.source == "link" and found.evidence
            continue
        assert found.source == "infobox" and found.provenance.parameter and found.mapped
        assert found.provenance.infobox.startswith("infobox")
        if found.value_type == "date" and len(found.value) == 10:
            assert found.date == dt.date.fromisoformat(found.value)


def test_absent_facts_and_skipped_parameters(sample):
    _, _, relations, _ = sample
    for fact in EXPECTED["absent"]:
        wanted = {k: v for k, v in fact.items() if k != "why"}
        assert not [r for r in relations if matches(wanted, r)], fact
    # by the words of a parameter's name: "nationalteam" holds "alt" but is no alt text
    assert not [r for r in relations if r.source == "infobox" and set(parameter(r).split("_")) & set(SKIP_PARAMETERS)]


def test_exclusions_redirects_and_skips(sample):
    manifest, entities, relations, skipped = sample
    for title in EXPECTED["excluded"]:
        assert title not in entities and title in skipped, title
    for title, reason in EXPECTED["skipped"].items():
        assert skipped[title].reason == reason
    for alias, target in EXPECTED["redirects"].items():
        assert alias in entities[target].aliases, (alias, target)
    heads = {r.head for r in relations} | {r.tail for r in relations if r.tail}
    assert not heads & set(EXPECTED["redirects"])  # every link went through the redirect table
    counts = manifest.counts
    assert counts["pages_in"] == counts["kept"] + counts["skipped"]
    assert counts["kept"] == len(entities) == len(EXPECTED["entity_types"])


def test_window_and_types(sample):
    manifest, entities, _, _ = sample
    assert manifest.as_of == dt.datetime.fromisoformat(EXPECTED["as_of"].replace("Z", "+00:00"))
    assert manifest.window_days == EXPECTED["window_days"]
    assert sorted(t for t, e in entities.items() if e.is_head) == sorted(EXPECTED["in_window"])
    assert not [t for t in EXPECTED["out_of_window"] if entities[t].is_head]
    assert {t: e.type for t, e in entities.items()} == EXPECTED["entity_types"]
    assert manifest.counts["head_entities"] == len(EXPECTED["in_window"])
    assert all(e.description and "[[" not in e.description and "{{" not in e.description
               for e in entities.values())


def test_lead_links_carry_their_sentence(sample):
    _, _, relations, _ = sample
    links = [r for r in relations if r.source == "link"]
    assert links and all(r.relation == "links_to" and r.tail and r.evidence for r in links)
    assert all(r.tail != r.head for r in links)
    nolan = [r for r in links if r.head == "Inception" and r.tail == "Christopher Nolan"]
    assert nolan and "Christopher Nolan" in nolan[0].evidence
