"""The relation ontology (data/ontology, graph/ontology.py) and what extraction makes of it on real pages.

The real-page tests read ../shared/wikisamples when it exists beside the checkout and skip otherwise; the
facts below were checked by hand against the infobox text of each page.
"""

from __future__ import annotations

import datetime as dt
import filecmp
import importlib.util
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from extract.article import named_value_key
from extract.oracle import extract_records
from extract.sources.dump import iter_dump_pages
from graph.csr import build_csr
from graph.sampler import walk_graph
from knowledge.ontology import DATA_DIR, load_ontology
from knowledge.phrasebook import PHRASEBOOK
from schemas.base import to_table
from schemas.config import ExtractConfig, QuestionConfig, WalkConfig
from schemas.wiki import Entity, Page, Relation
from synth.phrasing import phrase
from synth.question_gates import path_gate, plan_gate
from synth.question_plan import EntityInfo, QuestionContext, plan_question
from synth.question_writers import write_template
from wikitext.infobox import normalize_parameter, parse_infoboxes

SHARED = Path(__file__).resolve().parents[2] / "shared"
WIKISAMPLES = SHARED / "wikisamples" / "xml"
REAL_FILES = ("infoboxer__vcr-cassettes-enwiki.xml.bz2", "dbpedia__minidump-en.xml.bz2", "wikibrain__en_test.xml.bz2")
DERIVED_TABLES = ("classes.tsv", "properties.tsv", "templates.tsv", "parameters.tsv")


# --- the tables ----------------------------------------------------------------------------------------

def test_templates_map_to_classes_with_their_ancestors():
    ontology = load_ontology()
    assert ontology.template_class("infobox person") == "Person"
    assert ontology.template_class("infobox officeholder") == "Politician"
    assert ontology.template_class("infobox actor") == "Person"  # a template redirect, from the overlay
    assert ontology.template_class("infobox christian denomination") == "ReligiousOrganisation"  # overlay
    assert ontology.template_class("infobox frobnicator") is None
    # Conditional mappings read the parameters they name.
    assert ontology.template_class("infobox musical artist", lambda p: {"background": ["group_or_band"]}.get(p, [])) == "Band"
    assert ontology.template_class("infobox musical artist", lambda p: {"background": ["solo_singer"]}.get(p, [])) == "MusicalArtist"
    assert ontology.template_class("infobox settlement", lambda p: {"settlement_type": ["City"]}.get(p, [])) == "City"
    assert ontology.ancestors("Politician")[:2] == ("Politician", "Person")
    assert ontology.is_a("SoccerClub", "Organisation") and not ontology.is_a("Film", "Person")


def test_properties_carry_label_domain_range_kind_wikidata_and_functionality():
    ontology = load_ontology()
    birth_place = ontology.properties["birthPlace"]
    assert (birth_place.label, birth_place.range, birth_place.wikidata, birth_place.is_object) == (
        "birth place", "Place", "P19", True)
    birth_date = ontology.properties["birthDate"]
    assert birth_date.functional and not birth_date.is_object and birth_date.range == "xsd:date"
    assert not ontology.properties["spouse"].functional
    assert ontology.properties["foundingDate"].functional  # the overlay's single-valued properties
    assert ontology.parameter_unit("area_total_km2") == "km2" and ontology.parameter_unit("area_total") is None
    assert ontology.label("bandMember") == "band member"


def test_inverse_functional_properties_are_reviewed_object_properties():
    # DBpedia marks no property owl:InverseFunctionalProperty (the derived column is all 0): the overlay
    # decides, one reason per property.
    ontology = load_ontology()
    overlay = tomllib.loads((DATA_DIR / "overlay.toml").read_text(encoding="utf-8"))["inverse_functional_properties"]
    assert {"capital", "largestCity", "subsequentWork", "spouse"} <= set(overlay)
    for name, rule in overlay.items():
        only = rule.get("object_class", "") if isinstance(rule, dict) else ""
        entry = ontology.properties[name]
        assert entry.is_object and entry.inverse_functional == (not only) and entry.inverse_functional_class == only
        assert only == "" or only in ontology.classes, name
        assert len((rule["reason"] if only else rule).split()) >= 5, name
    assert not ontology.properties["currency"].inverse_functional  # the euro serves many states
    marked = {p for p, e in ontology.properties.items() if e.inverse_functional or e.inverse_functional_class}
    assert marked == set(overlay)
    # A novel names its writer; a film, the notable work of many, names no one.
    assert ontology.identifies_subject("capital", None) and ontology.identifies_subject("notableWork", "Novel")
    assert not ontology.identifies_subject("notableWork", "Film") and not ontology.identifies_subject("notableWork", "")
    assert not ontology.identifies_subject("currency", "Currency") and not ontology.identifies_subject(None, None)


