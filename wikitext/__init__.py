"""Wikitext: markup (templates, links, separators), infobox values, and plain text for search."""
