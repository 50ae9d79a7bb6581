"""Search-environment records: the cleaned, chunked pages the local search index serves."""

from __future__ import annotations

from schemas.base import Record


class IndexedPage(Record):
    """One kept article as the agent sees it: cleaned text split into numbered chunks.

    `aliases` are the redirect titles that lead here (from Entity.aliases); `open_page` follows them.
    """

    title: str
    page_id: int
    revision_id: int
    aliases: list[str] = []
    chunks: list[str]