def test_synonyms_across_templates_collapse_onto_one_property():
    ontology = load_ontology()
    founders = {ontology.mapped_name(template, parameter, "Company")
                for template in ("infobox company", "infobox organization", "infobox frobnicator")
                for parameter in ("founder", "founders", "founded_by")}
    assert founders == {"founder"}
    births = {ontology.mapped_name("infobox person", p) for p in ("birth_place", "birthplace", "place_of_birth")}
    assert births == {"birthPlace"}
    # A numbered parameter keeps its own mapping: a settlement's subdivision_name is its country,
    # subdivision_name1 the region it lies in.
    assert ontology.mapped_name("infobox settlement", "subdivision_name", "City") == "country"
    assert ontology.mapped_name("infobox settlement", "subdivision_name", "City", group_index=1) == "subdivision"
    # A parameter mapped elsewhere is not used where its property's domain does not fit the class.
    assert ontology.mapped_name("infobox frobnicator", "birth_place", "Film") is None
    # A royal's father and mother stay apart (DBpedia maps both to `parent`, which then has two answers).
    assert [ontology.mapped_name("infobox royalty", p, "Royalty") for p in ("father", "mother")] == ["father", "mother"]
    assert [ontology.mapped_name("infobox noble", p, "Noble") for p in ("father", "mother")] == ["father", "mother"]


def test_plumbing_by_parameter_property_and_value():
    ontology = load_ontology()
    reasons = {p: ontology.plumbing_reason(p) for p in
               ("image", "image_size", "caption", "coordinates", "map_caption", "background_color", "isbn",
                "website", "name", "birth_place", "area_total_km2", "altitude")}
    assert reasons == {"image": "image", "image_size": "image_size", "caption": "caption",
                       "coordinates": "coordinates", "map_caption": "map", "background_color": "colour",
                       "isbn": "identifier", "website": "identifier", "name": "names_page", "birth_place": None,
                       "area_total_km2": None, "altitude": None}
    assert ontology.plumbing_reason("film_name", "originalName") == "names_page"
    values = {v: ontology.value_plumbing(v) for v in
              ("220 px", "Flag of Germany.svg", "#800020", "22nd", "50°27′N 30°31′E", "None", "Kyiv", "1990",
               "123456")}
    assert values == {"220 px": "image_size", "Flag of Germany.svg": "file_name", "#800020": "colour",
                      "22nd": "ordinal", "50°27′N 30°31′E": "coordinates", "None": "placeholder", "Kyiv": None,
                      "1990": None, "123456": None}
    assert ontology.range_mismatch("maximumDepth", "entity") == "range_mismatch"  # a trench is no depth
    assert ontology.range_mismatch("birthPlace", "date") == "range_mismatch"
    assert ontology.range_mismatch("birthPlace", "entity") is None and ontology.range_mismatch("motto", "entity") is None


def test_lead_sentence_and_category_types():
    ontology = load_ontology()
    assert ontology.type_from_lead("Okean Elzy is a Ukrainian rock band.") == "Band"
    assert ontology.type_from_lead("Pretoria is one of South Africa's three capital cities.") == "City"
    assert ontology.type_from_lead("The Pioneer program is a series of United States unmanned space missions.") == (
        "SpaceMission")
    assert ontology.type_from_lead("Ukrainian hip hop is a major part of the Ukrainian music scene.") is None
    assert ontology.type_from_categories(["Ukrainian rock music groups"]) == "Band"
    assert ontology.type_from_categories(["1954 births", "Living people"]) == "Person"


