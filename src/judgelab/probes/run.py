"""Scoring the probe views through the product's evaluator code, and the probe tables.

Every judge call goes through the evaluator registry and `judgelab.scoring.score_group`,
exactly as in the scores stage. Two settings of the judge are changed, and only for the probes: the
evaluator does not shuffle (the view fixes the order, so ``slot`` is the position in the view)
and the judge temperature is ``probes.temperature`` (0 by default) for the order,
perturbation and attack views, ``probes.repeat_temperature`` for the repeats of the identity
view that measure the noise floor (`ProbeJudge`). The temperature is part of every judge-call
cache key, so a view at one temperature never replays a reply sampled at another. Rows keep
the evaluator's name, so probe figures line up with the audit's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from judgelab.cache import JsonCache, digest
from judgelab.config import PRICE_KEYS, ProbesSettings, RolloutSettings, Settings
from judgelab.config.evaluators import EvaluatorSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Evaluator
from judgelab.models.endpoint import Endpoint
from judgelab.probes.attacks import attack_views, run_id_settings
from judgelab.probes.design import ProbeGroup, View
from judgelab.rollouts.generate import generate_group
from judgelab.schemas import ProbeCandidatesSchema, ProbeScoresSchema, columns, validate
from judgelab.scoring import score_group
from judgelab.verdicts import Task


def require_judges(settings: Settings) -> None:
    """The probes need at least one judge to probe."""
    if not settings.probes.judges:
        raise ConfigError(
            "probes.judges is empty: name the RULER/rubric evaluators to probe, e.g. "
            f"{[e.name for e in settings.scores.evaluators if e.judge_model is not None]}"
        )


def probe_spec(spec: Any, temperature: float) -> Any:
    """The judge's settings as the probes use them: the view's order, the probe temperature."""
    call = spec.call.model_copy(update={"temperature": temperature})
    return spec.in_given_order().model_copy(update={"call": call})


def probe_specs(settings: Settings) -> list[Any]:
    """Every probed judge's settings for the order and perturbation views."""
    return [
        probe_spec(settings.evaluator(name), settings.probes.temperature)
        for name in settings.probes.judges
    ]


def view_temperature(probes: ProbesSettings, view: View) -> float:
    """Order and perturbation views at probes.temperature; the repeats of the identity view
    (repeat >= 1) at probes.repeat_temperature."""
    return probes.repeat_temperature if view.repeat else probes.temperature


class ProbeJudge:
    """One probed judge as the views call it: an evaluator per temperature its views run at,
    built on first use by `build(spec)` (e.g. the registry's `build_evaluator` with the
    endpoints and the judge cache)."""

    def __init__(
        self,
        spec: EvaluatorSettings,
        probes: ProbesSettings,
        build: Callable[[EvaluatorSettings], Evaluator],
    ) -> None:
        self.name: str = spec.name
        self.probes = probes
        self._spec = spec
        self._build = build
        self._built: dict[float, Evaluator] = {}

    def for_view(self, view: View) -> Evaluator:
        """The evaluator for this view (its settings: `.spec`)."""
        t = view_temperature(self.probes, view)
        if t not in self._built:
            self._built[t] = self._build(probe_spec(self._spec, t))
        return self._built[t]


def run_id_for(settings: Settings, groups: list[ProbeGroup]) -> str:
    ids = sorted(m.candidate.candidate_id for g in groups for m in g.members)
    specs = [s.model_dump(mode="json") for s in probe_specs(settings)]
    models = {
        s["judge"]: settings.models[s["judge"]].model_dump(mode="json", exclude=set(PRICE_KEYS))
        for s in specs
    }
    return digest({"probes": run_id_settings(settings.probes), "specs": specs,
                   "models": models, "candidates": ids})[:12]  # fmt: skip


