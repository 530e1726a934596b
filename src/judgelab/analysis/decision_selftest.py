"""A self-test of the decision itself: planted judge sets through the real decision code.

Each simulated audit draws `n_tasks` tasks of k candidates (`selftest.simulate_groups`: each
task its own pass rate, so some tasks are mixed and some are not) and four planted judges
(`selftest.Planted`) score them:
- `a` and `a twin`: planted alike (their true difference is 0);
- `b`: planted below `a` by a gap in true signal fidelity equal to the margin
  (`analysis.margin`), found by bisection on its signal over `truth_tasks` simulated tasks;
- `blind`: no signal (true signal fidelity 0), scores that still vary.
The audit's figures come from the real per-task sums (`fidelity.task_parts` through
`selftest.judge_parts`), rule 1 from `inference.ratio_above` with Holm over the four judges
(as `rulebook` runs it), the pairs from `power.compare` and `power.verdicts` (Holm over the six
pairs, TOST at the margin), and the verdict from `decision.decide` on the metrics these make.

Per number of tasks it reports the share of audits in which:
- `blind_passes_rule_1`: the blind judge is shown above chance (the rule's error; its level
  is alpha / 2 one-sided, so at most 0.025), and `blind_named`: it is the judge to use or a
  contender;
- `twins_called_different`: `a` and `a twin` are separated (at most alpha: Holm over the six
  pairs bounds every false separation together), `twins_equivalent`: shown equivalent (the
  equivalence verdict's power when the truth is 0);
- `gap_found`: `a` is separated above `b` (the power at a true gap of the margin),
  `gap_called_equivalent`: `a` and `b` are called equivalent (the equivalence verdict's error:
  at most alpha when the true gap is exactly the margin).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from judgelab.analysis.decision import decide
from judgelab.analysis.inference import holm, ratio_above
from judgelab.analysis.power import compare, verdicts
from judgelab.analysis.selftest import Planted, judge_parts, simulate_groups, true_values
from judgelab.analysis.stats import CI_LEVEL, CIRule
from judgelab.config import AnalysisSettings, PowerSettings

KEY = "signal_fidelity"
BASE = Planted(signal=0.3, noise=0.3, levels=10, skill_sd=0.2)
BLIND = Planted(signal=0.0, noise=0.3, levels=10)


@dataclass(frozen=True)
class DecisionSelftestSettings:
    audits: int = 200
    tasks: tuple[int, ...] = (164, 1000)
    k: int = 4
    margin: float = AnalysisSettings.model_fields["margin"].default
    truth_tasks: int = 20000
    seed: int = 0


def _signal_fidelity(judge: Planted, k: int, n: int, seed: int) -> float:
    return true_values(judge, k, n, np.random.default_rng(seed))[KEY]


def planted_gap(settings: DecisionSelftestSettings) -> tuple[Planted, float, float]:
    """`b` (BASE with a lower signal) whose true signal fidelity lies `margin` below BASE's,
    by the secant method on the signal (signal fidelity is smooth in it); with BASE's and
    b's true values (the gap reached is reported beside the shares)."""
    k, n, seed = settings.k, settings.truth_tasks, settings.seed

    def value(signal: float) -> float:
        return _signal_fidelity(Planted(**{**BASE.__dict__, "signal": signal}), k, n, seed)

    top = value(BASE.signal)
    target = top - settings.margin
    (s0, v0), s1 = (BASE.signal, top), 0.7 * BASE.signal
    v1 = value(s1)
    for _ in range(3):
        if abs(v1 - target) < 1e-3 or v1 == v0:
            break
        s0, v0, s1 = s1, v1, s1 + (target - v1) * (s1 - s0) / (v1 - v0)
        v1 = value(s1)
    return Planted(**{**BASE.__dict__, "signal": s1}), top, v1


def audit_metrics(parts: dict[str, Any], margin: float, rule: CIRule) -> dict[str, Any]:
    """The metrics dict `decide` reads, from the planted judges' per-task parts."""
    knobs = PowerSettings()
    ends = {n: (p.signal.fid_num, p.signal.fid_den) for n, p in parts.items()}
    chance = {n: ratio_above(*e, 0.0, rule.min_ci_groups) for n, e in ends.items()}
    names = sorted(parts)
    adjusted = dict(zip(names, holm([1.0 if chance[n][2] is None else chance[n][2]
                                     for n in names]), strict=True))  # fmt: skip
    book = {n: {"chance": {"value": chance[n][1], "n": chance[n][0], "p": chance[n][2],
                           "p_holm": adjusted[n], "rejects": not adjusted[n] < knobs.alpha / 2}}
            for n in names}  # fmt: skip
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(names, 2):
        pairs.setdefault(a, {})[b] = compare(ends[a], ends[b], knobs, rule, True, margin)
    verdicts([p for bs in pairs.values() for p in bs.values() if p["p_value"] is not None],
             knobs, margin)  # fmt: skip
    evaluators = {n: {"protocol": "planted", "truth": {KEY: chance[n][1]}} for n in names}
    return {"evaluators": evaluators, "rulebook": {"judges": book},
            "power": {"endpoint": KEY, "pairs": pairs, "margin": margin},
            "settings": {"primary": KEY}, "execution_truth": {"n_tasks_with_truth": 1}}  # fmt: skip


def _tally(metrics: dict[str, Any]) -> dict[str, bool]:
    d = decide(metrics)
    pairs = metrics["power"]["pairs"]
    twins, gap = pairs["a"]["a twin"], pairs["a"]["b"]
    return {
        "blind_passes_rule_1": not metrics["rulebook"]["judges"]["blind"]["chance"]["rejects"],
        "blind_named": d["judge"] == "blind" or "blind" in d["contenders"],
        "twins_called_different": bool(twins["separated"]),
        "twins_equivalent": bool(twins["equivalent"]),
        "gap_found": bool(gap["separated"]) and gap["difference"] > 0,
        "gap_called_equivalent": bool(gap["equivalent"]),
    }


def run_decision_selftest(settings: DecisionSelftestSettings) -> dict[str, Any]:
    """The shares of the module docstring, per number of tasks, with the planted values."""
    b, top, bottom = planted_gap(settings)
    judges = {"a": BASE, "a twin": BASE, "b": b, "blind": BLIND}
    rule = CIRule(AnalysisSettings().min_ci_groups, 0, settings.seed, CI_LEVEL)
    rows = []
    for n in settings.tasks:
        rng = np.random.default_rng([settings.seed, n])
        counts: dict[str, int] = {}
        for _ in range(settings.audits):
            passed = simulate_groups(n, settings.k, rng)
            parts = {name: judge_parts(j, passed, rng) for name, j in judges.items()}
            for key, hit in _tally(audit_metrics(parts, settings.margin, rule)).items():
                counts[key] = counts.get(key, 0) + int(hit)
        rows.append({"tasks": n, "audits": settings.audits,
                     **{key: c / settings.audits for key, c in counts.items()}})  # fmt: skip
    return {"rows": rows,
            "planted": {"a": top, "b": bottom, "gap": top - bottom, "blind": 0.0,
                        "b_signal": b.signal},
            "settings": {**settings.__dict__, "tasks": list(settings.tasks),
                         "alpha": PowerSettings().alpha}}  # fmt: skip
