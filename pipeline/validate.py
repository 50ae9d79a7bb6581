"""`hopsmith validate DIR`: check a dataset folder against the schemas, its card and its checksums.

Checks, each reported as one line: the card's YAML header lists configs whose shards exist and follow the
`<split>-NNNNN-of-NNNNN` naming; every shard opens, has its config's schema, and every row validates as the
config's record type (conversation renders must also parse back into turns); row counts equal the card's
`num_examples`; ids are unique within a config; no parquet file lies outside the declared configs; and
the files match `checksums.sha256` when present (a shard corrupted so that it still parses is caught).

Row-level invariants (`row_problems`), so that an edit with a recomputed checksum is still caught: every
shard embeds its config's `datasets` features; `loss` is 0 on every non-assistant message; no message holds
a chat-template control token (so a templated row has exactly one `<|im_start|>` and `<|im_end|>` per
message) and no tool result holds a tool-protocol tag of its own; every `toolmind` and `turns` row passes a strict ToolMind-Web
structural loader (`toolmind_structure_problems`); and every render row equals the render of its trajectory
in the `trajectories` config (`RenderedDigests`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pydantic import ValidationError

from ground.errors import UserError
from ground.io import parquet_file, sha256_file, stable_hash
from ground.storage import as_path
from ground.yields import split_floor_problems
from pipeline import renders
from pipeline.card import parse_card_header
from pipeline.layout import CHECKSUMS, CONFIGS, DATA_DIR, shard_schema
from schemas.base import from_row
from schemas.critic import JudgedTrajectory

_SHARD = re.compile(r"(?P<split>[A-Za-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet\Z")
ROW_IDS = {
    "questions": lambda row: row["question_id"],
    "trajectories": lambda row: row["trajectory"]["trajectory_id"],
    "toolmind": lambda row: row["key"],
    "nanbeige": lambda row: row["trajectory_id"],
    "openai": lambda row: row["trajectory_id"],
    "turns": lambda row: row["key"],
    "rl": lambda row: row["prompt_id"],
}
PARSERS = {
    "toolmind": lambda row: renders.parse_toolmind(row["conversations"]),
    "nanbeige": lambda row: renders.parse_nanbeige(row["messages"]),
    "openai": lambda row: renders.parse_openai(row["messages"]),
}
MAX_ERRORS_PER_SHARD = 5
FEATURES_KEY = b"huggingface"
# where a config's rows keep their messages
MESSAGES = {"toolmind": "conversations", "nanbeige": "messages", "openai": "messages", "turns": "conversations"}
RENDERS = {
    "toolmind": lambda judged: [renders.render_toolmind(judged)],
    "nanbeige": lambda judged: [renders.render_nanbeige(judged)],
    "openai": lambda judged: [renders.render_openai(judged)],
    "turns": renders.render_turns,
}


def _digest(record) -> str:
    return stable_hash(record.model_dump(mode="json"))


class RenderedDigests:
    """Per render config, the digest of each row as rendered from the `trajectories` config's records."""

    def __init__(self) -> None:
        self.by_config: dict[str, dict[str, str]] = {config: {} for config in RENDERS}

    def add(self, judged: JudgedTrajectory) -> None:
        for config, render in RENDERS.items():
            for row in render(judged):
                self.by_config[config][ROW_IDS[config](row.model_dump())] = _digest(row)

    def problem(self, config: str, row_id: str, record) -> str | None:
        expected = self.by_config.get(config, {})
        if not expected:
            return None  # no trajectories config to compare with
        if row_id not in expected:
            return f"no trajectory in `trajectories` renders to {row_id!r}"
        if expected[row_id] != _digest(record):
            return f"{row_id!r} differs from the render of its trajectory (a message was changed)"
        return None


