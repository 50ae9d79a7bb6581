"""A held-out corpus of real English Wikipedia pages that no independent reading of the questions used: the
raw wikitext files of ../shared/wikisamples/wikitext (given the titles their file names spell, one revision
date, since they carry none) and the article pages of the English exports other than the two every reading
read, written as one multistream dump. The README's held-out figures come from it; it lives with the tests
because its input is the shared folder, read when present and never copied into the repository."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from bench.extract_real import english_exports
from extract.sources import iter_dump_pages
from extract.sources.dump_writer import write_multistream
from schemas.wiki import Page

WIKISAMPLES = Path(__file__).resolve().parents[2] / "shared" / "wikisamples"
READ_BEFORE = {"dbpedia__minidump-en.xml.bz2", "infoboxer__vcr-cassettes-enwiki.xml.bz2"}
# Not articles of English Wikipedia as a reader sees them: list pages, a redirect, an infobox fragment and an
# old copy of another file in the same folder.
NOT_ARTICLES = {"redirect.txt", "list.txt", "list_of_countries.wiki", "large_infobox.txt", "south_america_new.wiki"}
REVISION = dt.datetime(2020, 6, 1, tzinfo=dt.UTC)
WINDOW_DAYS = 36_500  # every page a head entity: the pages were saved over two decades
_GERMAN = re.compile(r"\b(der|die|und|das|ist|ein|eine|von|mit)\b")
MAX_GERMAN_WORDS = 30  # in a page's first 3,000 characters: a dewiki page among the English ones


def _title(path: Path, text: str) -> str:
    """The page title a file name spells ("Bradley-(community),-Lincoln-County,-Wisconsin"), or for a name in
    lower case ("toronto_star") the page's first bold name, which is its title as the lead writes it."""
    name = path.stem.replace("_", " ")
    if "-" in name and " " not in name:
        name = name.replace("-", " ")
    bold = re.search(r"'''([^'\n]{2,80})'''", text[:5000])
    if name[:1].islower() and bold:
        return bold.group(1).strip()
    return name[:1].upper() + name[1:]


def heldout_pages(shared: Path = WIKISAMPLES) -> list[Page]:
    """Every held-out page once by title, numbered from 1 in the order read."""
    pages: dict[str, Page] = {}
    for export in english_exports(shared / "xml"):
        if export.name not in READ_BEFORE:
            for page in iter_dump_pages(str(export)):
                if isinstance(page, Page) and page.ns == 0:
                    pages.setdefault(page.title, page)
    for path in sorted(p for folder in sorted((shared / "wikitext").iterdir()) for p in folder.iterdir()):
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.name in NOT_ARTICLES or len(_GERMAN.findall(text[:3000])) > MAX_GERMAN_WORDS:
            continue
        title = _title(path, text)
        pages.setdefault(title, Page(page_id=1, title=title, ns=0, revision_id=1, timestamp=REVISION, text=text,
                                     source=str(path.relative_to(shared))))
    return [page.model_copy(update={"page_id": number, "revision_id": number})
            for number, page in enumerate(pages.values(), start=1)]


def write_heldout_dump(folder: Path) -> tuple[Path, Path]:
    """The held-out pages as a multistream dump and its index in `folder`."""
    dump, index = folder / "heldout-pages-articles-multistream.xml.bz2", folder / "heldout-index.txt.bz2"
    write_multistream(heldout_pages(), dump, index)
    return dump, index
