"""The audit gate: refuse a judge whose audit says it should not be trained on.

`check(metrics, gate)` reads an audit's metrics (``metrics.json`` as the analysis stage or
`judgelab.audit` wrote it; nothing is recomputed) and returns one `Finding` per gated judge
and thresholded figure. Three figures can be gated, each by its own threshold and under one
name everywhere (the CLI's flags, the messages, docs/OPERATIONS.md):

* the primary (`analysis.primary`, on mixed groups; its own scale: signal fidelity is 1 for
  the tests and about 0.1 for the reference audit's best LLM judge) below ``fail_below``;
* ``false_praise_within_group`` (failing candidates of mixed tasks scored at or above a
  passing one of their task) above ``fail_above_praise_within_group``;
* ``false_praise_absolute`` (failing candidates scored at or above
  `analysis.praise_threshold`; metrics.json's ``false_praise_absolute``) above
  ``fail_above_praise_absolute``.

The gate compares the 95 % CI, not the point estimate. A figure *fails* only when its whole
CI lies on the wrong side of the threshold (``ci_high < fail_below``; ``ci_low >
fail_above_...``). It is *refused* (not passed) when the audit could not compute it, or when
it has no CI: it rests on fewer than `analysis.min_ci_groups` groups, so nothing says on
which side it lies. A CI that straddles the threshold *passes*, marked ``undecided`` so the
caller sees it could go either way. The gated judges are the evaluators named, each checked
against the metrics before anything else (a wrong name lists the valid ones), else every
evaluator audited against the truth (all but the truth itself).

`judgelab gate` (`judgelab_cli.gate`) prints one line per finding and exits with
`EXIT_GATE` (3) when any is not passed. The exit codes: `judgelab.errors.EXIT_CODES`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from judgelab.errors import ConfigError

# the gate's name of a figure is its key in metrics.json's `truth` section
PRAISE_WITHIN_GROUP = "false_praise_within_group"
PRAISE_ABSOLUTE = "false_praise_absolute"

Outcome = Literal["pass", "undecided", "fail", "unmeasured", "too_few_groups"]
REFUSED: frozenset[str] = frozenset({"fail", "unmeasured", "too_few_groups"})


@dataclass(frozen=True)
class Gate:
    fail_below: float | None = None  # the primary's threshold
    fail_above_praise_within_group: float | None = None
    fail_above_praise_absolute: float | None = None
    judges: tuple[str, ...] = ()  # empty: every evaluator audited against the truth

    def __post_init__(self) -> None:
        for flag, value in self.flags():
            if value is not None and not -1 <= value <= 1:
                raise ConfigError(f"{flag} {value}: must be between -1 and 1 (a figure's scale)")

    def flags(self) -> tuple[tuple[str, float | None], ...]:
        return (
            ("--fail-below", self.fail_below),
            ("--fail-above-praise-within-group", self.fail_above_praise_within_group),
            ("--fail-above-praise-absolute", self.fail_above_praise_absolute),
        )

    @property
    def active(self) -> bool:
        return any(value is not None for _, value in self.flags())

    def thresholds(self, primary: str) -> list[tuple[str, float, str]]:
        """(figure, threshold, the side it may not be on) for each threshold given."""
        wanted = ((primary, self.fail_below, "below"),
                  (PRAISE_WITHIN_GROUP, self.fail_above_praise_within_group, "above"),
                  (PRAISE_ABSOLUTE, self.fail_above_praise_absolute, "above"))  # fmt: skip
        return [(f, t, side) for f, t, side in wanted if t is not None]


@dataclass(frozen=True)
class Finding:
    judge: str
    figure: str
    threshold: float
    side: str  # "below" or "above": where the figure's CI may not lie
    outcome: Outcome
    value: float | None = None  # None: the audit could not compute it (`reason`)
    ci: tuple[float, float] | None = None
    n_groups: int | None = None
    reason: str | None = None

    @property
    def refused(self) -> bool:
        return self.outcome in REFUSED

    def message(self) -> str:
        gate = f"fail {self.side} {self.threshold:g}"
        if self.value is None:
            return (
                f"{self.judge}: {self.figure}: {self.reason}; unmeasured, so the gate "
                f"({gate}) does not pass it"
            )
        n = "" if self.n_groups is None else f" over {self.n_groups} groups"
        if self.ci is None:
            return (
                f"{self.judge}: {self.figure} {self.value:.3f}{n}, no CI to place it "
                f"({self.reason}); the gate ({gate}) does not pass a figure it cannot place"
            )
        where = {
            "fail": f"lies wholly {self.side}",
            "undecided": "straddles",
            "pass": "lies clear of",
        }[self.outcome]
        return (
            f"{self.judge}: {self.figure} {self.value:.3f}, 95 % CI "
            f"[{self.ci[0]:.3f}, {self.ci[1]:.3f}]{n} {where} {self.threshold:g}"
        )


def _figure(truth: dict[str, Any], name: str) -> tuple[float | None, Any, Any, Any]:
    value = truth.get(name)
    low, high = truth.get(f"{name}_ci_low"), truth.get(f"{name}_ci_high")
    ci = (float(low), float(high)) if low is not None and high is not None else None
    return (
        (None if value is None else float(value)),
        ci,
        truth.get(f"{name}_n_groups"),
        (truth.get(f"{name}_reason") or truth.get(f"{name}_ci_reason")),
    )


def judge_names(metrics: dict[str, Any], names: Sequence[str]) -> list[str]:
    """The judges to gate: `names`, each one the metrics audited against the truth (a
    ConfigError listing the valid names otherwise), else every such evaluator."""
    evaluators = metrics.get("evaluators", {})
    truth = (metrics.get("execution_truth") or {}).get("evaluator")
    audited = sorted(n for n, ev in evaluators.items() if ev.get("truth") and n != truth)
    for name in names:
        if name not in evaluators:
            raise ConfigError(
                f"--judge {name}: not an evaluator of this audit; judges to gate: {audited}"
            )
        if name not in audited:
            raise ConfigError(
                f"--judge {name}: has no figures against the truth (it is the truth, or the "
                f"audit has none); judges to gate: {audited}"
            )
    return list(names) or audited


def judge(
    name: str, truth: dict[str, Any], figure: str, threshold: float, side: str, min_ci_groups: int
) -> Finding:
    """One judge's figure against one threshold (module docstring)."""
    value, ci, n, reason = _figure(truth, figure)
    if value is None:
        why = reason or "the audit has no value for it"
        return Finding(name, figure, threshold, side, "unmeasured", reason=why)
    if ci is None or (n is not None and n < min_ci_groups):  # a CI below the minimum: not one
        why = reason or f"{n} groups, fewer than analysis.min_ci_groups = {min_ci_groups}"
        return Finding(name, figure, threshold, side, "too_few_groups", value, None, n, why)
    low, high = ci
    wrong = high < threshold if side == "below" else low > threshold
    clear = low >= threshold if side == "below" else high <= threshold
    outcome: Outcome = "fail" if wrong else "pass" if clear else "undecided"
    return Finding(name, figure, threshold, side, outcome, value, ci, n)


