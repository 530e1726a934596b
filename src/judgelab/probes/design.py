"""Probe groups and the views each judge scores.

A `ProbeGroup` is a set of candidates for one task that a judge sees together:
- ``calibration``: the task's canonical solution, one mutant per configured kind that the tests
  prove broken, and a non-answer (known truth);
- ``self_preference``: samples written by every configured policy model for the task.
Members are kept in a seeded base order, so the canonical solution is not always first.

A `View` is one judge call on a group: ``perm:<i>`` shows the members in permutation i
(identity, reversal, random), ``pert:<name>`` shows the identity order with every other member
(those at even base positions) replaced by its perturbed copy — only where the tests give the
copy the same verdict as the original, so the code's behaviour is unchanged — and extra repeats
of ``perm:0`` measure repeat stability.

Test verdicts come from a `check(task, completion) -> bool | None` callable; in the product it is
the execution evaluator (sandboxed), `execution_check`. Nothing else here runs code.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from judgelab.cache import digest
from judgelab.config import RolloutSettings
from judgelab.errors import ConfigError
from judgelab.rollouts.contrast import canonical_source
from judgelab.rollouts.generate import policy_messages
from judgelab.rollouts.perturb import NON_ANSWER, answer, mutants, permutations, perturb
from judgelab.verdicts import Candidate, Task

log = logging.getLogger(__name__)

Check = Callable[[Task, str], "bool | None"]


@dataclass(frozen=True)
class Member:
    """One candidate of a probe group and what we know about it."""

    candidate: Candidate
    kind: str  # canonical | mutant | non_answer | sample | perturbed
    variant: str | None = None  # mutant kind, perturbation name
    policy: str | None = None
    policy_family: str | None = None
    passed: bool | None = None
    base_id: str | None = None  # for a perturbed copy: the original's candidate_id


@dataclass(frozen=True)
class ProbeGroup:
    group_id: str
    probe: str  # calibration | self_preference
    task: Task
    members: list[Member]


@dataclass(frozen=True)
class View:
    name: str
    order: list[int]
    repeat: int = 0
    replaced: dict[int, Member] = field(default_factory=dict)

    def shown(self, group: ProbeGroup) -> list[tuple[int, Member]]:
        """(base index, member as shown) in the order the judge sees them."""
        return [(i, self.replaced.get(i, group.members[i])) for i in self.order]


def _candidate(task: Task, group_id: str, label: str, completion: str, index: int) -> Candidate:
    cid = digest({"group": group_id, "label": label, "completion": completion})[:16]
    messages = policy_messages(RolloutSettings(), task)
    return Candidate(task.task_id, cid, index, completion, messages)


def _ordered(task: Task, group_id: str, probe: str, members: list[Member], seed: int) -> ProbeGroup:
    order = list(range(len(members)))
    random.Random(f"{seed}|{group_id}").shuffle(order)
    reindexed = [
        replace(members[i], candidate=replace(members[i].candidate, sample_index=pos))
        for pos, i in enumerate(order)
    ]
    return ProbeGroup(group_id, probe, task, reindexed)


def calibration_group(task: Task, kinds: list[str], check: Check, seed: int) -> ProbeGroup:
    """Canonical solution + the first test-rejected mutant of each kind + a non-answer."""
    group_id = f"calibration:{task.task_id}"
    request = task.request or task.prompt
    source = canonical_source(task)
    members: list[Member] = []
    canonical = answer(request, source)
    passed = check(task, canonical)
    if passed is not True:
        raise ConfigError(
            f"probes.tasks: the canonical solution of {task.task_id} does not pass its tests "
            f"in the sandbox (verdict: {passed}); check the execution evaluator's limits"
        )
    members.append(Member(_candidate(task, group_id, "canonical", canonical, 0), "canonical",
                          passed=True))  # fmt: skip
    assert task.entry_point is not None
    for kind in kinds:
        for code in mutants(source, task.entry_point, kind):
            completion = answer(request, code)
            if check(task, completion) is False:
                cand = _candidate(task, group_id, kind, completion, len(members))
                members.append(Member(cand, "mutant", variant=kind, passed=False))
                break
        else:
            log.warning("%s: no %s mutant fails the tests; left out", task.task_id, kind)
    non = _candidate(task, group_id, "non_answer", NON_ANSWER, len(members))
    members.append(Member(non, "non_answer", passed=check(task, NON_ANSWER)))
    return _ordered(task, group_id, "calibration", members, seed)


def self_preference_group(
    task: Task, samples: list[tuple[str, str, str]], check: Check, seed: int
) -> ProbeGroup:
    """One member per (policy, family, completion) sample, with its test verdict."""
    group_id = f"self_preference:{task.task_id}"
    members = [
        Member(
            _candidate(task, group_id, f"{policy}#{i}", completion, i),
            "sample",
            variant=policy,
            policy=policy,
            policy_family=family,
            passed=check(task, completion) if task.test else None,
        )
        for i, (policy, family, completion) in enumerate(samples)
    ]
    return _ordered(task, group_id, "self_preference", members, seed)


def perturbed_view(group: ProbeGroup, name: str, check: Check) -> View | None:
    """Identity order; members at even base positions replaced by their perturbed copy when
    the copy exists and keeps the test verdict. None when no member can be perturbed."""
    replaced: dict[int, Member] = {}
    for i, m in enumerate(group.members):
        if i % 2:
            continue
        text = perturb(m.candidate.completion, name)
        if text is None:
            continue
        if group.task.test and check(group.task, text) != m.passed:
            log.warning("%s: %s changes the verdict of %s; not used", group.group_id, name,
                        m.candidate.candidate_id)  # fmt: skip
            continue
        cand = _candidate(group.task, group.group_id, f"{name}:{m.candidate.candidate_id}",
                          text, i)  # fmt: skip
        replaced[i] = Member(cand, "perturbed", name, m.policy, m.policy_family, m.passed,
                             m.candidate.candidate_id)  # fmt: skip
    if not replaced:
        return None
    return View(f"pert:{name}", list(range(len(group.members))), 0, replaced)


def views_for(
    group: ProbeGroup,
    n_permutations: int,
    perturbations: list[str],
    repeats: int,
    check: Check,
    seed: int,
) -> list[View]:
    """Every view of a group: the identity order and its extra repeats (every group: the
    noise floor sits beside the position figures of all the groups they rest on), the
    perturbations (calibration groups), then the other permutations. Consecutive calls share
    their longest prompt prefix in this order, and llama.cpp re-evaluates only what follows
    it: a repeat costs no prompt evaluation at all."""
    k = len(group.members)
    orders = permutations(k, n_permutations, seed)
    views = [View("perm:0", orders[0])]
    views += [View("perm:0", orders[0], repeat=r) for r in range(1, repeats + 1)]
    if group.probe == "calibration":
        for name in perturbations:
            view = perturbed_view(group, name, check)
            if view is not None:
                views.append(view)
    views += [View(f"perm:{i}", order) for i, order in enumerate(orders) if i > 0]
    return views
