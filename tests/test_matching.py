"""Answer matching shared by every stage."""

from synth.matching import exact_match, match_answer, normalize_answer, token_f1


def test_normalisation_ignores_case_accents_articles_and_punctuation():
    assert normalize_answer("The Río Grande!") == "rio grande"
    assert normalize_answer(r"\boxed{Christopher Nolan}") == "christopher nolan"
    assert normalize_answer("8,799,800") == normalize_answer("8799800") == "8799800"
    assert normalize_answer("1,5") == "1 5"


def test_exact_match_uses_aliases():
    assert exact_match("Nolan, Christopher", ["Nolan Christopher"])
    assert not exact_match("", ["x"])
    outcome = match_answer("UK", "United Kingdom", aliases=["UK", "Britain"])
    assert outcome.correct and outcome.exact_match


def test_f1_partial_credit():
    assert token_f1("river thames london", "river thames") == 0.8
    assert token_f1("paris", "london") == 0.0
    outcome = match_answer("the River Thames in England", "River Thames")
    assert not outcome.exact_match and not outcome.correct and 0 < outcome.f1 < 0.8
    assert match_answer(None, "x").f1 == 0.0
