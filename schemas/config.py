"""Run configuration: one pydantic model per stage, composed into the `hopsmith dataset` config file.

Every LLM-backed role has an offline engine: a role with no `base_url` runs offline. API keys are never
part of a config; a role names the environment variable that holds its key.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from schemas.secrets import register_secret_env


def _not_after_the_run(value: dt.date | dt.datetime) -> dt.date | dt.datetime:
    """A snapshot date is a moment already past: no revision exists after the run starts."""
    now = dt.datetime.now(dt.UTC)
    if value > (now if isinstance(value, dt.datetime) else now.date()):
        raise ValueError(f"must not be after the run ({now:%Y-%m-%dT%H:%M:%SZ})")
    return value


# the ranges every config field has: a share or a probability, and dates that must not lie in the future
Share = Annotated[float, Field(ge=0.0, le=1.0)]
NOT_AFTER_RUN = AfterValidator(_not_after_the_run)
PastDate = Annotated[dt.date, NOT_AFTER_RUN]
PastDatetime = Annotated[AwareDatetime, NOT_AFTER_RUN]

_BOUND_WORDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"),
                "less_than": ("<", "lt")}


def config_error_line(error: ValidationError, what: str = "config") -> str:
    """A config's validation errors as one line: each key (dotted), the value given and what is allowed."""
    problems = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"]) or "(top level)"
        words = _BOUND_WORDS.get(item["type"])
        allowed = f"must be {words[0]} {item['ctx'][words[1]]}" if words else item["msg"].removeprefix("Value error, ")
        shown = "" if item["type"] in ("missing", "extra_forbidden") else f" = {item['input']!r}"
        problems.append(f"{key}{shown}: {allowed}")
    return f"invalid {what}: " + "; ".join(problems)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LLMRole(_Config):
    """An OpenAI-compatible endpoint for one role (question writer, shortcut checker, a policy, the judge).

    The defaults suit a small local server that serves one request at a time: requests in flight start at
    `start_concurrency` and grow towards `max_concurrency` while the server keeps up (halving on every
    timeout); `max_tokens` unset means the role's own budget (a question, a score, one agent turn).
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1, description="default: the role's own budget")
    max_concurrency: int = Field(default=4, ge=1, description="requests in flight at most")
    start_concurrency: int = Field(default=1, ge=1, description="requests in flight at first; adapts")
    timeout_s: float = Field(default=120.0, gt=0, description="seconds one request may take")
    max_retries: int = Field(default=4, ge=0, description="retries after a timeout, an outage, a 429 or a 5xx")
    max_repairs: int = Field(default=2, ge=0, description="repair requests after an unusable (invalid) reply")
    backoff_s: float = Field(default=1.0, ge=0, description="first wait before a retry (doubles); 0: at once")
    max_retry_after_s: float = Field(default=60.0, ge=0, description="longest Retry-After wait honoured")
    max_consecutive_failures: int = Field(
        default=12, ge=1, description="failed attempts in a row (timeouts, outages) before the role stops sending")
    tool_choice: Literal["auto", "required", "none"] | None = Field(
        default=None, description="sent with tool declarations; some servers only call tools when it is set")
    few_shot: bool = Field(
        default=False, description="policy roles in a text protocol: the system prompt shows a worked episode "
        "(data/policy/few_shot_episode.json) in the framework's format; small and base models follow it")
    structured_output: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema", description="the first response_format tried for JSON replies; falls back")
    extra_body: dict = Field(default_factory=dict)

    @field_validator("api_key_env")
    @classmethod
    def _key_is_a_secret(cls, name: str) -> str:
        """Whatever variable a role names holds a secret: `schemas.secrets.scrub` masks its value."""
        register_secret_env(name)
        return name

    @property
    def offline(self) -> bool:
        return self.base_url is None


class BeamOptions(_Config):
    """Apache Beam pipeline options passed through to the runner."""

    runner: str = "DirectRunner"
    direct_num_workers: int = Field(default=1, ge=0, description="DirectRunner workers; 0: one per CPU")
    direct_running_mode: Literal["in_memory", "multi_threading", "multi_processing"] = "in_memory"
    extra_args: list[str] = []


class ExtractConfig(_Config):
    dump: str | None = None
    index: str | None = None
    api_url: str | None = None
    api_titles: list[str] = []
    api_recent_days: int | None = Field(default=None, ge=1, le=30, description="list=recentchanges reaches 30 days")
    api_max_in_flight: int = Field(default=3, ge=1, le=8, description="API requests in flight per worker process")
    streams_per_unit: int = Field(default=10, ge=1, description="multistream bz2 streams per parallel read unit")
    as_of: PastDatetime | None = None
    window_days: int = Field(default=182, ge=1, description="days before as_of whose facts count as recent")
    max_page_bytes: int = Field(default=1_000_000, ge=1, description="larger pages are skipped as oversized")
    page_timeout_s: float = Field(default=5.0, gt=0, description="pages taking longer are skipped as timeout")
    output_shards: int = Field(default=4, ge=1, description="parquet shards per output table")


class WalkConfig(_Config):
    hops: list[Annotated[int, Field(ge=1, le=8)]] = Field(default=[2, 3, 4], min_length=1,
                                                          description="path lengths walked")
    walks_per_start: int = Field(default=24, ge=1)
    long_walk_growth: float = Field(default=3.0, ge=1.0, description="each hop beyond two multiplies walks_per_start "
                                    "by this: longer walks die and repeat more often (4 hops: 9x with the default)")
    max_paths: int | None = Field(default=None, ge=1, description="paths kept at most; None: all")
    hub_quantile: float = Field(default=0.98, ge=0.0, le=1.0, description="degree quantile above which a page is a hub")
    hub_min_degree: int = Field(default=50, ge=0, description="a hub (never an intermediate) has at least this "
                                "degree besides lying above hub_quantile: in a small slice the top pages are not hubs")
    min_out_degree: int = Field(default=1, ge=0)
    require_recent_fact: bool = True
    allow_literal_answers: bool = True
    seed: int = Field(default=0, ge=0)
    exclude_relations: list[str] | None = Field(
        default=None,
        description="edges never walked; None: the `walks = skip` rows of data/ontology/non_facts.tsv (weak lead "
        "links, infobox parameters that name or format the page, trivia), which the walk stage records here",
    )
    mapped_only: bool = Field(default=True, description="walk only relations mapped to an ontology property")
    as_of: PastDate | None = None
    window_days: int | None = Field(default=None, ge=1, description="recency window; default: the graph's manifest")
    step_retries: int = Field(default=8, ge=1, description="candidate edges tried per step before a walk dies")
    forbid_inverse_hop: bool = True
    forbid_repeated_relation: bool = True
    forbid_shortcut: bool = Field(default=True, description="no step to a node the start already reaches in as "
                                  "few hops: its question would have a shorter route (the fewer_hops gate)")
    require_single_answer: bool = True
    tree_share: float = Field(default=0.4, ge=0.0, le=1.0, description="share of walks that take, at a random "
                              "hop, an edge whose head has several objects for the relation, all pages with "
                              "facts: they become tree questions whose branches pick the entity reached")
    max_literal_chars: int = Field(default=40, ge=1, description="longer literal answers are rejected")
    starts_per_task: int = Field(default=256, ge=1, description="start nodes per Beam element")
    shards: int = Field(default=4, ge=1)

    @field_validator("hops")
    @classmethod
    def _hops_sorted(cls, hops: list[int]) -> list[int]:
        return sorted(set(hops))


class QuestionConfig(_Config):
    writer: LLMRole = Field(default_factory=LLMRole)
    shortcut: LLMRole | None = None
    shortcut_attempts: int = Field(default=4, ge=1, description="shortcut checker guesses per question")
    as_of: PastDate | None = None
    max_questions: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)
    leak_ngram: int = Field(default=8, ge=3, description="evidence n-gram length that counts as a leak")
    attributes_per_entity: int = Field(default=1, ge=0, description="attributes added to each obfuscated entity")
    describe_start: float = Field(default=1.0, ge=0.0, le=1.0,
                                  description="share of questions whose start entity is described, not named")
    start_attributes: int = Field(default=2, ge=2, description="fewest attributes (type included) describing a start")
    max_attributes: int = Field(default=3, ge=1, description="most attributes describing one entity or answer")
    one_search_top_k: int = Field(default=5, ge=0, description="the question as one search must not show the "
                                  "answer in this many results (0: gate off; needs the index)")
    reject_dominant_answer: bool = Field(default=True, description="reject answers that are the most common "
                                         "object of their final relation")
    max_answer_share: float = Field(default=0.02, gt=0.0, le=1.0,
                                    description="most questions of a run (share) with one answer")
    plan_attempts: int = Field(default=16, ge=1, le=32, description="plans tried per path until one passes the "
                               "plan and description gates: the lead's noun phrase, then class nouns, then "
                               "attributes drawn afresh")
    description_search_top_k: int | None = Field(default=None, ge=0, description="an intermediate's description "
                                                 "searched alone must not list it, nor a page stating the answer, in "
                                                 "this many results (default: one_search_top_k, the results an agent "
                                                 "reads; 0: gate off; needs the index)")
    start_description_search_top_k: int = Field(default=1, ge=0, description="the same for the start's description: "
                                                "the solve's first step, which must not find it first (an "
                                                "intermediate found in the top k skips the hops before it)")
    relation_answer_share: float = Field(default=0.10, gt=0.0, le=1.0, description="most questions (share) with "
                                         "one answer among those ending in the same relation")
    relation_answer_min: int = Field(default=10, ge=1, description="questions ending in one relation from which "
                                     "relation_answer_share applies")
    census: str | None = Field(default=None, description="a `hopsmith census` file of a full dump: a described "
                               "start must be unique at its scale (none: the start needs a named anchor)")
    require_named_anchor: bool = Field(default=True, description="a described start must be unique beyond the "
                                       "slice: by the census when given, else by a named anchor")
    world_prior: bool = Field(default=False, description="without a census, estimate the wiki's fits of a start's "
                              "description from the reviewed prior data/questions/world_holders.toml (strict: an "
                              "actor's dozens of films, a publisher's thousands of books) instead of requiring a "
                              "named anchor that is no hub")
    census_max_fits: float = Field(default=1.5, gt=0.0, description="most entities of the wiki (census or prior) "
                                   "estimated to fit a start's description")
    max_bare_run: int | None = Field(default=1, ge=0, description="most intermediates in a row stated only by "
                                     "their type ('directed by a person. This person studied at a university. "
                                     "This university ...'); None: no limit")
    fame_quantile: float = Field(default=0.9, ge=0.0, le=1.0, description="pages at or above this quantile of "
                                 "in-links are famous (see famous_keep)")
    famous_keep: float = Field(default=0.5, ge=0.0, le=1.0, description="share of paths kept whose start or answer "
                               "is famous (1: no long-tail weighting)")
    paths_per_unit: int = Field(default=32, ge=1, description="paths per resumable work unit")
    shards: int = Field(default=4, ge=1)

    @model_validator(mode="after")
    def _description_k_follows_one_search(self) -> QuestionConfig:
        """An agent reads the same results page for a description as for the question: unset, the description
        gate's k is the one-search gate's (k = 1 let an intermediate's description through whose entity ranked
        second, so that one search skipped the hops before it)."""
        if self.description_search_top_k is None:
            self.description_search_top_k = self.one_search_top_k
        return self


class IndexConfig(_Config):
    """How the local search index is built from a snapshot's pages."""

    chunk_chars: int = Field(default=1500, ge=200, description="most characters of one open_page chunk")
    title_weight: float = Field(default=2.0, ge=0.0, description="weight of the title/alias field in ranking")
    shard_pages: int = Field(default=5000, ge=1, description="pages per parquet shard of the index")
    page_timeout_s: float = Field(default=10.0, gt=0, description="cleaning a page longer than this skips it")


