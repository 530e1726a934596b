"""Which judge to train on: a ranking by a stated criterion, and a recommendation with caveats.

Contract (pure: reads the metrics dict, computes nothing new):
- Criterion: pairwise accuracy on mixed tasks (the share of (passing, failing) candidate pairs
  of a task that the judge orders correctly, ties half): what a GRPO advantage needs from a
  reward. Judges are the evaluators other than the execution truth.
- Tiers: judges sorted by pairwise accuracy; a judge starts a new tier only when the paired
  difference to every judge of the tier above it has a valid CI that excludes 0
  (`power.pairs[a][b].separated`). Judges in one tier are tied: the data cannot order them.
- A judge without pairwise accuracy (no mixed task, or no scores) is listed apart, unranked.
- The recommendation names one judge only when it alone forms the top tier and its paired
  difference to every other ranked judge excludes 0; otherwise it names the tied judges and
  what it would take to separate them (the power analysis). It always states the caveats:
  the number of tasks, and a top judge's zero-advantage rate, false-praise rate and
  chance-level accuracy where they apply.
"""

from __future__ import annotations

from typing import Any


def _separated(power: dict[str, Any], a: str, b: str) -> bool:
    pairs = power.get("pairs") or {}
    x, y = sorted((a, b))
    return bool(((pairs.get(x) or {}).get(y) or {}).get("separated"))


def rank_judges(metrics: dict[str, Any]) -> dict[str, Any]:
    """{"criterion", "tiers": [[judge, ...], ...] best first, "unranked": [judge, ...]}."""
    evs = metrics.get("evaluators") or {}
    power = metrics.get("power") or {}
    judges = sorted(n for n, ev in evs.items() if ev.get("protocol") != "execution")
    acc = {n: (evs[n].get("truth") or {}).get("pairwise_accuracy") for n in judges}
    ranked = sorted((n for n in judges if acc[n] is not None), key=lambda n: (-acc[n], n))
    tiers: list[list[str]] = []
    for name in ranked:
        if tiers and not all(_separated(power, name, other) for other in tiers[-1]):
            tiers[-1].append(name)
        else:
            tiers.append([name])
    return {
        "criterion": "pairwise accuracy on mixed tasks",
        "tiers": tiers,
        "unranked": [n for n in judges if acc[n] is None],
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def recommendation(metrics: dict[str, Any]) -> str:
    """One paragraph: which judge, or why the data cannot say, and the caveats."""
    rank = rank_judges(metrics)
    evs = metrics.get("evaluators") or {}
    power = metrics.get("power") or {}
    n_tasks = (metrics.get("execution_truth") or {}).get("n_tasks_with_truth")
    if not rank["tiers"]:
        return (
            "No judge can be ranked: none has a pairwise accuracy (no task has both passing and "
            "failing candidates, or no judge scored any). Grow the audit (more tasks, or a "
            "policy that fails some of them) before choosing a reward."
        )
    top = list(rank["tiers"][0])
    if len(top) == 1:  # a lone leader must be separated from every judge below, not only the next
        others = [n for tier in rank["tiers"][1:] for n in tier]
        top += [n for n in others if not _separated(power, top[0], n)]
    caveats = []
    for name in top:
        ev, t = evs[name], evs[name].get("truth") or {}
        if (ev.get("zero_advantage_rate") or 0) > 0:
            caveats.append(
                f"{name} gave every candidate the same score in "
                f"{_pct(ev['zero_advantage_rate'])} of its groups (no learning signal there)"
            )
        if (t.get("false_praise_rate") or 0) > 0:
            caveats.append(
                f"{name} scored {_pct(t['false_praise_rate'])} of failing candidates at or above "
                "the praise threshold"
            )
        low = t.get("pairwise_accuracy_ci_low")
        if low is None or low <= 0.5:
            caveats.append(
                f"{name}'s pairwise accuracy is not shown above chance (0.5) by a valid CI"
            )
    where = f" on {n_tasks} task{'' if n_tasks == 1 else 's'}" if n_tasks else ""
    if len(top) == 1 and len(rank["tiers"]) > 1:  # separated from every other judge
        head = (
            f"Train on {top[0]}: its pairwise accuracy is higher than every other judge's{where}, "
            "and each paired difference has a CI that excludes 0."
        )
    elif len(top) == 1:
        head = f"{top[0]} is the only judge with a pairwise accuracy{where}: nothing to rank."
    else:
        need = power.get("max_groups_needed")
        more = (
            f" About {need} tasks with passing and failing candidates would separate them by "
            f"{power.get('margin', 0.1):g} (power analysis below)."
            if need
            else ""
        )
        head = (
            f"The data cannot decide between {', '.join(top)}{where}: they are tied (no paired CI "
            f"excludes 0).{more}"
        )
    tail = f" Caveats: {'; '.join(caveats)}." if caveats else ""
    return head + tail


def ranking_markdown(metrics: dict[str, Any]) -> list[str]:
    rank = rank_judges(metrics)
    out = ["## Which judge to train on", "", recommendation(metrics), ""]
    if rank["tiers"]:
        out += [f"Ranking by {rank['criterion']} (judges in one line are tied):", ""]
        out += [f"{i}. {', '.join(tier)}" for i, tier in enumerate(rank["tiers"], 1)]
    if rank["unranked"]:
        out += ["", f"Unranked (no pairwise accuracy): {', '.join(rank['unranked'])}."]
    return out + [""]


def ranking_html(metrics: dict[str, Any], escape: Any) -> list[str]:
    rank = rank_judges(metrics)
    out = ["<h2>Which judge to train on</h2>", f"<p>{escape(recommendation(metrics))}</p>"]
    if rank["tiers"]:
        out.append(f"<p>Ranking by {escape(rank['criterion'])} (judges in one line are tied):</p>")
        out.append("<ol>" + "".join(f"<li>{escape(', '.join(t))}</li>" for t in rank["tiers"]))
        out.append("</ol>")
    if rank["unranked"]:
        unranked = escape(", ".join(rank["unranked"]))
        out.append(f"<p>Unranked (no pairwise accuracy): {unranked}.</p>")
    return out
