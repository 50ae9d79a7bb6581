"""Index text keeps the separators a reader sees: infobox rows, list items, table cells, separator templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from wikitext.plain_text import clean_wikitext, split_chunks

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "wikisamples" / "wikitext" / "wtf_wikipedia"


@pytest.mark.skipif(not WIKITEXT.is_dir(), reason="../shared/wikisamples is absent")
def test_a_real_infobox_keeps_its_rows_and_items_apart_when_its_paragraph_is_cut():
    text = clean_wikitext((WIKITEXT / "julia_kristeva.txt").read_text(encoding="utf-8"))
    chunks = split_chunks(text, 400)  # the infobox alone is longer: it must be cut at row ends
    infobox_lines = [line for chunk in chunks[:3] for line in chunk.split("\n")]
    assert "Birth date: 24 June 1941" in infobox_lines
    assert "Spouse: Philippe Sollers" in infobox_lines
    assert "Nationality: French / Bulgarian" in infobox_lines  # {{\}} used to vanish: "FrenchBulgarian"
    influences = next(line for line in infobox_lines if line.startswith("Influences: "))
    assert influences.startswith("Influences: Mikhail Bakhtin, Jacques Lacan, Roland Barthes")  # hlist items
    assert all(len(chunk) <= 400 for chunk in chunks)
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())  # nothing lost or reordered


def test_list_items_table_cells_and_separator_templates_stay_separated():
    wikitext = (
        "Works.\n\n{| class=\"wikitable\"\n! Year !! Title\n|-\n| 1999 || [[Samuel Beckett|Beckett]]\n|-\n"
        "| 2001 || [[Thomas Bernhard|Bernhard]]\n|}\n\nRead:\n* [[Samuel Beckett|Beckett]]\n* Bernhard\n\n"
        "French{{\\}}Bulgarian {{•}} poet {{snd}} critic"
    )
    text = clean_wikitext(wikitext)
    assert "Year | Title\n1999 | Beckett\n2001 | Bernhard" in text
    assert "Read:\nBeckett\nBernhard" in text
    assert "French / Bulgarian • poet – critic" in text
    chunks = split_chunks(text, 30)
    assert "Beckett" in chunks[1] and "BeckettBernhard" not in "".join(chunks)