def policy_samples(
    settings: Settings, tasks: list[Task], endpoints: dict[str, Endpoint], cache: JsonCache
) -> dict[str, list[tuple[str, str, str]]]:
    """task id -> (policy, family, completion) from every self-preference policy, through the
    rollout code and its cache (the policy's sampling settings are those of `rollouts`).

    Policy by policy, so the embedded server loads each model once; the first judge's model
    goes last and stays loaded for the first judge calls."""
    out: dict[str, list[tuple[str, str, str]]] = {t.task_id: [] for t in tasks}
    policies = settings.self_preference_policies()
    first_judge = settings.models_called("probes")[0]
    for name in sorted(policies, key=lambda p: p == first_judge):
        rollout = RolloutSettings(
            **{
                **settings.rollouts.model_dump(),
                "policy": name,
                "k": settings.probes.samples_per_policy,
            }  # fmt: skip
        )
        for task in tasks:
            for row in generate_group(rollout, task, endpoints[name], cache):
                out[task.task_id].append((name, settings.models[name].family, row["completion"]))
    # Members in registry order, whatever the order they were written in.
    rank = {p: i for i, p in enumerate(policies)}
    return {t: sorted(rows, key=lambda r: rank[r[0]]) for t, rows in out.items()}


def score_view(
    run_id: str,
    evaluator: Evaluator,
    judge_family: str | None,
    group: ProbeGroup,
    view: View,
) -> list[dict[str, Any]]:
    """Rows for one (judge, group, view): scores columns plus the probe design columns."""
    shown = view.shown(group)
    rows = score_group(run_id, evaluator, group.task, [m.candidate for _, m in shown], view.repeat)
    for row, (i, member) in zip(rows, shown, strict=True):
        row.update(
            group_id=group.group_id,
            probe=group.probe,
            view=view.name,
            base_id=group.members[i].candidate.candidate_id,
            treated=i in view.replaced,
            kind=member.kind,
            variant=member.variant,
            policy=member.policy,
            policy_family=member.policy_family,
            passed=member.passed,
            judge_family=judge_family,
        )
    return rows


def probe_scores_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=columns(ProbeScoresSchema)).sort(
        ["evaluator", "group_id", "view", "repeat", "slot"]
    )
    return validate(frame, ProbeScoresSchema, "probe scores table")


def candidates_frame(groups: list[ProbeGroup], views: dict[str, list[View]]) -> pl.DataFrame:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for g in groups:
        members = list(g.members)
        for v in views.get(g.group_id, []):
            members += list(v.replaced.values())
        for m in members:
            rows[(g.group_id, m.candidate.candidate_id)] = {
                "group_id": g.group_id,
                "probe": g.probe,
                "task_id": g.task.task_id,
                "candidate_id": m.candidate.candidate_id,
                "base_id": m.base_id or m.candidate.candidate_id,
                "kind": m.kind,
                "variant": m.variant,
                "policy": m.policy,
                "policy_family": m.policy_family,
                "passed": m.passed,
                "completion": m.candidate.completion,
            }
    frame = pl.DataFrame(list(rows.values()), schema=columns(ProbeCandidatesSchema))
    frame = frame.sort(["group_id", "candidate_id"])
    return validate(frame, ProbeCandidatesSchema, "probe candidates table")


def plan(
    settings: Settings,
    tasks: list[Task],
    check: Any,
    samples: Any = None,
) -> tuple[list[ProbeGroup], dict[str, list[View]]]:
    """Every probe group and its views. `samples(tasks) -> {task id: [(policy, family,
    completion)]}` writes the self-preference candidates (None: no self-preference groups)."""
    from judgelab.probes.design import calibration_group, self_preference_group, views_for

    p = settings.probes
    groups = [calibration_group(t, list(p.mutants), check, p.seed) for t in tasks]
    if p.self_preference and samples is not None:
        written = samples(tasks)
        groups += [self_preference_group(t, written[t.task_id], check, p.seed) for t in tasks]
    views = {
        g.group_id: views_for(g, p.permutations, list(p.perturbations), p.repeats, check, p.seed)
        + attack_views(g, list(p.attacks), check)
        for g in groups
    }
    return groups, views


def judge_models(settings: Settings) -> dict[str, tuple[str, str]]:
    """evaluator name -> (judge model, its family), for the probed judges."""
    out = {}
    for name in settings.probes.judges:
        model = settings.evaluator(name).judge_model
        out[name] = (model, settings.models[model].family)
    return out