def message_problems(config: str, row: dict) -> list[str]:
    """Loss only on assistant turns; no control token in any message; no protocol tag inside a tool result."""
    problems = []
    messages = row.get(MESSAGES[config]) or []
    for position, message in enumerate(messages):
        content = message.get("content") or ""
        if message["role"] != "assistant" and message.get("loss"):
            problems.append(f"message {position} ({message['role']}) has loss={message['loss']}")
        if renders.CONTROL_TOKEN.search(content):
            problems.append(f"message {position} holds a chat-template control token "
                            f"({len(renders.CONTROL_TOKEN.findall(content))} extra turn markers in the row)")
        if position >= 2 and message["role"] != "assistant":
            inner = content.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")
            if renders.PROTOCOL_TAG.search(inner):
                problems.append(f"message {position} (a tool result) holds a tool-protocol tag")
    return problems


# ToolMind-Web-QA's conventions, read off its rows, not off our renders: the MCP call block, the tool
# declarations of the system prompt, the final `\boxed{}`. A loader that holds rows to them quarantines any
# row whose assistant message is not exactly one declared call with schema-valid arguments, or the answer.
_MCP_BLOCK = re.compile(r"<use_mcp_tool>\s*<server_name>(?P<server>.*?)</server_name>\s*<tool_name>(?P<tool>.*?)"
                        r"</tool_name>\s*<arguments>\s*(?P<arguments>.*?)\s*</arguments>\s*</use_mcp_tool>", re.DOTALL)
_DECLARED_SERVER = re.compile(r"^## Server name: (?P<server>\S+)$", re.MULTILINE)
_DECLARED_TOOL = re.compile(r"^### Tool name: (?P<tool>\S+)\n(?:Description: .*\n)?Input JSON schema: (?P<schema>.+)$",
                            re.MULTILINE)
_THINK_THEN = re.compile(r"\A<think>\n.*?\n</think>\n\n(?P<rest>.*)\Z", re.DOTALL)
_FINAL = re.compile(r"\\boxed\{.+\}\s*\Z", re.DOTALL)
_JSON_TYPES = {"object": dict, "string": str, "integer": int, "number": (int, float), "boolean": bool,
               "array": list}
_SCHEMA_KEYWORDS = {"type", "properties", "required", "additionalProperties", "minLength", "maxLength",
                    "minimum", "maximum", "default", "description", "enum"}