OFFLINE_ERROR_RATES = {
    "repeated_search": 0.05,
    "malformed_arguments": 0.04,
    "off_path_detour": 0.05,
    "unsupported_claim": 0.04,
    "premature_answer": 0.01,
}


class TrajectoryConfig(_Config):
    """Stage 3: which frameworks and policies solve each question, how long, and the offline error model.

    `error_rates` are per-turn probabilities of the scripted policy injecting each error kind.
    """

    frameworks: list[Literal["react", "function_calling", "tagged"]] = ["react", "function_calling", "tagged"]
    policies: dict[str, LLMRole] = Field(default_factory=dict, description="framework -> LLM role; offline when absent")
    rollouts: int = Field(default=2, ge=1)
    max_turns: int = Field(default=60, ge=1, le=10_000)
    keep_last_observations: int = Field(default=5, ge=0)
    keep_last_turns: int = Field(default=20, ge=1, description="turns shown in the prompt; older ones are folded")
    max_parse_failures: int = Field(default=3, ge=1, description="consecutive unparseable turns that end a run")
    search_top_k: int = Field(default=5, ge=1, description="results one search returns")
    error_rates: dict[str, Share] = Field(
        default_factory=lambda: dict(OFFLINE_ERROR_RATES), description="offline policy error kind -> rate"
    )
    questions_per_unit: int = Field(default=8, ge=1, description="questions in one resumable work unit")
    units_in_flight: int = Field(default=4, ge=1, description="work units a worker runs at once on one event loop")
    max_questions: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)