def check(metrics: dict[str, Any], gate: Gate) -> list[Finding]:
    """One `Finding` per gated judge and threshold given (module docstring)."""
    settings = metrics.get("settings", {})
    primary = settings.get("primary", "signal_fidelity")
    min_ci_groups = int(settings.get("min_ci_groups", 0))
    out: list[Finding] = []
    for name in judge_names(metrics, gate.judges):
        truth = metrics["evaluators"][name]["truth"] or {}
        for figure, threshold, side in gate.thresholds(primary):
            out.append(judge(name, truth, figure, threshold, side, min_ci_groups))
    return out


def metrics_path(path: Path) -> Path:
    """An audit's metrics.json: `path` itself, or the metrics.json in the folder it names
    (`judgelab audit --out`'s folder, data/analysis)."""
    path = Path(path)
    return path / "metrics.json" if path.is_dir() else path


def load_metrics(path: Path) -> dict[str, Any]:
    """The metrics an audit wrote (ConfigError naming the file when there are none)."""
    file = metrics_path(path)
    if not file.exists():
        raise ConfigError(
            f"{file} not found: no audit there to gate (run `judgelab analysis` or "
            "`judgelab audit` first, or point --metrics at an audit's metrics.json)"
        )
    try:
        metrics = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{file}: not an audit's metrics.json ({err})") from None
    if not isinstance(metrics, dict) or "evaluators" not in metrics:
        raise ConfigError(f"{file}: not an audit's metrics.json (no 'evaluators' section)")
    return metrics


def check_file(path: Path, gate: Gate) -> list[Finding]:
    """`check` on an audit's metrics.json (or the folder holding it)."""
    return check(load_metrics(path), gate)
