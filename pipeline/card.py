"""The dataset card (`README.md` with a Hub YAML header) and its plots, from statistics counted while building.

`DatasetStats` is filled row by row by the dataset stage; the card and the PNG plots are pure functions of
it, the upstream manifests and the config, so the same run always writes the same card.
"""

from __future__ import annotations

import io
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import DatasetCard

from critic.critical import TOOLMIND_CRITICAL_PER_TRAJECTORY, TOOLMIND_LOSS_SHARE
from ground.io import atomic_write_bytes
from pipeline.layout import CONFIGS, dataset_info_yaml, shard_pattern
from schemas.critic import CRITERIA, JudgedTrajectory
from schemas.dataset import ToolMindRow
from schemas.manifest import Manifest
from schemas.questions import Question
from synth.difficulty import BUCKETS, difficulty_bucket

PLOTS_DIR = "plots"
DEFAULT_CONFIG = "toolmind"  # what `load_dataset(<repo>)` without a config name returns
PLOTS = {
    "hops": "hop_count_distribution.png",
    "tool_calls": "tool_calls_per_trajectory.png",
    "critic": "critic_pass_rate_per_criterion.png",
    "accuracy": "outcome_accuracy_per_framework.png",
}
# The one step from an `openai` row as `datasets` loads it to a chat completions request: Arrow gives every
# message every field (absent ones as None, which the API's types reject), `loss` and `reasoning_content`
# are not API fields, and `tools` are JSON strings. Tests run this very text over every row.
OPENAI_REQUEST_CODE = """import json

def chat_request(row):
    messages = [{k: v for k, v in m.items() if v is not None and k not in ("loss", "reasoning_content")}
                for m in row["messages"]]
    return {"messages": messages, "tools": [json.loads(tool) for tool in row["tools"]]}
"""

CONFIG_DESCRIPTIONS = {
    "questions": "verified multi-hop questions with answer, aliases, as-of date and the graph path behind them",
    "trajectories": "the canonical record: one agent trajectory with every turn's critic judgement",
    "toolmind": "ToolMind-Web-QA compatible `{key, id, conversations: [{role, content, loss}]}` with MCP calls",
    "nanbeige": "messages in the Nanbeige4.1 (Qwen3 ChatML) `<tool_call>`/`<tool_response>` template",
    "openai": "OpenAI chat messages with `tool_calls` and `tool` results, plus the `tools` declarations",
    "turns": "one row per critic-approved assistant turn: the conversation prefix ending at it",
    "rl": "RL prompts in the nanbeige template with gold answers, the search environment to roll out in and the "
          "question's pass rate",
}