class DifficultyConfig(_Config):
    """The difficulty stage: each question's pass rate under one eval policy (`hopsmith eval`'s settings),
    solved `rollouts` times over the run's search index. The default, the offline searcher without injected
    errors, differs from the trajectories stage's rollouts, whose injected errors fail some of them."""

    enabled: bool = Field(default=True, description="measure the pass rates (off: no rate column, no RL selection)")
    policy: Literal["offline", "naive", "llm"] = "offline"
    framework: Literal["react", "function_calling", "tagged"] = "function_calling"
    role: LLMRole | None = Field(default=None, description="the LLM policy's endpoint (policy = llm)")
    rollouts: int = Field(default=4, ge=1, description="k: rollouts a question; the rate is correct ones / k")
    max_turns: int = Field(default=30, ge=1, le=10_000)
    search_top_k: int = Field(default=5, ge=1)
    questions_per_unit: int = Field(default=16, ge=1, description="questions in one resumable work unit")
    seed: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _llm_needs_a_role(self) -> DifficultyConfig:
        if self.policy == "llm" and self.role is None:
            raise ValueError("policy = llm needs [difficulty.role] with base_url and model")
        return self


class JudgeConfig(_Config):
    judge: LLMRole = Field(default_factory=LLMRole)
    thresholds: dict[str, Share] = Field(
        default_factory=lambda: {"tool_accuracy": 0.5, "information_gain": 0.2, "logical_soundness": 0.5}
    )
    weights: dict[str, Annotated[float, Field(ge=0.0)]] = Field(
        default_factory=lambda: {"tool_accuracy": 1.0, "information_gain": 1.0, "logical_soundness": 1.0}
    )
    failed_turns: Literal["mask", "penalty"] = "mask"
    loss_policy: Literal["critical", "verdict"] = Field(
        default="critical",
        description="which passing turns get loss 1 in the SFT renders: `critical` only those that moved the "
        "run toward the answer (ToolMind-Web-QA style), `verdict` every turn the critic passed",
    )
    failed_turn_reward: float = Field(default=-1.0, ge=-10.0, le=0.0, description="a penalty: at most 0")
    correct_outcome_reward: float = Field(default=1.0, ge=0.0, le=10.0)
    wrong_outcome_reward: float = Field(default=0.0, ge=-10.0, le=10.0)
    llm_context_turns: int = Field(default=6, ge=0, description="earlier turns the LLM judge sees with observations")
    llm_observation_chars: int = Field(default=2000, ge=0, description="observation characters quoted per turn")
    batch_size: int = Field(default=16, ge=1, description="trajectories per resumable work unit")
    repeat_window: int | None = Field(
        default=None, ge=1,
        description="only calls this many turns back count as repeats (None: all); set it to the policy's "
        "keep_last_observations when re-reading an elided observation is allowed",
    )

    @field_validator("thresholds", "weights")
    @classmethod
    def _one_value_per_criterion(cls, value: dict[str, float]) -> dict[str, float]:
        criteria = {"tool_accuracy", "information_gain", "logical_soundness"}
        if set(value) != criteria:
            raise ValueError(f"needs exactly the criteria {sorted(criteria)}, got {sorted(value)}")
        return value