def test_overlay_names_only_known_classes_and_properties():
    ontology = load_ontology()
    overlay = tomllib.loads((DATA_DIR / "overlay.toml").read_text(encoding="utf-8"))
    classes = {*overlay["template_classes"].values(), *overlay["types"]["lead_nouns"].values(),
               *overlay["types"]["category_words"].values()}
    assert not classes - set(ontology.classes)
    properties = {row["property"] for row in overlay["parameters"]} | set(overlay["property_aliases"].values())
    assert not properties - set(ontology.properties)
    assert set(overlay["template_aliases"].values()) <= set(ontology.templates)
    phrasebook = tomllib.loads((DATA_DIR / "phrasebook.toml").read_text(encoding="utf-8"))
    assert not set(phrasebook["relations"]) - set(ontology.properties)


@pytest.mark.skipif(not (SHARED / "dbpedia").is_dir(), reason="../shared/dbpedia is absent")
def test_committed_tables_equal_a_fresh_build(tmp_path):
    spec = importlib.util.spec_from_file_location("build_ontology", DATA_DIR / "build_ontology.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = module.build(SHARED / "dbpedia", tmp_path)
    assert counts["classes"] > 700 and counts["properties"] > 2500 and counts["templates"] > 400
    for name in DERIVED_TABLES:
        assert filecmp.cmp(tmp_path / name, DATA_DIR / name, shallow=False), name


# --- clean values ---------------------------------------------------------------------------------------

def _page(title: str, text: str, page_id: int) -> Page:
    return Page(page_id=page_id, title=title, ns=0, revision_id=page_id, text=text,
                timestamp=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))


def test_plain_text_values_naming_a_page_or_redirect_become_edges():
    pages = [
        _page("Lusaka Works", "{{Infobox company\n| name = Lusaka Works\n| hq_location_country = Angola\n"
              "| hq_location_city = Luanda city\n| founder = Jo Bloggs\n| foundation = 1990\n}}\n"
              "'''Lusaka Works''' is a company.", 1),
        _page("Angola", "'''Angola''' is a country.", 2),
        _page("Luanda", "'''Luanda''' is a city.", 3),
        _page("Luanda city", "#REDIRECT [[Luanda]]", 4),
    ]
    result = extract_records(pages, ExtractConfig())
    facts = {(r.relation, r.value_type, r.tail or r.value) for r in result.relations if r.source == "infobox"}
    assert ("locationCountry", "entity", "Angola") in facts  # names a page
    assert ("locationCity", "entity", "Luanda") in facts  # names a redirect to a page
    assert ("founder", "string", "Jo Bloggs") in facts  # names nothing in the snapshot
    assert ("foundingDate", "date", "1990") in facts
    assert result.counts()["excluded:names_page"] == 1