@dataclass
class DatasetStats:
    """What the card reports, counted while rows are written."""

    questions: int = 0
    hops: Counter = field(default_factory=Counter)
    question_engines: Counter = field(default_factory=Counter)
    # role -> the models its server reported -> records (questions, trajectories, judged turns)
    served_models: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    trajectories: int = 0
    tool_calls: list[int] = field(default_factory=list)
    turns: int = 0
    kept_turns: int = 0
    criterion_passed: Counter = field(default_factory=Counter)
    criterion_total: Counter = field(default_factory=Counter)
    framework_total: Counter = field(default_factory=Counter)
    framework_correct: Counter = field(default_factory=Counter)
    stop_reasons: Counter = field(default_factory=Counter)
    injected_errors: Counter = field(default_factory=Counter)
    rows: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    skipped: Counter = field(default_factory=Counter)
    scripted: int = 0
    question_hops: dict[str, int] = field(default_factory=dict)
    # hops -> question ids the offline searcher ran on, and those it solved in at least one rollout
    searched: dict[int, set] = field(default_factory=lambda: defaultdict(set))
    solved: dict[int, set] = field(default_factory=lambda: defaultdict(set))
    scripted_solved: int = 0
    sft_trajectories: int = 0
    sft_assistant_turns: int = 0
    sft_loss_turns: int = 0
    sft_critical_turns: int = 0
    # hops -> pass-rate bucket -> questions, measured by `difficulty_policy`; RL prompts kept by `pass_band`
    difficulty: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    difficulty_policy: str | None = None
    difficulty_rollouts: set = field(default_factory=set)
    pass_band: str = ""

    def add_question(self, question: Question) -> None:
        self.questions += 1
        self.hops[question.hops] += 1
        self.question_hops[question.question_id] = question.hops
        self.question_engines[question.engine] += 1
        if question.model:
            self.served_models["writer"][question.model] += 1

    def add_pass_rate(self, hops: int, rate: float, rollouts: int) -> None:
        self.difficulty[hops][difficulty_bucket(rate)] += 1
        self.difficulty_rollouts.add(rollouts)

    def difficulty_rows(self) -> list[list[Any]]:
        """The difficulty histogram: a row per hop count (and all), questions per pass-rate bucket."""
        rows = [[hops, *(self.difficulty[hops][b] for b in BUCKETS), sum(self.difficulty[hops].values())]
                for hops in sorted(self.difficulty)]
        total = [sum(self.difficulty[h][b] for h in self.difficulty) for b in BUCKETS]
        return [*rows, ["all", *total, sum(total)]]

    def difficulty_section(self, rl_prompts: int) -> list[str]:
        if self.difficulty_policy is None:
            return []
        offline = self.difficulty_policy.startswith("offline:")
        who = (f"the offline searcher (`{self.difficulty_policy}`: the trajectories stage's honest searcher with "
               "no injected errors, so not its training rollouts, whose injected errors fail some runs)"
               if offline else f"the eval policy `{self.difficulty_policy}`")
        rollouts = "/".join(map(str, sorted(self.difficulty_rollouts))) or "k"
        return [
            "## Difficulty\n",
            f"Each question's pass rate is the share of correct rollouts when {who} solves it "
            f"{rollouts} times over the run's search index (`hopsmith eval`'s "
            "episode loop and answer matching; the `difficulty` stage). The `questions` config keeps it as "
            "`pass_rate`, with `pass_rate_policy` and `pass_rate_rollouts`. Questions by hop count and pass rate:\n",
            _table(["hops", *BUCKETS, "questions"], self.difficulty_rows()) + "\n",
            f"The `rl` config keeps the {rl_prompts} questions whose pass rate is {self.pass_band} (`--pass-band`), "
            "each row with its rate; "
            f"{self.skipped['rl_outside_pass_band']} are left out. The `questions` config keeps them all, so "
            "`hopsmith rl train` and `hopsmith rl export-verl` take `--pass-band LO HI` to build prompts for "
            "another band from it (`--pass-band 0 1`: every question, the never-solved ones too).\n",
        ]

    def add_trajectory(self, judged: JudgedTrajectory) -> None:
        trajectory = judged.trajectory
        self.trajectories += 1
        self.tool_calls.append(sum(t.tool_call is not None for t in trajectory.turns))
        self.turns += len(trajectory.turns)
        self.kept_turns += sum(j.loss_mask for j in judged.judgements)
        for judgement in judged.judgements:
            for criterion in CRITERIA:
                self.criterion_total[criterion] += 1
                self.criterion_passed[criterion] += getattr(judgement, criterion).passed
        self.framework_total[trajectory.framework] += 1
        self.framework_correct[trajectory.framework] += trajectory.outcome.correct
        self.stop_reasons[trajectory.stop_reason] += 1
        self.injected_errors.update(t.injected_error for t in trajectory.turns if t.injected_error)
        if trajectory.policy == "scripted":
            self.scripted += 1
            self.scripted_solved += trajectory.outcome.correct
            hops = self.question_hops.get(trajectory.question_id, 0)
            self.searched[hops].add(trajectory.question_id)
            if trajectory.outcome.correct:
                self.solved[hops].add(trajectory.question_id)
        if trajectory.model:
            self.served_models[f"policy:{trajectory.framework}"][trajectory.model] += 1
        self.served_models["judge"].update(j.model for j in judged.judgements if j.model)

    def served_model_text(self) -> str:
        """`writer: `m` (3)` per role whose records name a served model, or `-` when all were offline."""
        return "; ".join(f"{role}: " + ", ".join(f"`{model}` ({n})" for model, n in sorted(models.items()))
                         for role, models in sorted(self.served_models.items()) if models) or "-"

    def add_sft(self, judged: JudgedTrajectory, row: ToolMindRow) -> None:
        """A trajectory rendered into the SFT configs: its assistant turns, those with loss 1, its critical turns."""
        assistant = [m for m in row.conversations if m.role == "assistant"]
        self.sft_trajectories += 1
        self.sft_assistant_turns += len(assistant)
        self.sft_loss_turns += sum(m.loss for m in assistant)
        self.sft_critical_turns += sum(j.critical for j in judged.judgements)

    def solve_rate_line(self) -> str:
        """The offline searcher's solve rate by hop count (a question counts as solved when any rollout was
        correct), and where the questions it never solved go."""
        parts = [f"{hops} hops: {len(self.solved[hops])}/{len(self.searched[hops])} "
                 f"({len(self.solved[hops]) / len(self.searched[hops]):.0%})" for hops in sorted(self.searched)]
        return (f"Offline searcher solve rate: {self.scripted_solved / max(1, self.scripted):.1%} of rollouts; "
                f"questions solved by hop count: {', '.join(parts)}.")

    def supervision_counts(self) -> dict[str, int]:
        """The SFT supervision in manifest counts (the run summary prints them)."""
        return {"sft_assistant_turns": self.sft_assistant_turns, "sft_loss1_turns": self.sft_loss_turns,
                "sft_critical_turns": self.sft_critical_turns}

    def supervision_rows(self) -> list[list[Any]]:
        """Share of loss-1 turns and critical turns per trajectory, beside ToolMind-Web-QA's."""
        share = self.sft_loss_turns / self.sft_assistant_turns if self.sft_assistant_turns else 0.0
        per = self.sft_critical_turns / self.sft_trajectories if self.sft_trajectories else 0.0
        ours = [f"{share:.1%}", f"{per:.2f}"]
        return [
            ["`toolmind`, `nanbeige`, `openai` (same turns)", *ours],
            ["`turns` (one row per loss-1 turn)", "100% (last message)", f"{per:.2f}"],
            ["ToolMind-Web-QA `open-wiki-traj`", f"~{TOOLMIND_LOSS_SHARE:.0%}", f"{TOOLMIND_CRITICAL_PER_TRAJECTORY}"],
        ]

    def pass_rate(self, criterion: str) -> float:
        return (
            self.criterion_passed[criterion] / self.criterion_total[criterion]
            if self.criterion_total[criterion]
            else 0.0
        )

    def accuracy(self, framework: str) -> float:
        return (
            self.framework_correct[framework] / self.framework_total[framework]
            if self.framework_total[framework]
            else 0.0
        )


