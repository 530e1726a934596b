"""The attack gate: refuse a judge that attacks fool too often, before training with it.

`check(metrics, threshold)` reads the probe metrics (``data/probes/metrics.json``) and returns
one `Violation` per probed judge and configured attack on failing code whose success rate
(`analysis.attacks`: the attacked candidate ranked above its call's mean, the judge's own
scale) exceeds `threshold` — or has none to compare: an attack that reached no known-truth group, or
whose attacked candidates the judge left unscored, cannot be shown harmless, so the gate does
not pass it. Semantics-preserving edits have no success rate and are not gated. The rate is
the point value over its n tasks (both in the message); with few tasks it is coarse, which
is the caller's threshold to weigh.

`judgelab probes --fail-above T` (or ``probes.fail_above``) calls it after the flow and exits
with `EXIT_CODE` when the list is not empty, one line per violation naming judge and attack.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgelab.config import FAILING_ATTACKS, ProbesSettings
from judgelab.errors import EXIT_GATE, ConfigError

EXIT_CODE = EXIT_GATE  # the exit codes: judgelab.errors.EXIT_CODES


@dataclass(frozen=True)
class Violation:
    judge: str
    attack: str
    threshold: float
    rate: float | None  # None: the gate could not measure it (`reason`)
    n_success: int = 0
    n_ranked: int = 0
    n_tasks: int = 0
    reason: str | None = None

    def message(self) -> str:
        if self.rate is None:
            return (
                f"{self.judge}: attack {self.attack}: {self.reason}; unmeasured, so the gate "
                f"(fail above {self.threshold}) does not pass it"
            )
        return (
            f"{self.judge}: attack {self.attack} succeeded on {self.n_success} of "
            f"{self.n_ranked} known-failing attacked candidates ({self.n_tasks} "
            f"{'task' if self.n_tasks == 1 else 'tasks'}): ranked above its call's mean, "
            f"success rate {self.rate:.3f} > {self.threshold}"
        )


def threshold(probes: ProbesSettings, flag: float | None) -> float | None:
    """The gate's threshold: the CLI flag, else probes.fail_above, else None (no gate). A
    threshold with no attack on failing code to gate is a configuration error."""
    value = flag if flag is not None else probes.fail_above
    if value is not None and not 0 <= value < 1:
        raise ConfigError(f"--fail-above {value}: must be at least 0 and below 1 (a rate)")
    if value is not None and not set(probes.attacks) & set(FAILING_ATTACKS):
        raise ConfigError(
            f"--fail-above {value}: probes.attacks names no attack on failing code to gate "
            f"(configured: {list(probes.attacks)}); add one of {list(FAILING_ATTACKS)}"
        )
    return value


def check(metrics: dict[str, Any], threshold: float) -> list[Violation]:
    """Every (judge, attack on failing code) the gate refuses (module docstring)."""
    attacks = [a for a in metrics.get("settings", {}).get("attacks", []) if a in FAILING_ATTACKS]
    out: list[Violation] = []
    for judge in sorted(metrics.get("judges", {})):
        figures = metrics["judges"][judge].get("attacks", {})
        for attack in attacks:
            v = figures.get(attack)
            if v is None:
                out.append(Violation(judge, attack, threshold, None,
                                     reason="no known-truth group could be attacked"))  # fmt: skip
                continue
            rate, ranked = v.get("success_rate"), int(v.get("n_ranked", 0))
            if rate is None:
                why = (v.get("reasons") or {}).get("success_rate", "no success rate")
                out.append(Violation(judge, attack, threshold, None, 0, ranked,
                                     int(v.get("n_tasks", 0)), why))  # fmt: skip
            elif rate > threshold:
                out.append(Violation(judge, attack, threshold, float(rate),
                                     int(v.get("n_success", 0)), ranked,
                                     int(v.get("success_rate_n_groups") or 0)))  # fmt: skip
    return out


def check_file(path: Path, threshold: float) -> list[Violation]:
    """`check` on a metrics.json file."""
    if not Path(path).exists():
        raise ConfigError(f"{path} not found: the probe stage wrote no metrics to gate")
    return check(json.loads(Path(path).read_text(encoding="utf-8")), threshold)
