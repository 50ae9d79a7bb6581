"""The scale benchmark's synthetic dump: the shape it promises (infoboxes on most pages, heavy-tailed
in-degree, redirects with chains) and a multistream file the reader reads back whole."""

from __future__ import annotations

import re
from collections import Counter

from bench.scale import synthetic_dump, synthetic_pages
from extract.sources import iter_dump_pages
from extract.sources.dump import dump_work_units

LINK = re.compile(r"\[\[(Entity \d+)\]\]")


def test_synthetic_pages_have_the_promised_shape():
    pages = list(synthetic_pages(500, seed=3))
    articles = [p for p in pages if not p.text.startswith("#REDIRECT")]
    redirects = {p.title: p.text for p in pages if p.text.startswith("#REDIRECT")}
    assert len(articles) == 500 and len(redirects) == 100
    assert 0.65 < sum("{{Infobox" in p.text for p in articles) / len(articles) < 0.85
    assert any("[[Alias" in text for text in redirects.values())  # chained redirects
    in_degree = Counter(link for p in articles for link in LINK.findall(p.text))
    counts = sorted(in_degree.values(), reverse=True)
    assert counts[0] > 20 * counts[len(counts) // 2]  # a heavy tail: the top page far above the median


def test_synthetic_dump_reads_back_as_multistream_units(tmp_path):
    dump, index = synthetic_dump(250, tmp_path, seed=1)
    records = list(iter_dump_pages(dump))
    assert len(records) == 300 and all(r.title for r in records)
    assert len(dump_work_units(dump, index, streams_per_unit=1)) == 3