def _bar(
    path: Path,
    labels: list[str],
    values: list[float],
    title: str,
    xlabel: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> None:
    # matplotlib's object API, imported here: no pyplot state, and 0.3 s off the start-up of every command
    # that imports this module (the dataset stage, validate)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 3.5), dpi=100)
    axes = figure.subplots()
    axes.bar(labels, values, color="#4C72B0")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if ylim:
        axes.set_ylim(*ylim)
    crowded = len(labels) > 15
    if crowded:
        axes.tick_params(axis="x", labelrotation=60, labelsize=7)
    for x, value in enumerate([] if crowded else values):
        axes.annotate(
            f"{value:.2f}" if isinstance(value, float) else f"{value}",
            (x, value),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", metadata={"Software": None})
    atomic_write_bytes(path, image.getvalue())


def binned(values: list[int], max_bins: int = 30) -> tuple[list[str], list[int]]:
    """Counts of integer values in at most `max_bins` equal-width bins (one per value when few)."""
    if not values:
        return [], []
    low, high = min(values), max(values)
    width = -(-(high - low + 1) // max_bins)
    starts = range(low, high + 1, width)
    counts = Counter((v - low) // width for v in values)
    labels = [str(start) if width == 1 else f"{start}-{start + width - 1}" for start in starts]
    return labels, [counts[i] for i in range(len(labels))]


def write_plots(stats: DatasetStats, root: Path) -> dict[str, str]:
    """The four card plots as PNG files under `root/plots/`; returns plot -> relative path."""
    folder = root / PLOTS_DIR
    hops = sorted(stats.hops)
    _bar(
        folder / PLOTS["hops"],
        [str(h) for h in hops],
        [stats.hops[h] for h in hops],
        "Hop-count distribution",
        "hops",
        "questions",
    )
    labels, counts = binned(stats.tool_calls)
    _bar(
        folder / PLOTS["tool_calls"],
        labels,
        counts,
        "Tool calls per trajectory",
        "tool calls",
        "trajectories",
    )
    _bar(
        folder / PLOTS["critic"],
        list(CRITERIA),
        [stats.pass_rate(c) for c in CRITERIA],
        "Critic pass rate per criterion",
        "criterion",
        "pass rate",
        ylim=(0, 1.05),
    )
    frameworks = sorted(stats.framework_total)
    _bar(
        folder / PLOTS["accuracy"],
        frameworks,
        [stats.accuracy(f) for f in frameworks],
        "Outcome accuracy per framework",
        "framework",
        "accuracy",
        ylim=(0, 1.05),
    )
    return {name: f"{PLOTS_DIR}/{filename}" for name, filename in PLOTS.items()}


def size_category(rows: int) -> str:
    if rows < 1000:
        return "n<1K"
    bounds = ["1K", "10K", "100K", "1M", "10M", "100M", "1B"]
    exponent = min(int(math.log10(rows)) - 3, len(bounds) - 2)
    return f"{bounds[exponent]}<n<{bounds[exponent + 1]}"


def card_header(name: str, split_rows: dict[str, dict[str, int]],
                split_bytes: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The Hub YAML header: license, categories, and one config per non-empty table with its data files."""
    configs, infos = [], []
    for config in CONFIGS:
        splits = {s: n for s, n in split_rows.get(config, {}).items() if n}
        if not splits:
            continue
        entry = {
            "config_name": config,
            "data_files": [{"split": s, "path": shard_pattern(config, s)} for s in splits],
        }
        if config == DEFAULT_CONFIG:
            entry["default"] = True
        configs.append(entry)
        infos.append(dataset_info_yaml(config, splits, split_bytes[config]))
    largest = max((sum(s.values()) for s in split_rows.values()), default=0)
    return {
        "license": "cc-by-sa-4.0",
        "language": ["en"],
        "pretty_name": name,
        "task_categories": ["question-answering", "text-generation"],
        "tags": ["deep-search", "agent", "tool-use", "multi-hop", "wikipedia", "synthetic", "trajectories"],
        "size_categories": [size_category(largest)],
        "source_datasets": ["original"],
        "configs": configs,
        "dataset_info": infos,
    }


def parse_card_header(text: str) -> dict[str, Any]:
    """The YAML header of a card, parsed by the Hub client's own card reader."""
    if not text.startswith("---\n"):
        raise ValueError("the card has no YAML header")
    return DatasetCard(text).data.to_dict()


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _provenance(manifests: dict[str, Manifest], seed: int) -> list[list[Any]]:
    extract = manifests.get("extract")
    rows: list[list[Any]] = []
    if extract is not None:
        for item in extract.inputs:
            name = Path(item.path).name
            label = "dump index" if "-index" in name else "dump"
            rows.append([label, f"`{name}` ({item.bytes:,} bytes, sha256 `{item.sha256[:16]}…`)"])
        rows.append(["as-of", extract.as_of.date().isoformat() if extract.as_of else "newest revision"])
        rows.append(["recency window", f"{extract.window_days} days" if extract.window_days else "-"])
    rows.append(["seed", seed])
    for stage, manifest in manifests.items():
        engines = ", ".join(f"{role}: `{engine}`" for role, engine in sorted(manifest.engines.items())) or "-"
        rows.append([f"stage `{stage}`", f"engines {engines}; key `{manifest.key[:12]}`"])
    versions = sorted({m.code_version for m in manifests.values()})
    rows.append(["code version", ", ".join(f"`{v}`" for v in versions)])
    return rows


def _source(manifests: dict[str, Manifest]) -> str:
    return "the shipped hopsmith sample dump (written in the style of Wikipedia)" if _from_sample(manifests) \
        else "a Wikipedia snapshot"


def render_card(
    name: str,
    stats: DatasetStats,
    split_rows: dict[str, dict[str, int]],
    split_bytes: dict[str, dict[str, int]],
    manifests: dict[str, Manifest],
    seed: int,
    plots: dict[str, str],
    environment: str,
    questions: dict[str, Any] | None = None,
) -> str:
    """The whole `README.md`: YAML header, description, provenance, how the data was made, statistics, the
    question report (`synth.report.question_report`) and plots."""
    header = yaml.safe_dump(card_header(name, split_rows, split_bytes), sort_keys=False, allow_unicode=True, width=1000)
    config_rows = [
        [f"`{c}`", CONFIG_DESCRIPTIONS[c], *(split_rows.get(c, {}).get(s, 0) for s in ("train", "test"))]
        for c in CONFIGS
    ]
    skipped = [[reason, count] for reason, count in sorted(stats.skipped.items())]
    mean_calls = sum(stats.tool_calls) / len(stats.tool_calls) if stats.tool_calls else 0.0
    parts = [
        f"---\n{header}---\n",
        f"# {name}\n",
        f"Deep-search training data synthesised by **hopsmith** from {_source(manifests)}, following the "
        "Nanbeige4.1-3B recipe: an entity-relation graph from infoboxes, conditional random walks, gated "
        "multi-hop questions (answer uniqueness checked over the graph), agent trajectories in several frameworks over a local "
        "search environment built from the same snapshot, and a turn-level critic whose verdicts become "
        "per-turn loss masks and rewards.\n",
        "## Configs\n",
        _table(["config", "content", "train", "test"], config_rows) + "\n",
        "Splits are assigned by a hash of the question id, so a question, its trajectories and its RL prompt "
        "share a split. In `toolmind`, `nanbeige`, `openai` and `turns`, `loss` follows the judge's loss "
        "policy: under `critical` (the default) it is 1 only on passing turns that moved the run toward the "
        "answer (first retrieval of a gold-path fact, a correct statement of an intermediate entity, the "
        "final answer), as ToolMind-Web-QA trains; other passing turns and failed turns stay in context with "
        "loss 0 (`trajectories` keeps every verdict, reward and `critical` flag). A conversation identical to "
        "one already rendered is left out of the training configs (counted below). Load a config with "
        f'`datasets.load_dataset("parquet", data_files={{"train": "{shard_pattern("toolmind", "train")}"}})` '
        "or by config name from the Hub. Free-form objects (tool-call arguments, tool declarations) are "
        "stored as JSON strings.\n",
        "An `openai` row becomes a chat completions request (`client.chat.completions.create(model=..., "
        "**chat_request(row))`) in one step, which drops the fields Arrow filled with null and the "
        "training-only fields:\n",
        f"```python\n{OPENAI_REQUEST_CODE}```\n",
        "## Provenance\n",
        _table(["item", "value"], _provenance(manifests, seed)) + "\n",
        *_how_made(manifests, questions),
        f"RL prompts roll out in the search environment `{environment}` (the `index` stage output of the same "
        "run: `synth.environment.SearchEnvironment.load(<out>/index)`).\n",
        "## Statistics\n",
        _table(
            ["statistic", "value"],
            [
                ["questions", stats.questions],
                [
                    "question engines",
                    ", ".join(f"{k}: {v}" for k, v in sorted(stats.question_engines.items())),
                ],
                ["models as their servers reported them (records: questions, trajectories, judged turns)",
                 stats.served_model_text()],
                ["trajectories", stats.trajectories],
                ["assistant turns", stats.turns],
                [
                    "turns with loss 1",
                    f"{stats.kept_turns} ({stats.kept_turns / stats.turns:.1%})" if stats.turns else 0,
                ],
                ["mean tool calls per trajectory", f"{mean_calls:.2f}"],
                ["max tool calls per trajectory", max(stats.tool_calls, default=0)],
                ["stop reasons", ", ".join(f"{k}: {v}" for k, v in sorted(stats.stop_reasons.items()))],
                [
                    "injected offline-policy errors",
                    ", ".join(f"{k}: {v}" for k, v in sorted(stats.injected_errors.items())) or "-",
                ],
            ],
        )
        + "\n",
        *(
            [f"{stats.scripted} trajectories come from the offline scripted policy, an honest searcher that acts "
             "only on what the question and its observations showed (never the gold path) with per-turn errors "
             "injected at configured rates; its accuracy per framework reflects its search and the injection "
             f"rate, not a model's skill. {stats.solve_rate_line()}\n"]
            if stats.scripted else []
        ),
        "Supervision of the training configs:\n",
        _table(["config", "assistant turns with loss 1", "critical turns per trajectory"], stats.supervision_rows())
        + "\n",
        _table(["criterion", "pass rate"], [[c, f"{stats.pass_rate(c):.3f}"] for c in CRITERIA]) + "\n",
        _table(
            ["framework", "trajectories", "accuracy"],
            [
                [f, stats.framework_total[f], f"{stats.accuracy(f):.3f}"]
                for f in sorted(stats.framework_total)
            ],
        )
        + "\n",
    ]
    if skipped:
        parts += [
            "Rows left out of the training renders, by reason:\n",
            _table(["reason", "rows"], skipped) + "\n",
        ]
    parts += stats.difficulty_section(sum(split_rows.get("rl", {}).values()))
    if questions is not None:
        from synth.report import report_rows

        parts += [
            "## Questions\n",
            "Measured on the published questions by `hopsmith question-report` with probes that are not the "
            "questions stage's gates (the start entity looked for in the text; the text and each description "
            "alone searched in a TF-IDF retriever, not the agents' bm25s index; the commonest answer of the other "
            "questions ending in the same relation guessed; a template break scan of text and answer):\n",
            _table(["statistic", "value"], report_rows(questions)) + "\n",
        ]
    parts += [
        "## Plots\n",
        f"![Hop-count distribution]({plots['hops']})\n",
        f"![Tool calls per trajectory]({plots['tool_calls']})\n",
        f"![Critic pass rate per criterion]({plots['critic']})\n",
        f"![Outcome accuracy per framework]({plots['accuracy']})\n",
        "## License and attribution\n",
        _attribution(manifests),
    ]
    return "\n".join(parts)


SAMPLE_DUMP_NAME = "enwiki-sample-pages-articles-multistream.xml.bz2"


def _from_sample(manifests: dict[str, Manifest]) -> bool:
    extract = manifests.get("extract")
    return extract is not None and any(Path(i.path).name == SAMPLE_DUMP_NAME for i in extract.inputs)


def _attribution(manifests: dict[str, Manifest]) -> str:
    """Credit whoever wrote the source text: the shipped sample's authors (as its NOTICE does), or Wikipedia."""
    if _from_sample(manifests):
        return ("The source is the hopsmith sample dump: page texts written for hopsmith by its authors in the "
                "style of English Wikipedia articles, abridged and not a reference source "
                "(`data/sample/NOTICE`), licensed under the "
                "[Creative Commons Attribution-ShareAlike 4.0 License](https://creativecommons.org/licenses/by-sa/4.0/); "
                "this dataset is released under the same license. Attribution: \"hopsmith sample dump, by the "
                "hopsmith authors\".\n")
    return ("The text is derived from Wikipedia, licensed under the "
            "[Creative Commons Attribution-ShareAlike 4.0 License](https://creativecommons.org/licenses/by-sa/4.0/); "
            "this dataset is released under the same license. Attribution: Wikipedia contributors, "
            "*Wikipedia, The Free Encyclopedia* (see the dump named above for the exact revisions; every "
            "question's path records the page and revision id of each fact).\n")


def _how_made(manifests: dict[str, Manifest], questions: dict[str, Any] | None) -> list[str]:
    """Which engines and policies made the data, what the offline policy knew, and which checks ran."""
    lines = []
    writer = manifests["questions"].engines.get("writer", "") if "questions" in manifests else ""
    if writer:
        made = "the offline template engine" if writer == "template" else f"the LLM writer `{writer}`"
        lines.append(f"- Questions were written by {made}.")
    trajectories = manifests.get("trajectories")
    if trajectories is not None:
        policies = ", ".join(f"{role.removeprefix('policy:')}: `{engine}`" for role, engine in
                             sorted(trajectories.engines.items()))
        lines.append(f"- Trajectories were made by these policies per framework: {policies}.")
        if "offline" in trajectories.engines.values():
            lines.append("- The offline scripted policy is a rule-based searcher: it reads the question's words "
                         "and the relations they chain (not the entities or the answer) and acts only on what its "
                         "observations showed; its search is a heuristic one, not a model's, and its errors are "
                         "injected at set rates.")
    if questions is not None:
        lines.append("- Every question passed these gates: " + ", ".join(f"`{g}`" for g in questions["gates"])
                     + "; no other property is claimed. Uniqueness is checked over the graph, counting objects "
                     "without a page: a fact the source does not state at all cannot rule an alternative out."
                     + (" `identifying_clue` judges one fact at a time against a hand-reviewed list of properties "
                        "whose one value identifies its subject in the world (a capital, a spouse, a sequel); a "
                        "combination of facts that together identify an entity in the world is not checked."
                        if "identifying_clue" in questions["gates"] else "")
                     + {"narrow anchor": " Beyond the slice, a described start states a fact whose object is a "
                        "page that is no hub and no place alone (a narrow anchor: no country, language, genre, occupation, "
                        "industry, academic field or place where it lies, was born or died, "
                        "data/questions/broad_anchors.toml; one shared credit such as a distributor, publisher, label, "
                        "university or managed club still counts, and independent readings found such starts often "
                        "fit a second real entity; no census of a full dump was given). How many "
                        "entities of the whole wiki fit it was not counted; the planner's estimate by a reviewed "
                        "prior of subjects per fact (data/questions/world_holders.toml: an actor's dozens of films, "
                        "a publisher's thousands of books) puts "
                        + (f"{questions['world_fits_over_share']:.0%}" if questions.get("world_fits_over_share")
                           is not None else "an unknown share")
                        + f" of the described starts above {questions.get('world_fits_max', 1.5):g} fits: those "
                        "questions may have other answers in the world (`questions.world_prior = true` rejects "
                        "them, at a large cost in yield).",
                        "prior": " Beyond the slice, each described start was estimated to fit at most "
                        f"{questions.get('world_fits_max', 1.5):g} entities of the whole wiki by a reviewed prior of "
                        "subjects per fact (data/questions/world_holders.toml, scaled by the slice's share of each "
                        "fact's holders the description keeps): an estimate, not a count; no census of a full dump "
                        "was given.",
                        "": ""}.get(questions.get("world_uniqueness", ""),
                                   f" Beyond the slice, each described start was estimated unique against a "
                                   f"{questions.get('world_uniqueness', '')} (subjects per fact of a full dump's "
                                   "graph, scaled by the slice's share of each fact's holders the description keeps)."))
    return ["## How the data was made\n", "\n".join(lines) + "\n"] if lines else []