def test_a_date_valued_property_never_becomes_an_edge():
    relation = Relation(head="X", relation="foundingDate", mapped=True, value="Angola", value_type="string",
                        provenance={"page_id": 1, "page_title": "X", "revision_id": 1,
                                    "timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.UTC)})
    assert named_value_key(relation) is None
    assert named_value_key(relation.model_copy(update={"relation": "country"})) == "Angola"


def test_no_question_facing_value_is_plumbing():
    text = ("{{Infobox country\n| conventional_long_name = Federal Republic of Germany\n"
            "| image_flag = Flag of Germany.svg\n| flag_s = Flag of Germany.svg\n| coa_res = 220px\n"
            "| background_color = #800020\n| order = 22nd\n| capital = [[Berlin]]\n"
            "| coordinates = {{coord|52|31|N|13|23|E}}\n| cctld = [[.de]]\n| largest_city = capital\n"
            "| languages = [[List of languages of Germany]]\n}}")
    box = parse_infoboxes(text)[0]
    assert [(f.relation, f.property, f.tail) for f in box.facts] == [("capital", "capital", "Berlin")]
    assert box.excluded == {"names_page": 1, "image": 2, "image_size": 1, "colour": 1, "ordinal": 1,
                            "coordinates": 1, "identifier": 1, "placeholder": 1, "list_page": 1}
    # A list named by its subject is a list too: no notable work is a filmography.
    box = parse_infoboxes("{{Infobox person\n| notable_works = [[Christopher Nolan filmography]]\n}}")[0]
    assert box.facts == [] and box.excluded == {"list_page": 1}


# --- real pages ------------------------------------------------------------------------------------------

# (file, head, property, raw parameter, object, head's class): each read in the page's infobox by hand.
REAL_FACTS = [
    ("dbpedia", "Angela Merkel", "birthPlace", "birth_place", "Hamburg", "Politician"),
    ("dbpedia", "Angela Merkel", "birthDate", "birth_date", "1954-07-17", "Politician"),
    ("dbpedia", "Angela Merkel", "almaMater", "alma_mater", "Leipzig University", "Politician"),
    ("dbpedia", "Angela Merkel", "predecessor", "predecessor", "Gerhard Schröder", "Politician"),
    ("dbpedia", "Angela Merkel", "party", "party", "Christian Democratic Union of Germany", "Politician"),
    ("dbpedia", "Angela Merkel", "spouse", "spouse", "Joachim Sauer", "Politician"),
    ("dbpedia", "Arthur Schopenhauer", "birthPlace", "birth_place", "Gdańsk", "Philosopher"),
    ("dbpedia", "Arthur Schopenhauer", "deathDate", "death_date", "1860-09-21", "Philosopher"),
    ("dbpedia", "Arthur Schopenhauer", "influencedBy", "influences", "Immanuel Kant", "Philosopher"),
    ("dbpedia", "Asda", "location", "location", "Leeds", "Company"),
    ("dbpedia", "Asda", "foundingDate", "foundation", "1949-02-19", "Company"),
    ("dbpedia", "IBM", "founder", "founder", "Charles Ranlett Flint", "Company"),
    ("dbpedia", "IBM", "numberOfEmployees", "num_employees", "345900", "Company"),
    ("dbpedia", "IKEA", "founder", "founder", "Ingvar Kamprad", "Company"),
    ("dbpedia", "IKEA", "foundingDate", "foundation", "1943-07-28", "Company"),
    ("dbpedia", "Samsung", "founder", "founder", "Lee Byung-chul", "Company"),
    ("dbpedia", "Berlin", "populationTotal", "population_total", "3769495", "City"),
    ("infoboxer", "Albert Einstein", "birthPlace", "birth_place", "Ulm", "Scientist"),
    ("infoboxer", "Albert Einstein", "doctoralAdvisor", "doctoral_advisor", "Alfred Kleiner", "Scientist"),
    ("infoboxer", "Albert Einstein", "award", "awards", "Nobel Prize in Physics", "Scientist"),
    ("infoboxer", "Albert Einstein", "deathPlace", "death_place", "Princeton, New Jersey", "Scientist"),
    ("infoboxer", "Argentina", "capital", "capital", "Buenos Aires", "Country"),
    ("infoboxer", "Argentina", "currency", "currency", "Argentine peso", "Country"),
    ("infoboxer", "Kharkiv", "populationTotal", "population_total", "1439036", "City"),
    ("infoboxer", "Kharkiv", "subdivision", "subdivision_name", "Kharkiv Oblast", "City"),
    ("infoboxer", "Kharkiv", "foundingDate", "established_date", "1654", "City"),
    ("infoboxer", "Okean Elzy", "hometown", "origin", "Lviv", "Band"),
    ("infoboxer", "Okean Elzy", "bandMember", "current_members", "Svyatoslav Vakarchuk", "Band"),
    ("infoboxer", "Okean Elzy", "recordLabel", "label", "EMI", "Band"),
    ("infoboxer", "Ukraine", "capital", "capital", "Kiev", "Country"),
    ("infoboxer", "Ukrainian hryvnia", "usingCountry", "using_countries", "Ukraine", "Currency"),
    ("wikibrain", "Paul Auster", "birthPlace", "birth_place", "Newark, New Jersey", "Writer"),
    ("wikibrain", "Paul Auster", "spouse", "spouse", "Siri Hustvedt", "Writer"),
    ("wikibrain", "Paul Auster", "birthDate", "birth_date", "1947-02-03", "Writer"),
    ("wikibrain", "Lockheed P-38 Lightning", "manufacturer", "manufacturer", "Lockheed Corporation", "Aircraft"),
    ("wikibrain", "Lockheed P-38 Lightning", "designer", "designer", "Kelly Johnson (engineer)", "Aircraft"),
    ("wikibrain", "Lockheed P-38 Lightning", "numberBuilt", "number_built", "10037", "Aircraft"),
    ("wikibrain", "Pierre de Coubertin", "predecessor", "predecessor", "Demetrius Vikelas", "President"),
]


@pytest.fixture(scope="module")
def real():
    present = [name for name in REAL_FILES if (WIKISAMPLES / name).is_file()]
    if not present:
        pytest.skip("../shared/wikisamples is absent")
    return {name.split("__")[0]: extract_records(iter_dump_pages(WIKISAMPLES / name), ExtractConfig())
            for name in present}


def test_hand_checked_real_facts_with_property_and_type(real):
    checked = [fact for fact in REAL_FACTS if fact[0] in real]
    assert len(checked) >= 30 or len(real) < len(REAL_FILES)
    for source, head, prop, parameter, obj, cls in checked:
        result = real[source]
        types = {e.title: e.type for e in result.entities}
        assert types[head] == cls, (head, types[head])
        found = [r for r in result.relations if r.head == head and r.relation == prop and (r.tail or r.value) == obj]
        assert found, (head, prop, obj)
        assert found[0].mapped and normalize_parameter(found[0].provenance.parameter)[0] == parameter


def test_real_entities_are_typed(real):
    entities = [e for result in real.values() for e in result.entities]
    typed = [e for e in entities if load_ontology().find_class(e.type)]
    assert len(typed) >= 0.9 * len(entities), Counter(e.type for e in entities)


def test_real_facts_hold_no_plumbing_and_count_what_they_left_out(real):
    ontology = load_ontology()
    for result in real.values():
        infobox = [r for r in result.relations if r.source == "infobox"]
        assert sum(r.mapped for r in infobox) > 0.6 * len(infobox)
        for relation in infobox:
            parameter = normalize_parameter(relation.provenance.parameter)[0]
            assert ontology.plumbing_reason(parameter, relation.relation if relation.mapped else None) is None
            if relation.value_type == "string":
                assert ontology.value_plumbing(relation.value) is None, relation
        counts = result.counts()
        assert counts.get("excluded:image", 0) > 0 and counts.get("excluded:names_page", 0) > 0


def test_walks_on_real_pages_use_mapped_relations_only(real):
    entities = [e for result in real.values() for e in result.entities]
    relations = [r for result in real.values() for r in result.relations]
    config = WalkConfig(hops=[2, 3], walks_per_start=8, require_recent_fact=False)
    graph = build_csr(to_table(Entity, entities), to_table(Relation, relations), as_of=dt.date(2022, 1, 1),
                      window_days=10_000, exclude_relations=config.exclude_relations, mapped_only=config.mapped_only)
    assert graph.build_counts["relations:unmapped"] > 0
    mapped = {r.relation for r in relations if r.mapped}
    paths, _ = walk_graph(graph, config)
    for path in paths:
        for hop in path.hops:
            assert hop.relation in mapped, hop.relation
            if hop.value_type == "string":
                assert load_ontology().value_plumbing(hop.value) is None
    assert len(paths) > 10
    # The questions of those walks name relations by their reviewed phrasebook noun, never by a raw infobox
    # parameter; a walk over a property without a reviewed entry is not asked.
    infos = {e.title: EntityInfo(e.type, e.description, e.aliases) for e in entities}
    ctx = QuestionContext(graph=graph, entities=infos, as_of=dt.date(2022, 1, 1), config=QuestionConfig())
    written = 0
    for path in paths:
        if path_gate(ctx, path) is not None:
            continue
        plan = plan_question(ctx, path)
        if plan_gate(ctx, path, plan) is not None:
            continue
        text = write_template(ctx, path, plan).text
        written += 1
        assert "_" not in text, text
        for hop in path.hops:  # phrased from the phrasebook, not from the parameter
            assert phrase(hop.relation).noun == PHRASEBOOK[hop.relation].noun
    assert written > 0
