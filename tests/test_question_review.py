"""docs/QUESTION_REVIEW.md (issue 25's readings of questions against their pages) stays consistent with itself.

The document holds six readings: the first (rows R1.., S1..), under "## Second reading" the second (rows
R2-1.., S2-1..), under "## Third reading" the third (rows R3-1.., S3-1..), under "## Fourth reading" the
fourth (R4-1.., S4-1..), under "## Fifth reading" the fifth (R5-1.., S5-1..) and under "## Sixth reading" the
sixth (R6-1.., S6-1..). For each reading on its own: its table parses, each row's keep verdict is the four
criteria together, every "no" carries a reason naming its criterion, the stated keepable shares equal a recount of
that reading's rows, and each failure pattern's counts and rows agree with that reading's table. The third, fifth
and sixth readings' per-cluster counts and the third's world-fit-against-uniqueness table are recounted from their
rows too. The verdicts themselves are a reader's judgement; this guards the figures quoted from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REVIEW = Path(__file__).resolve().parents[1] / "docs" / "QUESTION_REVIEW.md"
CRITERIA = ("a", "b", "c", "d")
VERDICTS = {"yes", "no"}
HEADER = "| # | source (start → relations; run) | id | question | gold answer | a | b | c | d | keep | reason for each no |"
# the headings that open the later readings, in the document's order
LATER = {"second": "\n## Second reading", "third": "\n## Third reading", "fourth": "\n## Fourth reading",
         "fifth": "\n## Fifth reading", "sixth": "\n## Sixth reading"}
# reading -> (row id pattern with the kind letter and the number as groups, the most rows it may hold)
READINGS = {"first": (r"([RS])(\d+)", 40), "second": (r"([RS])2-(\d+)", 80), "third": (r"([RS])3-(\d+)", 80),
            "fourth": (r"([RS])4-(\d+)", 80), "fifth": (r"([RS])5-(\d+)", 80),
            "sixth": (r"([RS])6-(\d+)", 80)}
SHARES = r"^- Keepable, (real pages|shipped sample|all): (\d+) of (\d+) \((\d+\.\d)%\)$"


def _cells(line: str) -> list[str]:
    """A markdown table row's cells (`\\|` inside a cell is text, not a separator)."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _sections() -> dict[str, str]:
    text = REVIEW.read_text(encoding="utf-8")
    assert all(text.count(heading) == 1 for heading in LATER.values()), "each later reading once"
    starts = [text.index(heading) for heading in LATER.values()]
    assert starts == sorted(starts), "the readings in order"
    bounds = [0, *starts, len(text)]
    return {name: text[begin:end] for name, begin, end in zip(["first", *LATER], bounds[:-1], bounds[1:], strict=True)}


def _rows(section: str, pattern: str) -> dict[str, dict[str, str]]:
    assert HEADER in section
    rows = {}
    for line in section.splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if cells and re.fullmatch(pattern, cells[0]):
            assert len(cells) == 11, line
            number, _, _, question, answer, *verdicts, keep, reason = cells
            assert number not in rows, number
            rows[number] = dict(zip(CRITERIA, verdicts, strict=True), keep=keep, reason=reason, question=question, answer=answer)
    return rows


@pytest.fixture(scope="module", params=sorted(READINGS))
def reading(request) -> tuple[str, str, dict[str, dict[str, str]]]:
    section = _sections()[request.param]
    pattern, _ = READINGS[request.param]
    return request.param, section, _rows(section, pattern)


def _kind(reading_name: str, number: str) -> str:
    return re.fullmatch(READINGS[reading_name][0], number).group(1)


def test_readings_do_not_share_rows():
    """Each reading's row ids match only its own pattern, so neither recount picks up the other's rows."""
    sections = _sections()
    for name, (pattern, _) in READINGS.items():
        for other in set(READINGS) - {name}:
            assert not _rows(sections[other], pattern), (name, other)


def test_rows_are_numbered_and_complete(reading):
    name, _, rows = reading
    pattern, most = READINGS[name]
    assert 0 < len(rows) <= most
    for kind in "RS":
        numbers = sorted(int(re.fullmatch(pattern, n).group(2)) for n in rows if _kind(name, n) == kind)
        assert numbers == list(range(1, len(numbers) + 1)), (name, kind)
    for number, row in rows.items():
        assert row["question"] and row["answer"], number
        assert {row[c] for c in CRITERIA} | {row["keep"]} <= VERDICTS, number


def test_keep_is_all_four_and_every_no_is_explained(reading):
    _, _, rows = reading
    for number, row in rows.items():
        failed = [c for c in CRITERIA if row[c] == "no"]
        assert row["keep"] == ("no" if failed else "yes"), number
        assert (row["reason"] == "-") == (not failed), number
        for criterion in failed:
            assert re.search(rf"(^|; ){criterion}: ", row["reason"]), (number, criterion)
        for criterion in set(CRITERIA) - set(failed):
            assert not re.search(rf"(^|; ){criterion}: ", row["reason"]), (number, criterion, "reason for a yes")


