"""Wikitext to the plain text an agent reads: the cleaning, chunking and sentence splitting of the index.

Cleaning walks mwparserfromhell's node tree: references, comments, files and categories are dropped, link
text is kept, and the templates that carry facts are rendered as text instead of being dropped (infoboxes
as `Parameter: value` lines, date and marriage templates, list templates, convert, flags, lang). Every
other template is dropped, like `strip_code` does. Dates render as "4 August 1961" through `format_date`,
which the scripted policy uses too, so a fact stated in an ISO value can be found in the text.

Separators survive as a reader sees them: infobox rows and list items stay one per line (an oversized
paragraph is cut at line ends before sentence ends, and its lines keep their breaks), table cells are
joined by " | ", and separator templates (`{{\\}}`, `{{•}}`, `{{snd}}`; data/separator_templates.tsv, its `index` column) print
their separator instead of vanishing.
"""

from __future__ import annotations

import re

import mwparserfromhell
from mwparserfromhell.nodes import Comment, ExternalLink, Heading, HTMLEntity, Tag, Template, Text, Wikilink
from mwparserfromhell.wikicode import Wikicode

from knowledge.templates import separator_templates
from wikitext.infobox import DATE_TEMPLATE, VOCABULARY, is_box_name, is_skipped_parameter, normalize_parameter
from wikitext.markup import format_iso_date

