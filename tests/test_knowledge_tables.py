"""The knowledge tables of data/ parse, and each is the one its readers use."""

from knowledge.lexicon import PAST_TENSE, TIDY, stop_words
from knowledge.ontology import DATA_DIR, _rows, load_ontology
from knowledge.templates import separator_templates, template_vocabulary
from schemas.config import WalkConfig
from wikitext.markup import render_templates
from wikitext.plain_text import clean_wikitext


def test_every_non_fact_row_parses_and_walks_skip_the_table_unless_configured():
    reasons = set(load_ontology().plumbing_tokens.values()) | {"names_page", "plumbing"}
    for row in _rows(DATA_DIR / "non_facts.tsv"):
        assert row["name"] and row["extraction"] in reasons | {"-"} and row["walks"] in ("skip", "-"), row
    ontology = load_ontology()
    assert "links_to" in ontology.non_fact_relations and ontology.plumbing_reason("birth_name") == "names_page"
    assert WalkConfig().exclude_relations is None  # graph.csr.excluded_relations reads the table then


def test_the_separator_table_serves_both_readers_with_their_own_column():
    assert separator_templates("index")["ndash"] == " – " and separator_templates("lead")["ndash"] == "–"
    assert "pi" not in separator_templates("index") and "\\" not in separator_templates("lead")
    assert "1990 – 1995" in clean_wikitext("From 1990{{ndash}}1995.")
    assert render_templates("1990{{ndash}}1995") == "1990–1995"


def test_the_template_vocabulary_and_the_phrasing_rules_load():
    vocabulary = template_vocabulary()
    assert "plainlist" in vocabulary.lists and vocabulary.decorative_flags <= vocabulary.flags
    assert vocabulary.end_reasons["div"] == "divorced"
    assert all(len(pair) == 2 for pair in PAST_TENSE + TIDY)


def test_one_stop_word_list_with_named_extensions():
    base = stop_words()
    for extension in ("question_words", "question_frames", "search", "agent_text"):
        assert stop_words(extension) > base
    assert "whose" in stop_words("question_words") and "whose" not in stop_words("agent_text")