class DatasetConfig(_Config):
    """`hopsmith dataset` / `make dataset`: every stage's config composed, as read from a TOML file.

    Top-level `seed` and `as_of` flow into every stage that has its own, unless the file sets that stage's
    value explicitly. With no dump and no API source the run uses the shipped sample.
    """

    out: str = "out"
    seed: int = Field(default=0, ge=0)
    as_of: PastDatetime | None = None
    name: str = Field(default="hopsmith-wiki-deepsearch", description="dataset name shown on the card")
    test_fraction: float = Field(default=0.1, ge=0.0, lt=1.0, description="share of questions in the test split")
    max_rows_per_shard: int = Field(default=2000, ge=1)
    max_shard_mb: int = Field(default=200, ge=1, description="about this many MB of text per shard at most")
    sft_only_correct: bool = Field(default=True, description="training renders only from correctly answered runs")
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    walk: WalkConfig = Field(default_factory=WalkConfig)
    questions: QuestionConfig = Field(default_factory=QuestionConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    trajectories: TrajectoryConfig = Field(default_factory=TrajectoryConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    difficulty: DifficultyConfig = Field(default_factory=DifficultyConfig)
    rl_pass_band: list[Share] | None = Field(
        default=None, min_length=2, max_length=2,
        description="the `rl` config keeps the questions whose pass rate lies in [LO, HI]; unset: strictly "
        "between 0 and 1 (GRPO groups with both outcomes)",
    )
    beam: BeamOptions = Field(default_factory=BeamOptions)

    @model_validator(mode="after")
    def _propagate_seed_and_as_of(self) -> DatasetConfig:
        for stage in (self.walk, self.questions, self.trajectories, self.difficulty):
            if "seed" not in stage.model_fields_set:
                stage.seed = self.seed
        if self.as_of is not None:
            if "as_of" not in self.extract.model_fields_set:
                self.extract.as_of = self.as_of
            for stage in (self.walk, self.questions):
                if "as_of" not in stage.model_fields_set:
                    stage.as_of = self.as_of.date()
        if self.rl_pass_band is not None and self.rl_pass_band[0] > self.rl_pass_band[1]:
            raise ValueError(f"rl_pass_band needs LO <= HI, got {list(self.rl_pass_band)}")
        return self