def json_schema_problems(value, schema: dict, where: str = "arguments") -> list[str]:
    """`value` against a JSON schema of the keywords tool declarations use; any other keyword is a problem
    (a strict loader cannot vouch for what it does not check)."""
    unknown = set(schema) - _SCHEMA_KEYWORDS
    if unknown:
        return [f"{where}: unsupported schema keywords {sorted(unknown)}"]
    expected = _JSON_TYPES.get(schema.get("type", ""), object)
    if not isinstance(value, expected) or (isinstance(value, bool) and schema.get("type") in ("integer", "number")):
        return [f"{where}: expected {schema.get('type')}, got {type(value).__name__}"]
    problems = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} not one of {schema['enum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            problems.append(f"{where}: length {len(value)} outside the schema's bounds")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            problems.append(f"{where}: {value} outside the schema's bounds")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        problems += [f"{where}: missing required {key!r}" for key in schema.get("required", []) if key not in value]
        if schema.get("additionalProperties") is False:
            problems += [f"{where}: undeclared key {key!r}" for key in value if key not in properties]
        for key, item in value.items():
            if key in properties:
                problems += json_schema_problems(item, properties[key], f"{where}.{key}")
    return problems


def toolmind_structure_problems(conversations: list[dict]) -> list[str]:
    """A strict ToolMind-Web structural loader: system then user; then assistant and user alternate; every
    assistant message but the last is `<think>` plus exactly one MCP call to a server and tool the system
    prompt declares, with JSON-object arguments valid under that tool's input schema; the last assistant
    message gives the `\\boxed{}` answer and calls nothing; a tool result holds no call."""
    roles = [m.get("role") for m in conversations]
    if roles[:2] != ["system", "user"]:
        return [f"starts with {roles[:2]}, not system, user"]
    system = conversations[0].get("content") or ""
    servers = {m.group("server") for m in _DECLARED_SERVER.finditer(system)}
    schemas = {}
    for declared in _DECLARED_TOOL.finditer(system):
        try:
            schemas[declared.group("tool")] = json.loads(declared.group("schema"))
        except json.JSONDecodeError:
            return [f"tool {declared.group('tool')!r} declares an input schema that is not JSON"]
    problems = []
    for position, message in enumerate(conversations[2:], start=2):
        role, content = message.get("role"), message.get("content") or ""
        if role != ("assistant" if position % 2 == 0 else "user"):
            problems.append(f"message {position}: {role} breaks the assistant/user alternation")
            continue
        calls = list(_MCP_BLOCK.finditer(content))
        if role == "user":
            if "<use_mcp_tool>" in content:
                problems.append(f"message {position}: a tool result holds a tool call")
            continue
        think = _THINK_THEN.match(content)
        if think is None:
            problems.append(f"message {position}: no <think> block before the action")
            continue
        rest = think.group("rest")
        if position == len(conversations) - 1 and not calls:
            if not _FINAL.search(rest) or "<use_mcp_tool>" in rest:
                problems.append(f"message {position}: the last message neither calls a tool nor gives \\boxed{{}}")
            continue
        if len(calls) != 1 or calls[0].group(0) != rest.strip():
            problems.append(f"message {position}: not exactly one MCP call ({len(calls)} blocks, other text)")
            continue
        call = calls[0]
        if call.group("server") not in servers:
            problems.append(f"message {position}: server {call.group('server')!r} is not declared")
        if call.group("tool") not in schemas:
            problems.append(f"message {position}: tool {call.group('tool')!r} is not declared")
            continue
        try:
            arguments = json.loads(call.group("arguments"))
        except json.JSONDecodeError:
            problems.append(f"message {position}: arguments are not JSON")
            continue
        problems += [f"message {position}: {problem}"
                     for problem in json_schema_problems(arguments, schemas[call.group("tool")])]
    return problems


def features_problem(schema: pa.Schema, config: str) -> str | None:
    """The `datasets` features every shard embeds (without them `load_dataset` guesses the types)."""
    metadata = schema.metadata or {}
    if FEATURES_KEY not in metadata:
        return "the shard lacks its `datasets` features (schema metadata `huggingface`)"
    if metadata[FEATURES_KEY] != shard_schema(config).metadata[FEATURES_KEY]:
        return f"the shard's `datasets` features differ from the `{config}` config's"
    return None


def row_problems(config: str, row: dict, record, digests: RenderedDigests) -> list[str]:
    """The row-level invariants of one validated row (see the module docstring)."""
    if config not in MESSAGES:
        if config == "trajectories":
            digests.add(record)
        return []
    problems = message_problems(config, row)
    if config in ("toolmind", "turns"):
        problems += toolmind_structure_problems(row["conversations"])
    mismatch = digests.problem(config, ROW_IDS[config](row), record)
    return problems + ([mismatch] if mismatch else [])


@dataclass
class Report:
    errors: list[str] = field(default_factory=list)
    shards: int = 0
    rows: Counter = field(default_factory=Counter)
    split_rows: dict[str, Counter] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _check_shard(path: Path, config: str, report: Report, seen: set[str], digests: RenderedDigests) -> int:
    """Validate one shard row by row; returns its row count."""
    relative = path.as_posix()
    try:
        parquet = parquet_file(path)
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError) as error:
        report.errors.append(f"{relative}: unreadable parquet ({error})")
        return 0
    if schema.remove_metadata() != shard_schema(config).remove_metadata():
        report.errors.append(f"{relative}: schema differs from the `{config}` config's")
        return 0
    missing_features = features_problem(schema, config)
    if missing_features:
        report.errors.append(f"{relative}: {missing_features}")
    model, row_id, parse = CONFIGS[config], ROW_IDS[config], PARSERS.get(config)
    rows = problems = 0
    try:
        for batch in parquet.iter_batches(batch_size=512):
            for row in batch.to_pylist():
                rows += 1
                try:
                    record = from_row(model, row)
                    if parse is not None:
                        parse(row)
                    found = row_problems(config, row, record, digests)
                except (ValidationError, ValueError, KeyError) as error:
                    found = [str(error).splitlines()[0]]
                if found:
                    problems += 1
                    if problems <= MAX_ERRORS_PER_SHARD:
                        report.errors.extend(f"{relative} row {rows - 1}: {problem}" for problem in found)
                    continue
                identifier = row_id(row)
                if identifier in seen:
                    report.errors.append(
                        f"{relative} row {rows - 1}: duplicate id {identifier!r} in `{config}`"
                    )
                seen.add(identifier)
    except (pa.ArrowException, OSError) as error:
        report.errors.append(f"{relative}: corrupted data after {rows} rows ({error})")
    return rows


def _check_naming(files: list[Path], pattern: str, report: Report) -> None:
    parsed = [_SHARD.match(f.name) for f in files]
    if not all(parsed):
        report.errors.append(f"{pattern}: shard names must be <split>-NNNNN-of-NNNNN.parquet")
        return
    counts = {int(m.group("count")) for m in parsed}
    indices = sorted(int(m.group("index")) for m in parsed)
    if len(counts) != 1 or indices != list(range(counts.pop())):
        report.errors.append(f"{pattern}: shards are not numbered 0..n-1 of n (a shard is missing or extra)")


def _check_checksums(root: Path, report: Report) -> None:
    listing = root / CHECKSUMS
    if not listing.is_file():
        return
    for line in listing.read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = root / name
        if not path.is_file():
            report.errors.append(f"{name}: listed in {CHECKSUMS} but missing")
        elif sha256_file(path) != digest:
            report.errors.append(f"{name}: checksum mismatch (the file changed after it was written)")


def validate_dataset(root: str | Path, allow_low_yield: bool = False) -> Report:
    """Every check of the module docstring; low yield (`ground.yields`) is an error unless allowed, an
    empty dataset always is."""
    root = as_path(root)
    card = root / "README.md"
    if not card.is_file():
        raise UserError(f"{root} has no README.md dataset card; is it a hopsmith dataset folder?")
    report = Report()
    try:
        header = parse_card_header(card.read_text())
    except ValueError as error:
        report.errors.append(f"README.md: {error}")
        return report
    declared = {
        info["config_name"]: {s["name"]: s["num_examples"] for s in info.get("splits", [])}
        for info in header.get("dataset_info", [])
    }
    covered: set[Path] = set()
    digests = RenderedDigests()
    entries = sorted(header.get("configs", []), key=lambda e: e["config_name"] != "trajectories")
    for entry in entries:
        config = entry["config_name"]
        if config not in CONFIGS:
            report.errors.append(f"README.md: unknown config {config!r}")
            continue
        seen: set[str] = set()
        for data_file in entry["data_files"]:
            split, pattern = data_file["split"], data_file["path"]
            files = sorted(root.glob(pattern))
            if not files:
                report.errors.append(f"{pattern}: no shard matches")
                continue
            _check_naming(files, pattern, report)
            rows = 0
            for path in files:
                covered.add(path)
                report.shards += 1
                rows += _check_shard(path, config, report, seen, digests)
            report.rows[config] += rows
            report.split_rows.setdefault(config, Counter())[split] += rows
            expected = declared.get(config, {}).get(split)
            if expected != rows:
                report.errors.append(
                    f"`{config}` {split}: {rows} rows in the shards, the card says {expected}"
                )
    for path in sorted((root / DATA_DIR).rglob("*.parquet")):
        if path not in covered:
            report.errors.append(f"{path.relative_to(root)}: a parquet file no config of the card declares")
    _check_checksums(root, report)
    _check_yield(report, allow_low_yield)
    return report


def _check_yield(report: Report, allow_low_yield: bool) -> None:
    if not sum(report.rows.values()):
        report.errors.append("the dataset is empty: no config holds a row (did the input have readable pages?)")
        return
    low = split_floor_problems({config: report.split_rows.get(config, Counter()) for config in CONFIGS})
    target = report.warnings if allow_low_yield else report.errors
    target.extend(f"low yield: {problem} (accept it with --allow-low-yield)" for problem in low)
