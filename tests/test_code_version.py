"""The code version in every stage key covers the knowledge tables too: editing a table re-runs the stages."""

from __future__ import annotations

from ground.version import code_version, source_hash


def _tree(root):
    (root / "ground").mkdir()
    (root / "ground" / "io.py").write_text("X = 1\n")
    (root / "data" / "ontology").mkdir(parents=True)
    (root / "data" / "ontology" / "non_facts.tsv").write_text("name\textraction\twalks\nimage\tyes\tyes\n")
    (root / "data" / "sample").mkdir()
    (root / "data" / "sample" / "dump.xml").write_text("<mediawiki/>")


def test_a_table_edit_changes_the_hash_and_the_input_sample_does_not(tmp_path):
    _tree(tmp_path)
    before = source_hash(tmp_path)
    (tmp_path / "data" / "sample" / "dump.xml").write_text("<mediawiki>other</mediawiki>")
    assert source_hash(tmp_path) == before
    (tmp_path / "data" / "ontology" / "non_facts.tsv").write_text("name\textraction\twalks\n")
    after_table = source_hash(tmp_path)
    assert after_table != before
    (tmp_path / "ground" / "io.py").write_text("X = 2\n")
    assert source_hash(tmp_path) != after_table


def test_the_code_version_is_the_package_version_and_the_hash():
    version, _, digest = code_version().partition("+")
    assert version and len(digest) == 12 and int(digest, 16) >= 0
