"""The decision in words: the first thing the report and README's findings say.

Every sentence is generated from `metrics["decision"]` (`judgelab.analysis.decision`) and the
figures it names, each quoted with its CI and n; tests/unit/test_decision.py holds each one to
them. `GLOSSARY` explains the terms the sentences use, where they are first used.
"""

from __future__ import annotations

from typing import Any

from judgelab.analysis.decision import decide
from judgelab.analysis.power import LABELS
from judgelab.config.evaluators import GROUP_PROTOCOLS
from judgelab.report.format import and_list
from judgelab.report.ranking import figure, why_unranked

# The report's images: the key of the forest plot of the primary, shown with the decision.
DECISION_IMAGE = "decision"

GLOSSARY = (
    "Signal fidelity: how closely the GRPO advantages a reward gives (its scores relative to "
    "the rest of the group) follow the ones the tests give, over every task, each task "
    "weighing the same: 1 for the tests themselves, 0 for no signal or a judge that ignores "
    "the code, below 0 for one that pushes failing code up (docs/METRICS.md). A 95 % CI is "
    'drawn over tasks; Holm\'s correction keeps the chance of any false "A is above B" '
    "among all the pairs compared at 5 %; power: how many tasks a comparison needs to "
    "detect a difference of that size 80 % of the time."
)


def decision(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics' decision (a metrics.json written before it had one: decided now)."""
    return metrics.get("decision") or decide(metrics)


def _tests_sentence(d: dict[str, Any], truth: dict[str, dict[str, Any]], ranked: list[str]) -> str:
    key, label = d["primary"], LABELS.get(d["primary"], d["primary"])
    closest = ranked[0]
    if set(d["tests_beat"]) == set(ranked):
        return (
            f"Where a task has tests, train on the tests: every judge's {label} lies below "
            f"the tests' {d['tests']:g} by a valid CI (the closest, {closest}: "
            f"{figure(truth[closest], key)})."
        )
    unbeaten = [n for n in ranked if n not in d["tests_beat"]]
    no_ci = [n for n in unbeaten if truth[n].get(f"{key}_ci_high") is None]
    reaching = [n for n in unbeaten if n not in no_ci]
    why = []
    if reaching:
        why.append(f"{and_list(reaching)}'s CI reaches {d['tests']:g}")
    if no_ci:
        n = max(truth[x].get(f"{key}_n_groups") or 0 for x in no_ci)
        why.append(f"{and_list(no_ci)} {'has' if len(no_ci) == 1 else 'have'} no CI (n = {n} "
                   "tasks at most: too few)")  # fmt: skip
    return (
        "Where a task has tests, train on the tests; this audit cannot show that they beat "
        f"every judge on {label}: {'; '.join(why)}."
    )


def _without_tests(
    d: dict[str, Any], truth: dict[str, dict[str, Any]], power: dict[str, Any]
) -> str:
    key, label = d["primary"], LABELS.get(d["primary"], d["primary"])
    lead = "Without tests" if d["tests"] is not None else "This audit has no tests to compare with;"
    if d["verdict"] == "no_judge":
        return f"{lead}, no judge passes the rejection rules: do not train on any of them."
    if d["verdict"] == "judge":
        j = d["judge"]
        if len(d.get("acceptable") or [j]) == 1:
            return (
                f"{lead}, use {j}, the only judge that passes the rejection rules: its {label} "
                f"is {figure(truth[j], key)}."
            )
        return (
            f"{lead}, use {j}: its {label} {figure(truth[j], key)} is above every other "
            f"acceptable judge's after Holm's correction over {power.get('n_comparisons')} "
            "comparisons."
        )
    named = and_list([f"{n} ({figure(truth[n], key)})" for n in d["contenders"]])
    out = f"{lead}, {named} cannot be told apart on {label}"
    more = d.get("more_tasks")
    if not more:
        return out + "; the power analysis cannot yet say how many tasks would separate them."
    a, b = more["pair"]
    return (
        f"{out}: about {more['more']} more tasks would separate {a} from {b} "
        f"({more['needed']} for their observed gap at power {power.get('power', 0.8):g}; "
        f"they share {more['have']} now)."
    )


def decision_sentences(metrics: dict[str, Any]) -> list[str]:
    """The decision, first for tasks with tests, then without, then who is rejected and why."""
    d = decision(metrics)
    evs = metrics.get("evaluators") or {}
    truth = {n: ev.get("truth") or {} for n, ev in evs.items()}
    key = d["primary"]
    judged = [n for n in truth if evs[n].get("protocol") != "execution"]
    ranked = sorted((n for n in judged if truth[n].get(key) is not None),
                    key=lambda n: -truth[n][key])  # fmt: skip
    if d["verdict"] == "no_ranking" or not ranked:
        return [why_unranked(metrics, LABELS.get(d["primary"], d["primary"]))]
    out = []
    if d["tests"] is not None:
        out.append(_tests_sentence(d, truth, ranked))
    out.append(_without_tests(d, truth, metrics.get("power") or {}))
    if d["rejected"]:
        why = "; ".join(f"{n} ({', '.join(r)})" for n, r in d["rejected"].items())
        out.append(f"Rejected by the rules decided before the data (`analysis.reject`): {why}.")
    guided = _reference_guided(metrics)
    if guided:
        one = len(guided) == 1
        out.append(
            f"The figures of {and_list(guided)} are reference-guided: "
            f"{'it scores' if one else 'they score'} a whole group, and each natural group "
            "was judged beside its known-truth contrast group, which GRPO never shows a judge; "
            "judge them apart (`scores.populations: apart`) before acting on them. The other "
            "evaluators score one candidate at a time: the grouping changes nothing they saw."
        )
    return out


def _reference_guided(metrics: dict[str, Any]) -> list[str]:
    """The judges that scored whole groups in an audit whose natural groups were judged
    beside their contrast groups (`population.judged: together`): they saw the reference."""
    if (metrics.get("population") or {}).get("judged") != "together":
        return []
    evs = metrics.get("evaluators") or {}
    return sorted(n for n, ev in evs.items() if ev.get("protocol") in GROUP_PROTOCOLS)


def forest_label(metrics: dict[str, Any]) -> str:
    key = decision(metrics)["primary"]
    return f"Each judge's {LABELS.get(key, key)} with its 95 % CI (grey: rejected)"


def decision_markdown(metrics: dict[str, Any], image: str | None) -> list[str]:
    """The report's first section: the decision, the forest plot, the words it uses."""
    out = ["## Decision", "", " ".join(decision_sentences(metrics)), ""]
    if image is not None:
        out += [f"![{forest_label(metrics)}]({image})", ""]
    return [*out, GLOSSARY, ""]


def decision_html(metrics: dict[str, Any], image: str | None, escape: Any) -> list[str]:
    out = ["<h2>Decision</h2>", f"<p>{escape(' '.join(decision_sentences(metrics)))}</p>"]
    if image is not None:
        label = escape(forest_label(metrics))
        out.append(f'<figure><img alt="{label}" src="{image}"><figcaption>{label}</figcaption>'
                   "</figure>")  # fmt: skip
    return [*out, f'<p class="note">{escape(GLOSSARY)}</p>']
