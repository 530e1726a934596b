"""pandera (polars) models of every table that crosses a stage boundary.

Each model is its table's one definition. `columns(Schema)` gives the polars column types, in
declared order, that a stage builds its frame with; `validate(frame, Schema, what)` checks every
row (lazy) and raises TableError whose message names the table, then each failure's column,
row index and value and the rule it breaks in words (a missing or unexpected column, a wrong
type), not pandera's check names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandera.polars as pa
import polars as pl
from pandera.errors import SchemaError, SchemaErrors

from judgelab.config.evaluators import PROTOCOLS
from judgelab.config.tasks import TASK_SOURCES
from judgelab.errors import TableError
from judgelab.verdicts import OUTCOMES

SOURCES = list(TASK_SOURCES)
STATUSES = ["scored", "unscored"]


class TasksSchema(pa.DataFrameModel):
    """Frozen coding tasks. HumanEval rows carry tests; AutoRL rows do not; your own
    (`files`, `judgelab.tasks.files`) may.

    `request` is the natural-language user turn the policy sees; `prompt` is the task's own
    text (for HumanEval, the function signature and docstring the tests import against).
    """

    task_id: str = pa.Field(unique=True, str_length={"min_value": 1})
    source: str = pa.Field(isin=SOURCES)
    request: str = pa.Field(str_length={"min_value": 1})
    prompt: str = pa.Field(str_length={"min_value": 1})
    entry_point: str = pa.Field(nullable=True)
    test: str = pa.Field(nullable=True)
    canonical_solution: str = pa.Field(nullable=True)

    @pa.dataframe_check(error="humaneval rows need entry_point and test")
    @classmethod
    def humaneval_has_tests(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(
            (pl.col("source") != "humaneval")
            | (pl.col("entry_point").is_not_null() & pl.col("test").is_not_null())
        )

    @pa.dataframe_check(error="a row with a test needs its entry_point")
    @classmethod
    def tests_name_their_function(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col("test").is_null() | pl.col("entry_point").is_not_null())

    class Config:
        strict = True
        coerce = False


class RolloutsSchema(pa.DataFrameModel):
    """k candidates per task from the policy, in the order they were sampled."""

    task_id: str
    sample_index: int = pa.Field(ge=0)
    candidate_id: str = pa.Field(unique=True, str_length={"min_value": 1})
    policy: str
    model_sha256: str
    seed: int
    messages_json: str
    completion: str
    finish_reason: str = pa.Field(nullable=True)
    completion_tokens: int = pa.Field(ge=0)
    latency_s: float = pa.Field(ge=0)
    cache_key: str

    class Config:
        strict = True


class ScoresSchema(pa.DataFrameModel):
    """One row per (task, candidate, evaluator, repeat). Unscored rows say why. A candidate_id
    belongs to one task: the analysis joins truth to scores on candidate_id alone."""

    run_id: str = pa.Field(str_length={"min_value": 1})
    task_id: str = pa.Field(str_length={"min_value": 1})
    candidate_id: str = pa.Field(str_length={"min_value": 1})
    evaluator: str = pa.Field(str_length={"min_value": 1})
    protocol: str = pa.Field(isin=list(PROTOCOLS))
    judge: str = pa.Field(nullable=True)
    repeat: int = pa.Field(ge=0)
    score: float = pa.Field(nullable=True, ge=0.0, le=1.0)
    raw_score: float = pa.Field(nullable=True)
    status: str = pa.Field(isin=STATUSES)
    out_of_range: bool
    reason: str = pa.Field(nullable=True)
    explanation: str = pa.Field(nullable=True)
    latency_s: float = pa.Field(ge=0.0)
    slot: int = pa.Field(nullable=True, ge=0)
    permutation: str = pa.Field(nullable=True)
    # what the tests said (OUTCOMES): on the execution protocol's rows, and only there
    outcome: str = pa.Field(nullable=True, isin=list(OUTCOMES))

    @pa.dataframe_check(
        error="status 'scored' needs a score; 'unscored' needs a reason and no score"
    )
    @classmethod
    def status_matches_score(cls, data: pa.PolarsData) -> pl.LazyFrame:
        scored = pl.col("status") == "scored"
        return data.lazyframe.select(
            pl.when(scored)
            .then(pl.col("score").is_not_null() & ~pl.col("score").is_nan())
            .otherwise(pl.col("score").is_null() & pl.col("reason").is_not_null())
        )

    @pa.dataframe_check(error="an execution row needs an outcome; any other row has none")
    @classmethod
    def outcome_on_execution_rows(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(
            (pl.col("protocol") == "execution") == pl.col("outcome").is_not_null()
        )

    @pa.dataframe_check(error="duplicate (task_id, candidate_id, evaluator, repeat)")
    @classmethod
    def one_row_per_key(cls, data: pa.PolarsData) -> pl.LazyFrame:
        key = ["task_id", "candidate_id", "evaluator", "repeat"]
        return data.lazyframe.select(~pl.struct(key).is_duplicated())

    @pa.dataframe_check(error="candidate_id under more than one task_id (ids must be unique)")
    @classmethod
    def candidate_in_one_task(cls, data: pa.PolarsData) -> pl.LazyFrame:
        # The analysis joins execution truth to judge scores on candidate_id alone.
        return data.lazyframe.select(pl.col("task_id").n_unique().over("candidate_id") == 1)

    class Config:
        strict = True


class HistorySchema(pa.DataFrameModel):
    """One row per (judge, epoch) of training: row e describes policy_e (0 = base)."""

    judge: str = pa.Field(str_length={"min_value": 1})
    epoch: int = pa.Field(ge=0)
    adapter: str
    groups: int = pa.Field(ge=0)
    groups_skipped: int = pa.Field(ge=0)
    samples: int = pa.Field(ge=0)
    reward_mean: float = pa.Field(nullable=True)
    reward_median: float = pa.Field(nullable=True)
    reward_std: float = pa.Field(nullable=True, ge=0.0)
    reward_iqr: float = pa.Field(nullable=True, ge=0.0)
    unscored_rate: float = pa.Field(ge=0.0, le=1.0)
    out_of_range_rate: float = pa.Field(ge=0.0, le=1.0)
    train_pass_rate: float = pa.Field(nullable=True, ge=0.0, le=1.0)
    heldout_pass_rate: float = pa.Field(nullable=True, ge=0.0, le=1.0)  # null: none tested
    heldout_n: int = pa.Field(ge=0)  # held-out samples the sandbox tested
    truth_unscored: int = pa.Field(ge=0)  # samples the sandbox could not test
    # samples the tests found faking a pass (null: from a checkpoint older than the count)
    forged: int = pa.Field(nullable=True, ge=0)
    completion_tokens_mean: float = pa.Field(ge=0.0)
    # within-group alignment of the trained groups (judgelab.training.alignment); the counts
    # are null only in rows resumed from checkpoints written before judgelab kept them
    alignment: float = pa.Field(nullable=True, ge=-1.0, le=1.0)
    alignment_ci_low: float = pa.Field(nullable=True)
    alignment_ci_high: float = pa.Field(nullable=True)
    alignment_p: float = pa.Field(nullable=True, gt=0.0, le=1.0)
    alignment_groups: int = pa.Field(nullable=True, ge=0)
    alignment_informative: int = pa.Field(nullable=True, ge=0)
    alignment_samples: int = pa.Field(nullable=True, ge=0)
    rank_corr: float = pa.Field(nullable=True, ge=-1.0, le=1.0)
    rank_corr_ci_low: float = pa.Field(nullable=True)
    rank_corr_ci_high: float = pa.Field(nullable=True)
    rank_corr_groups: int = pa.Field(nullable=True, ge=0)
    loss: float = pa.Field(nullable=True)
    grad_norm: float = pa.Field(nullable=True, ge=0.0)
    clip_fraction: float = pa.Field(nullable=True, ge=0.0, le=1.0)
    ratio_mean: float = pa.Field(nullable=True, ge=0.0)
    rollout_s: float = pa.Field(ge=0.0)
    score_s: float = pa.Field(ge=0.0)
    step_s: float = pa.Field(ge=0.0)
    heldout_s: float = pa.Field(ge=0.0)
    # null only in rows resumed from checkpoints written before judgelab recorded them
    dtype: str = pa.Field(nullable=True, isin=["bfloat16", "float32"])
    device: str = pa.Field(nullable=True)
    # the alarm's e-process after this epoch, and the alarm: evalue >= 1 / train.alarm_alpha
    # by this epoch (null: a table written before the alarm existed; see `upgrade`)
    evalue: float = pa.Field(nullable=True, ge=0.0)
    reward_hacking: bool = pa.Field(nullable=True)
    reward_pass_divergence: bool  # descriptive: the old adjacent-epoch rule (not an alarm)

    @pa.dataframe_check(error="duplicate (judge, epoch)")
    @classmethod
    def one_row_per_epoch(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(~pl.struct(["judge", "epoch"]).is_duplicated())

    class Config:
        strict = True


PROBES = ["calibration", "self_preference"]
MEMBER_KINDS = ["canonical", "mutant", "non_answer", "sample", "perturbed", "attacked"]


class ProbeCandidatesSchema(pa.DataFrameModel):
    """Every candidate the bias probes show a judge: one row per (group, candidate)."""

    group_id: str = pa.Field(str_length={"min_value": 1})
    probe: str = pa.Field(isin=PROBES)
    task_id: str = pa.Field(str_length={"min_value": 1})
    candidate_id: str = pa.Field(str_length={"min_value": 1})
    base_id: str = pa.Field(str_length={"min_value": 1})
    kind: str = pa.Field(isin=MEMBER_KINDS)
    variant: str = pa.Field(nullable=True)
    policy: str = pa.Field(nullable=True)
    policy_family: str = pa.Field(nullable=True)
    passed: bool = pa.Field(nullable=True)
    completion: str

    @pa.dataframe_check(error="duplicate (group_id, candidate_id)")
    @classmethod
    def one_row_per_key(cls, data: pa.PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(~pl.struct(["group_id", "candidate_id"]).is_duplicated())

    class Config:
        strict = True


class TrainingSamplesSchema(pa.DataFrameModel):
    """Every sample drawn during training: its judge reward (train split) and test verdict."""

    judge: str = pa.Field(str_length={"min_value": 1})
    epoch: int = pa.Field(ge=0)
    split: str = pa.Field(isin=["train", "heldout"])
    task_id: str
    candidate_id: str
    sample_index: int = pa.Field(ge=0)
    reward: float = pa.Field(nullable=True, ge=0.0, le=1.0)
    status: str = pa.Field(nullable=True, isin=STATUSES)
    passed: float = pa.Field(nullable=True, isin=[0.0, 1.0])  # null: the sandbox could not test
    completion_tokens: int = pa.Field(ge=0)
    finish_reason: str
    # train split: the GRPO group's index within its epoch (null: held-out, or a table written
    # before it was kept, where (epoch, task_id) is the group)
    group: int = pa.Field(nullable=True, ge=0)
    # the seed the sample was drawn with: two rows of one task with the same seed are one
    # draw (or, from two policies, draws on the same uniforms), which the held-out MDE counts
    # once (null: a table written before it was kept, when every training seed drew the same)
    draw_seed: int = pa.Field(nullable=True, ge=0)

    class Config:
        strict = True


class ProbeScoresSchema(ScoresSchema):
    """A scores row (ScoresSchema) plus where it sits in the probe design: one row per
    (group, view, candidate, evaluator, repeat)."""

    group_id: str = pa.Field(str_length={"min_value": 1})
    probe: str = pa.Field(isin=PROBES)
    view: str = pa.Field(str_matches=r"^(perm|pert|atk):[A-Za-z0-9_]+$")
    base_id: str = pa.Field(str_length={"min_value": 1})
    treated: bool
    kind: str = pa.Field(isin=MEMBER_KINDS)
    variant: str = pa.Field(nullable=True)
    policy: str = pa.Field(nullable=True)
    policy_family: str = pa.Field(nullable=True)
    passed: bool = pa.Field(nullable=True)
    judge_family: str = pa.Field(nullable=True)

    @pa.dataframe_check(error="duplicate (group_id, view, candidate_id, evaluator, repeat)")
    @classmethod
    def one_row_per_key(cls, data: pa.PolarsData) -> pl.LazyFrame:
        key = ["group_id", "view", "candidate_id", "evaluator", "repeat"]
        return data.lazyframe.select(~pl.struct(key).is_duplicated())

    class Config:
        strict = True


class ProbeCallsSchema(pa.DataFrameModel):
    """What every probe judge call cost: one row per attempt (a retry is a row of its own),
    filed under the view it scored; ``candidate_id`` only for pointwise judges."""

    evaluator: str = pa.Field(str_length={"min_value": 1})
    group_id: str = pa.Field(str_length={"min_value": 1})
    view: str = pa.Field(str_matches=r"^(perm|pert|atk):[A-Za-z0-9_]+$")
    repeat: int = pa.Field(ge=0)
    candidate_id: str = pa.Field(nullable=True)
    attempt: int = pa.Field(ge=0)
    cached: bool
    ok: bool
    prompt_tokens: int = pa.Field(nullable=True, ge=0)
    completion_tokens: int = pa.Field(nullable=True, ge=0)
    reply_latency_s: float = pa.Field(nullable=True, ge=0)

    class Config:
        strict = True


SCHEMAS: dict[str, type[pa.DataFrameModel]] = {
    "tasks": TasksSchema,
    "rollouts": RolloutsSchema,
    "scores": ScoresSchema,
    "history": HistorySchema,
    "training_samples": TrainingSamplesSchema,
    "probe_candidates": ProbeCandidatesSchema,
    "probe_scores": ProbeScoresSchema,
    "probe_calls": ProbeCallsSchema,
}


def columns(schema: type[pa.DataFrameModel]) -> pl.Schema:
    """The polars schema of `schema`'s table: its columns in declared order, with their dtypes.
    A stage builds its table with `pl.DataFrame(rows, schema=columns(Schema))`, so the model is
    the one definition of names, order and types (nullability stays the model's to check)."""
    return pl.Schema({name: col.dtype.type for name, col in schema.to_schema().columns.items()})


# pandera's name for each built-in check -> the same rule in words (a custom check's error
# text is written in words already and is shown as it is).
_CHECK_WORDS = (
    (r"greater_than_or_equal_to\((.*)\)", "must be at least {0}"),
    (r"less_than_or_equal_to\((.*)\)", "must be at most {0}"),
    (r"greater_than\((.*)\)", "must be greater than {0}"),
    (r"less_than\((.*)\)", "must be less than {0}"),
    (r"in_range\((.*), (.*)\)", "must be between {0} and {1}"),
    (r"isin\((.*)\)", "must be one of {0}"),
    (r"notin\((.*)\)", "must not be one of {0}"),
    (r"str_matches\((.*)\)", "must match the pattern {0}"),
    (r"str_length\(1, None\)", "must not be empty"),
    (r"str_length\((\d+), None\)", "must be at least {0} characters long"),
    (r"str_length\(None, (\d+)\)", "must be at most {0} characters long"),
    (r"str_length\((\d+), (\d+)\)", "must be {0} to {1} characters long"),
    (r"not_nullable", "must have a value (it is null)"),
    (r"field_uniqueness|unique", "must be unique (another row has the same value)"),
)
ROW_CHARS = 100  # of a failing row shown beside a table-wide rule


def _in_words(check: str) -> str:
    for pattern, words in _CHECK_WORDS:
        if m := re.fullmatch(pattern, check):
            return words.format(*m.groups())
    return check


def _failure(row: dict[str, Any], missing: bool) -> str | None:
    """One failure case of pandera's table as a line: the column, the row, the rule in words
    and the value. None for the errors a missing column sets off in the table-wide checks."""
    check, value, index = str(row.get("check")), row.get("failure_case"), row.get("index")
    column = row.get("column")
    table_wide = row.get("schema_context") == "DataFrameSchema"
    if check == "column_in_dataframe":
        return f"missing column {value!r}"
    if check == "column_in_schema":
        return f"unexpected column {value!r} (not part of this table)"
    if m := re.fullmatch(r"dtype\('?(.*?)'?\)", check):
        return f"column {column!r} has type {value}, expected {m.group(1)}"
    if table_wide:
        if index is None:
            return None if missing else f"{check}: {value}"
        shown = str(value)
        shown = shown if len(shown) <= ROW_CHARS else shown[:ROW_CHARS] + "..."
        return f"row {index}: {check} (row: {shown})"
    where = f"row {index}" if index is not None else "every row"
    shown = "" if check == "not_nullable" else f" (value: {value!r})"
    return f"column {column!r}, {where}: {_in_words(check)}{shown}"


def _describe(err: SchemaErrors | SchemaError, what: str) -> str:
    """The table, then each failure: the column and row, the rule broken, in words, and the
    value (the first 20)."""
    lines = [f"{what} failed validation:"]
    cases = getattr(err, "failure_cases", None)
    if isinstance(cases, pl.DataFrame) and cases.height:
        rows = list(cases.iter_rows(named=True))
        missing = any(r.get("check") == "column_in_dataframe" for r in rows)
        found = [line for r in rows if (line := _failure(r, missing)) is not None]
        lines += [f"  - {line}" for line in found[:20]]
        if len(found) > 20:
            lines.append(f"  ... and {len(found) - 20} more failures")
    else:
        lines.append(f"  - {err}")
    return "\n".join(lines)


def validate(frame: pl.DataFrame, schema: type[pa.DataFrameModel], what: str) -> pl.DataFrame:
    """Validate every row of `frame`; raise TableError naming columns and rows on failure."""
    if not isinstance(frame, pl.DataFrame):
        raise TableError(f"{what} is not a table (got {type(frame).__name__})")
    try:
        return schema.validate(frame, lazy=True)
    except (SchemaErrors, SchemaError) as err:
        raise TableError(_describe(err, what)) from None


def read_table(path: Path | str) -> pl.DataFrame:
    """Read a parquet or CSV table, with a clear error when it is not one."""
    path = Path(path)
    if not path.exists():
        raise TableError(f"{path}: no such file")
    try:
        if path.suffix == ".csv":
            return pl.read_csv(path)
        return pl.read_parquet(path)
    except Exception as err:  # polars raises several unrelated types here
        raise TableError(
            f"{path}: not a readable parquet/CSV table ({err.__class__.__name__}: {err})"
        ) from None


def upgrade(frame: pl.DataFrame, kind: str) -> pl.DataFrame:
    """A training table written before its newer columns existed, with them added as null
    (their values were never measured) in the schema's order. A history whose `reward_hacking`
    was the old adjacent-epoch rule keeps it as `reward_pass_divergence`, and the alarm is
    null. Any other table, or one with every column, is returned as it is."""
    schema = SCHEMAS[kind]
    if kind not in ("history", "training_samples"):
        return frame
    old_rule = "reward_hacking" in frame.columns and "reward_pass_divergence" not in frame.columns
    if kind == "history" and old_rule:
        frame = frame.rename({"reward_hacking": "reward_pass_divergence"})
    types = dict(columns(schema))
    added = [pl.lit(None, dtype=types[c]).alias(c) for c in types if c not in frame.columns]
    return frame.with_columns(added).select(list(types)) if added else frame


def validate_file(path: Path | str, kind: str) -> pl.DataFrame:
    if kind not in SCHEMAS:
        raise TableError(f"unknown table kind {kind!r}; valid: {sorted(SCHEMAS)}")
    return validate(upgrade(read_table(path), kind), SCHEMAS[kind], f"{kind} table {path}")
