"""The audit gate: refuse a judge whose audit says it should not be trained on.

`check(metrics, gate)` reads the analysis metrics (``data/analysis/metrics.json``) and returns
one `Violation` per gated judge and figure on the wrong side of its threshold: the primary
(`analysis.primary`, on mixed groups) below ``fail_below``, or the false-praise rate (failing
code scored at or above `analysis.praise_threshold`) above ``fail_above_praise``. A figure the
audit could not compute (no mixed group, a judge that scored nothing) cannot show the judge is
fit, so the gate does not pass it. The gated judges are the evaluators given by name, else
every evaluator audited against the truth (all but the truth itself). The value compared is
the point estimate; the message gives its 95 % CI where there is one and the groups it rests
on, which are the caller's to weigh.

`judgelab analysis --fail-below X --fail-above-praise Y [--judge NAME ...]` calls it after the
stage and exits with `EXIT_GATE` (3) when the list is not empty, one line per violation. The
exit codes: `judgelab.errors.EXIT_CODES`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgelab.errors import ConfigError

PRAISE = "false_praise_rate"


@dataclass(frozen=True)
class Gate:
    fail_below: float | None = None  # the primary's threshold
    fail_above_praise: float | None = None  # the false-praise rate's
    judges: tuple[str, ...] = ()  # empty: every evaluator audited against the truth

    def __post_init__(self) -> None:
        for flag, value in (("--fail-below", self.fail_below),
                            ("--fail-above-praise", self.fail_above_praise)):  # fmt: skip
            if value is not None and not -1 <= value <= 1:
                raise ConfigError(f"{flag} {value}: must be between -1 and 1 (a figure's scale)")

    @property
    def active(self) -> bool:
        return self.fail_below is not None or self.fail_above_praise is not None


@dataclass(frozen=True)
class Violation:
    judge: str
    figure: str
    threshold: float
    side: str  # "below" or "above": where the figure may not be
    value: float | None  # None: the audit could not compute it (`reason`)
    ci: tuple[float, float] | None = None
    n_groups: int | None = None
    reason: str | None = None

    def message(self) -> str:
        if self.value is None:
            return (
                f"{self.judge}: {self.figure}: {self.reason}; unmeasured, so the gate "
                f"(fail {self.side} {self.threshold}) does not pass it"
            )
        ci = "" if self.ci is None else f", 95 % CI [{self.ci[0]:.3f}, {self.ci[1]:.3f}]"
        n = "" if self.n_groups is None else f" over {self.n_groups} groups"
        return (
            f"{self.judge}: {self.figure} {self.value:.3f}{ci}{n} is {self.side} {self.threshold}"
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


def gated_judges(metrics: dict[str, Any], names: Sequence[str]) -> list[str]:
    """The judges to gate: `names`, each one the metrics hold, else every evaluator with
    figures against the truth."""
    evaluators = metrics.get("evaluators", {})
    truth = (metrics.get("execution_truth") or {}).get("evaluator")
    audited = sorted(n for n, ev in evaluators.items() if ev.get("truth") and n != truth)
    for name in names:
        if name not in evaluators:
            raise ConfigError(
                f"--judge {name}: not an evaluator of this audit; evaluators: {sorted(evaluators)}"
            )
        if name not in audited:
            raise ConfigError(
                f"--judge {name}: has no figures against the truth (it is the truth, or the "
                f"audit has none); audited: {audited}"
            )
    return list(names) or audited


def check(metrics: dict[str, Any], gate: Gate) -> list[Violation]:
    """Every (judge, figure) the gate refuses (module docstring)."""
    primary = metrics.get("settings", {}).get("primary", "pairwise_accuracy_strict")
    out: list[Violation] = []
    for judge in gated_judges(metrics, gate.judges):
        truth = metrics["evaluators"][judge]["truth"] or {}
        for name, threshold, side in ((primary, gate.fail_below, "below"),
                                      (PRAISE, gate.fail_above_praise, "above")):  # fmt: skip
            if threshold is None:
                continue
            value, ci, n, reason = _figure(truth, name)
            if value is None:
                why = reason or "the audit has no value for it"
                out.append(Violation(judge, name, threshold, side, None, reason=why))
            elif (value < threshold) if side == "below" else (value > threshold):
                out.append(Violation(judge, name, threshold, side, value, ci, n))
    return out


def check_file(path: Path, gate: Gate) -> list[Violation]:
    """`check` on a metrics.json file."""
    if not Path(path).exists():
        raise ConfigError(f"{path} not found: the analysis stage wrote no metrics to gate")
    return check(json.loads(Path(path).read_text(encoding="utf-8")), gate)
