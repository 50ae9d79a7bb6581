"""The contract between hopsmith's stages: every record that crosses a stage boundary, and the run config."""

from schemas.base import SCHEMA_VERSION, Record, arrow_schema, from_row, from_table, to_row, to_table, utc
from schemas.critic import CRITERIA, CriterionScore, JudgedTrajectory, TurnJudgement
from schemas.manifest import InputFile, Manifest
from schemas.questions import Path, PathHop, Question
from schemas.trajectory import Outcome, ToolCall, Trajectory, Turn
from schemas.wiki import Entity, Page, Provenance, Qualifier, Relation, SkippedRecord

__all__ = [
    "CRITERIA",
    "SCHEMA_VERSION",
    "CriterionScore",
    "Entity",
    "InputFile",
    "JudgedTrajectory",
    "Manifest",
    "Outcome",
    "Page",
    "Path",
    "PathHop",
    "Provenance",
    "Qualifier",
    "Question",
    "Record",
    "Relation",
    "SkippedRecord",
    "ToolCall",
    "Trajectory",
    "Turn",
    "TurnJudgement",
    "arrow_schema",
    "from_row",
    "from_table",
    "to_row",
    "to_table",
    "utc",
]