_DROP_LINK_NAMESPACES = ("file:", "image:", "category:", "media:")
# Template families shared with fact extraction, so the text an agent reads shows what the graph says.
_SHOWN_FLAGS = VOCABULARY.flags - VOCABULARY.decorative_flags
_KEEP_LAST = VOCABULARY.keep_last | VOCABULARY.unwrap
_SEPARATORS = separator_templates("index")
_DROP_TAGS = {"ref", "references", "gallery", "math", "score", "timeline", "syntaxhighlight"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_ABBREVIATION_END = re.compile(r"(\b[A-Z]|\b(m|b|d|c|ca|St|Dr|Mr|Mrs|Ms|Jr|Sr|Inc|Co|No|vs|Mt|Ft|Gen|Col|Lt|Gov|Sen|Rep|U\.S|U\.K|e\.g|i\.e))\.$")
_BLANK_RUNS = re.compile(r"\n{3,}")
_SPACE_RUNS = re.compile(r"[ \t\u00a0]+")
TABLE_CELL_SEPARATOR = " | "


def format_date(value: str) -> str:
    """An ISO date (YYYY, YYYY-MM or YYYY-MM-DD) as English text: "4 August 1961", "August 1961", "1961"."""
    try:
        return format_iso_date(value.strip())
    except (ValueError, IndexError):
        return value


def _template_name(template: Template) -> str:
    return str(template.name).strip().lower().replace("_", " ")


def _positional(template: Template) -> list[str]:
    return [str(p.value).strip() for p in template.params if not p.showkey]


def _render_date(template: Template) -> str:
    numbers = [p for p in _positional(template) if p.isdigit()][:3]
    if not numbers:
        return ""
    return format_date("-".join(numbers[:1] + [n.zfill(2) for n in numbers[1:]]))


def _render_marriage(template: Template) -> str:
    positional = [p for p in template.params if not p.showkey]
    if not positional:
        return ""
    spouse = _render(positional[0].value).strip()
    years = [str(p.value).strip() for p in positional[1:3]]
    suffix = f" (m. {years[0]}" if years and years[0] else ""
    if suffix and len(years) > 1 and years[1]:
        suffix += f"; end {years[1]}"
    return spouse + (suffix + ")" if suffix else "")


def _render_list(template: Template) -> str:
    items: list[str] = []
    for param in template.params:
        if param.showkey and not str(param.name).strip().isdigit():
            continue
        for line in _render(param.value).split("\n"):
            line = line.strip().lstrip("*#:").strip()
            if line:
                items.append(line)
    return ", ".join(items)


def _render_infobox(template: Template) -> str:
    lines = []
    for param in template.params:
        if not param.showkey:
            continue
        name = str(param.name).strip()
        if is_skipped_parameter(normalize_parameter(name)[0]):
            continue
        items = [line.strip().lstrip("*#:").strip() for line in _render(param.value).split("\n")]
        value = ", ".join(" ".join(item.split()) for item in items if item)
        if value:
            lines.append(f"{name.replace('_', ' ').capitalize()}: {value}")
    return "\n" + "\n".join(lines) + "\n\n" if lines else ""


def _render_template(template: Template) -> str:
    name = _template_name(template)
    if is_box_name(name):
        return _render_infobox(template)
    if DATE_TEMPLATE.match(name):
        return _render_date(template)
    if name in VOCABULARY.marriage:
        return _render_marriage(template)
    if name in VOCABULARY.lists:
        return _render_list(template)
    if name in VOCABULARY.convert:
        positional = _positional(template)
        return " ".join(positional[:2])
    if name in _SHOWN_FLAGS:
        positional = _positional(template)
        return positional[0] if positional else ""
    if name in _SEPARATORS:
        return _SEPARATORS[name]
    if name in _KEEP_LAST or name.startswith("lang-"):
        positional = [p for p in template.params if not p.showkey]
        return _render(positional[-1].value) if positional else ""
    return ""


def _render(code: Wikicode) -> str:
    out: list[str] = []
    for node in code.nodes:
        if isinstance(node, Text):
            out.append(str(node.value))
        elif isinstance(node, Wikilink):
            target = str(node.title).strip()
            if target.lower().startswith(_DROP_LINK_NAMESPACES):
                continue
            out.append(_render(node.text) if node.text is not None else target.lstrip(":").split("#")[0])
        elif isinstance(node, Template):
            out.append(_render_template(node))
        elif isinstance(node, Tag):
            tag = str(node.tag).lower()
            if tag in _DROP_TAGS:
                continue
            if tag == "br":
                out.append("\n")
            elif tag in {"li", "dd", "dt"}:  # a list item starts a line (once: the markup's newline counts)
                starts_line = not out or out[-1].endswith("\n")
                out.append(("" if starts_line else "\n") + (_render(node.contents) if node.contents is not None else ""))
            elif tag == "table" and node.contents is not None:
                out.append("\n" + _render_table(node.contents) + "\n")
            elif node.contents is not None:
                out.append(_render(node.contents))
        elif isinstance(node, Heading):
            out.append("\n" + _render(node.title).strip() + "\n")
        elif isinstance(node, ExternalLink):
            if node.title is not None:
                out.append(_render(node.title))
        elif isinstance(node, HTMLEntity):
            out.append(node.normalize())
        elif isinstance(node, Comment):
            continue
    return "".join(out)


def _is_tag(node, *names: str) -> bool:
    return isinstance(node, Tag) and str(node.tag).lower() in names


def _render_table(contents: Wikicode) -> str:
    """One line per row, its cells joined by " | " (cells ran together before: "1999Beckett"); a header row
    written without `|-` is a row too."""
    rows: list[list[Tag]] = [[]]
    for node in contents.nodes:
        if _is_tag(node, "tr"):
            rows += [[cell for cell in node.contents.nodes if _is_tag(cell, "td", "th")] if node.contents else [], []]
        elif _is_tag(node, "td", "th"):
            rows[-1].append(node)
        elif _is_tag(node, "caption") and node.contents is not None:
            rows += [[node], []]
    lines = []
    for cells in rows:
        texts = [" ".join(_render(cell.contents).split()) for cell in cells if cell.contents is not None]
        line = TABLE_CELL_SEPARATOR.join(t for t in texts if t)
        if line:
            lines.append(line)
    return "\n".join(lines)


def clean_wikitext(text: str) -> str:
    """Plain readable text of a page: facts-bearing templates rendered, markup and references dropped."""
    rendered = _render(mwparserfromhell.parse(text))
    lines = [_SPACE_RUNS.sub(" ", line).strip() for line in rendered.split("\n")]
    lines = [line.lstrip("*#:;").strip() if line[:1] in "*#:;" else line for line in lines]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


INFOBOX_ROW = re.compile(r"^(?:\[page \d+\] )?([A-Z][\w ]{0,38}\w): (.+)$")


def listed_values(row_value: str) -> list[str]:
    """The values an infobox row lists ("Starring: A B, C D" -> two), or [] for a single value. Items of two
    or more words each are a list; "Chicago, Illinois, U.S." is one place written with commas."""
    items = [item.strip() for item in row_value.split(", ") if item.strip()]
    names = [item for item in items if len(item.split(" (")[0].split()) >= 2]
    return items if len(names) >= 2 else []


def split_sentences(text: str) -> list[str]:
    """Sentences (and infobox lines) of a text, in order; no cut after an initial or a common abbreviation."""
    sentences: list[str] = []
    for line in text.split("\n"):
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if not piece:
                continue
            if sentences and not sentences[-1].endswith("\n") and _ABBREVIATION_END.search(sentences[-1]):
                sentences[-1] += " " + piece
            else:
                sentences.append(piece)
        if sentences:
            sentences[-1] += "\n"
    return [s.strip() for s in sentences]


def split_chunks(text: str, max_chars: int) -> list[str]:
    """Consecutive chunks of at most `max_chars`, cut at paragraph, then line, then sentence, then word
    boundaries; the lines of a cut paragraph (infobox rows, list items) keep their line breaks."""
    pieces: list[tuple[str, str]] = []  # (separator before the piece when joined, piece)
    for paragraph in text.split("\n\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= max_chars:
            pieces.append(("\n\n", paragraph))
            continue
        separator = "\n\n"
        for line in paragraph.split("\n"):
            line = line.strip()
            if not line:
                continue
            sentences = [line] if len(line) <= max_chars else split_sentences(line)
            for sentence in sentences:
                while len(sentence) > max_chars:
                    cut = sentence.rfind(" ", 0, max_chars)
                    cut = cut if cut > 0 else max_chars
                    pieces.append((separator, sentence[:cut].strip()))
                    sentence, separator = sentence[cut:].strip(), " "
                if sentence:
                    pieces.append((separator, sentence))
                separator = " "
            separator = "\n"
    chunks: list[str] = []
    for separator, piece in pieces:
        if chunks and len(chunks[-1]) + len(separator) + len(piece) <= max_chars:
            chunks[-1] += separator + piece
        else:
            chunks.append(piece)
    return chunks
