"""docs/QUESTION_REVIEW.md (issue 25's reading of 40 questions) stays consistent with itself: its table parses,
each row's keep verdict is the four criteria together, every "no" carries a reason naming its criterion, the
stated keepable shares equal a recount of the rows, and each failure pattern's counts and rows agree with the
table. The verdicts themselves are a reader's judgement; this guards the figures quoted from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REVIEW = Path(__file__).resolve().parents[1] / "docs" / "QUESTION_REVIEW.md"
CRITERIA = ("a", "b", "c", "d")
VERDICTS = {"yes", "no"}


def _cells(line: str) -> list[str]:
    """A markdown table row's cells (`\\|` inside a cell is text, not a separator)."""
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


@pytest.fixture(scope="module")
def review() -> tuple[str, dict[str, dict[str, str]]]:
    text = REVIEW.read_text(encoding="utf-8")
    header = "| # | source (start → relations; run) | id | question | gold answer | a | b | c | d | keep | reason for each no |"
    assert header in text
    rows = {}
    for line in text.splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if cells and re.fullmatch(r"[RS]\d+", cells[0]):
            assert len(cells) == 11, line
            number, _, _, question, answer, *verdicts, keep, reason = cells
            rows[number] = dict(zip(CRITERIA, verdicts, strict=True), keep=keep, reason=reason, question=question, answer=answer)
    return text, rows


def test_rows_are_numbered_and_complete(review):
    _, rows = review
    assert 0 < len(rows) <= 40
    for kind in "RS":
        numbers = sorted(int(n[1:]) for n in rows if n[0] == kind)
        assert numbers == list(range(1, len(numbers) + 1)), kind
    for number, row in rows.items():
        assert row["question"] and row["answer"], number
        assert {row[c] for c in CRITERIA} | {row["keep"]} <= VERDICTS, number


def test_keep_is_all_four_and_every_no_is_explained(review):
    _, rows = review
    for number, row in rows.items():
        failed = [c for c in CRITERIA if row[c] == "no"]
        assert row["keep"] == ("no" if failed else "yes"), number
        assert (row["reason"] == "-") == (not failed), number
        for criterion in failed:
            assert re.search(rf"(^|; ){criterion}: ", row["reason"]), (number, criterion)


def test_stated_shares_equal_a_recount(review):
    text, rows = review
    stated = {kind: (int(kept), int(total), pct) for kind, kept, total, pct in re.findall(
        r"^- Keepable, (real pages|shipped sample|all): (\d+) of (\d+) \((\d+\.\d)%\)$", text, re.M)}
    assert set(stated) == {"real pages", "shipped sample", "all"}
    for kind, prefix in (("real pages", "R"), ("shipped sample", "S"), ("all", "RS")):
        group = [row for number, row in rows.items() if number[0] in prefix]
        kept = sum(row["keep"] == "yes" for row in group)
        assert stated[kind] == (kept, len(group), f"{100 * kept / len(group):.1f}"), kind


def test_failure_patterns_agree_with_the_table(review):
    text, rows = review
    section = text.split("## Failure patterns", 1)[1].split("\n## ", 1)[0]
    patterns = [_cells(line) for line in section.splitlines() if line.startswith("| ") and not line.startswith("| pattern")]
    patterns = [cells for cells in patterns if cells and not set(cells[0]) <= {"-"}]
    assert patterns
    for name, criterion, real, sample, listed in patterns:
        numbers = listed.replace(",", " ").split()
        assert all(rows[n][criterion] == "no" for n in numbers), name
        assert (int(real), int(sample)) == (sum(n[0] == "R" for n in numbers), sum(n[0] == "S" for n in numbers)), name