def test_stated_shares_equal_a_recount(reading):
    name, section, rows = reading
    found = re.findall(SHARES, section, re.M)
    stated = {kind: (int(kept), int(total), pct) for kind, kept, total, pct in found}
    assert len(found) == 3 and set(stated) == {"real pages", "shipped sample", "all"}, name
    for kind, kinds in (("real pages", "R"), ("shipped sample", "S"), ("all", "RS")):
        group = [row for number, row in rows.items() if _kind(name, number) in kinds]
        kept = sum(row["keep"] == "yes" for row in group)
        assert stated[kind] == (kept, len(group), f"{100 * kept / len(group):.1f}"), (name, kind)


def test_failure_patterns_agree_with_the_table(reading):
    name, section, rows = reading
    part = section.split("## Failure patterns" if name == "first" else "### Failure patterns", 1)[1]
    part = re.split(r"\n##+ ", part, maxsplit=1)[0]
    patterns = [_cells(line) for line in part.splitlines() if line.startswith("| ") and not line.startswith("| pattern")]
    patterns = [cells for cells in patterns if cells and not set(cells[0]) <= {"-"}]
    assert patterns, name
    for pattern_name, criterion, real, sample, listed in patterns:
        numbers = listed.replace(",", " ").split()
        assert numbers and len(set(numbers)) == len(numbers), pattern_name
        assert all(rows[n][criterion] == "no" for n in numbers), pattern_name
        assert (int(real), int(sample)) == (sum(_kind(name, n) == "R" for n in numbers),
                                            sum(_kind(name, n) == "S" for n in numbers)), pattern_name


def test_second_reading_covers_forty_sample_questions_and_names_its_commit():
    section = _sections()["second"]
    rows = _rows(section, READINGS["second"][0])
    assert sum(_kind("second", n) == "S" for n in rows) == 40
    assert re.match(r"\n## Second reading \(main at [0-9a-f]{7,40}\)\n", section)


@pytest.mark.parametrize("name", ["third", "fourth", "fifth", "sixth"])
def test_later_readings_cover_forty_sample_questions_and_name_their_commit(name):
    section = _sections()[name]
    rows = _rows(section, READINGS[name][0])
    assert sum(_kind(name, n) == "S" for n in rows) == 40
    assert re.match(rf"{LATER[name]} \(main at [0-9a-f]{{7,40}}\)\n", section)


def _table(section: str, heading: str, first_column: str) -> list[list[str]]:
    """The body rows of the markdown table whose header row starts with `first_column`, under `heading`."""
    part = re.split(r"\n##+ ", section.split(heading, 1)[1], maxsplit=1)[0]
    lines = [line for line in part.splitlines() if line.startswith("| ")]
    assert lines and _cells(lines[0])[0] == first_column, heading
    return [_cells(line) for line in lines[1:] if not set(_cells(line)[0]) <= {"-"}]


def _sample_rows(name: str) -> list[tuple[str, float, dict[str, str]]]:
    """A reading's sample rows as (cluster: the start page's source file number, world_fits, row)."""
    section = _sections()[name]
    rows = _rows(section, READINGS[name][0])
    samples = []
    for line in section.splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if cells and cells[0] in rows and _kind(name, cells[0]) == "S":
            match = re.fullmatch(r"sample (\d\d)_\w+: .+; world_fits (\d+(?:\.\d+)?)", cells[1])
            assert match, cells[1]
            samples.append((match.group(1), float(match.group(2)), rows[cells[0]]))
    return samples


@pytest.mark.parametrize("name", ["third", "fifth", "sixth"])
def test_cluster_counts_equal_a_recount(name):
    clusters = {"film/original (01-07)": {f"{i:02d}" for i in range(1, 8)}, "music (08)": {"08"},
                "architecture (09)": {"09"}, "sport (10)": {"10"}, "science (11)": {"11"}}
    table = _table(_sections()[name], "By cluster", "cluster")
    assert [cells[0] for cells in table] == list(clusters)
    samples = _sample_rows(name)
    assert {cluster for cluster, _, _ in samples} <= set().union(*clusters.values())
    for cluster_name, questions, keepable in table:
        group = [row for cluster, _, row in samples if cluster in clusters[cluster_name]]
        assert (int(questions), int(keepable)) == (len(group), sum(row["keep"] == "yes" for row in group)), cluster_name


def test_third_reading_world_fits_table_equals_a_recount():
    table = _table(_sections()["third"], "### World-fit estimate", "world_fits estimate")
    stated = {cells[0]: (int(cells[1]), int(cells[2])) for cells in table}
    assert set(stated) == {"<= 1.5", "> 1.5"}
    for band, within in (("<= 1.5", lambda fits: fits <= 1.5), ("> 1.5", lambda fits: fits > 1.5)):
        group = [row for _, fits, row in _sample_rows("third") if within(fits)]
        assert stated[band] == (sum(row["b"] == "yes" for row in group), sum(row["b"] == "no" for row in group)), band
