"""Which judge to train on: rank intervals that cannot contradict the paired comparisons, a
recommendation generated sentence by sentence from the figures it names, and caveats as a
judge x caveat table.

Contract (pure: reads the metrics dict and `analysis.ranking.rank_judges`' rank intervals):
- The recommendation names one judge only when it alone has rank 1..1 (separated from every
  other ranked judge); otherwise it names the contenders (best rank 1), lists every separated
  pair, and quotes the power figures of the two leading contenders (never the worst pair of
  the audit).
- Caveats go in a table (`caveat_rows`): per ranked judge, the primary figure not shown
  above chance by a valid CI, no CI (too few groups), zero-advantage mixed groups, within-
  group false praise and unscored rows at or above `CAVEAT_SHARE`.
"""

from __future__ import annotations

from typing import Any

from judgelab.analysis.fidelity import NOISE_COUNTED
from judgelab.analysis.power import LABELS, pair
from judgelab.analysis.ranking import chance_caveat, rank_judges
from judgelab.report.model import Block, Heading, Paragraph, table

CAVEAT_SHARE = 0.2  # a zero-advantage, false-praise or unscored share at or above it is a caveat


def rank_text(best: int, worst: int) -> str:
    return str(best) if best == worst else f"{best}–{worst}"


def _num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def figure(t: dict[str, Any], key: str) -> str:
    """`0.640 [0.466, 0.797], n = 20` or `0.438 (n = 3)`: the figure, its CI where valid."""
    value = t.get(key)
    if value is None:
        return "n/a"
    n = t.get(f"{key}_n_groups")
    low, high = t.get(f"{key}_ci_low"), t.get(f"{key}_ci_high")
    if low is None or high is None:
        return f"{_num(value)} (n = {n})"
    return f"{_num(value)} [{_num(low)}, {_num(high)}], n = {n}"


def _difference(p: dict[str, Any]) -> str:
    ci = ""
    if p.get("difference_ci_low") is not None:
        ci = f" [{_num(p['difference_ci_low'], True)}, {_num(p['difference_ci_high'], True)}]"
    return f"{_num(p['difference'], True)}{ci}, n = {p['n_groups']}, Holm p = {p['p_holm']:.3f}"


def _power_sentence(power: dict[str, Any], a: str, b: str) -> str:
    """What would decide the pair {a, b} at the margin: never a figure at the observed gap."""
    p = pair(power, a, b)
    if p is None:
        return ""
    margin = power.get("margin", 0.05)
    if p.get("equivalent"):
        return (f"{a} and {b} are equivalent within the margin {margin:g} (TOST, Holm p = "
                f"{p['p_equivalence_holm']:.3f}).")  # fmt: skip
    need = p.get("tasks_to_decide")
    if need is None:
        why = p.get("power_reason") or p.get("reason") or "no variance estimate"
        return f"How many tasks would decide {a} against {b}: {why}."
    return (
        f"To decide {a} against {b} at the margin {margin:g} (either a gap of {margin:g} "
        f"found or equivalence within it shown, power {power.get('power', 0.8):g}, from their "
        f"spread over {p['n_groups']} shared tasks): about {need} shared tasks."
    )


def why_unranked(metrics: dict[str, Any], label: str) -> str:
    """Why no judge has the primary figure, and the advice that fits the cause: fixing a judge
    that failed or adding tests is not growing the audit."""
    failed = metrics.get("judge_failures") or []
    truth = metrics.get("execution_truth") or {}
    if failed:
        return (
            f'No judge can be ranked: {len(failed)} judge(s) failed ("Judges that failed", '
            "above); fix what each line names and run the scores stage again."
        )
    if not truth.get("n_tasks_with_truth"):
        return (
            "Nothing is ranked against the tests: no task has a test result (a judge-only "
            "audit, or no `execution` evaluator). Add tasks with tests to rank the judges."
        )
    return (
        f"No judge can be ranked: none has a {label} (no task has both passing and failing "
        "candidates). Grow the audit (more tasks, or a policy that fails some of them) before "
        "choosing a reward."
    )


def recommendation_sentences(metrics: dict[str, Any]) -> list[str]:
    """The recommendation, one generated sentence per figure-bearing claim."""
    rank = rank_judges(metrics)
    evs = metrics.get("evaluators") or {}
    power = metrics.get("power") or {}
    key, label = rank["endpoint"], LABELS.get(rank["endpoint"], rank["endpoint"])
    n_tasks = (metrics.get("execution_truth") or {}).get("n_tasks_with_truth")
    where = f" on {n_tasks} task{'' if n_tasks == 1 else 's'} with test results" if n_tasks else ""
    if not rank["order"]:
        return [why_unranked(metrics, label)]
    t = {n: evs[n].get("truth") or {} for n in rank["order"]}
    m = power.get("n_comparisons") or 0
    ns = sorted(t[n].get(f"{key}_n_groups") or 0 for n in rank["order"])
    behind = f"{ns[0]}" if ns[0] == ns[-1] else f"{ns[0]}–{ns[-1]}"
    basis = ("the tasks the tests split or where its scores differ" if key in NOISE_COUNTED
             else "the mixed tasks (passing and failing candidates)")  # fmt: skip
    out = [f"Judges are ranked by {label} (`analysis.primary`){where}; each judge's figure "
           f"rests on {basis}: n = {behind}."]  # fmt: skip
    if len(rank["order"]) == 1:
        only = rank["order"][0]
        return [*out, f"{only} is the only judge with a {label} ({figure(t[only], key)}): "
                      "nothing to rank."]  # fmt: skip
    top = rank["top"]
    if len(top) == 1 and rank["ranks"][top[0]] == (1, 1):
        out.append(
            f"Train on {top[0]}: its {label} {figure(t[top[0]], key)} is higher than every "
            f"other judge's, each difference significant after Holm's correction over {m} "
            "comparisons."
        )
    else:
        names = ", ".join(f"{n} ({figure(t[n], key)})" for n in top)
        out.append(f"The data cannot single out one judge: {names} could each rank first.")
    if rank["separated"]:
        lines = "; ".join(f"{a} above {b} ({_difference(pair(power, a, b) or {})})"
                          for a, b in rank["separated"])  # fmt: skip
        out.append(f"Pairs that differ after Holm's correction over {m} comparisons: {lines}.")
    elif m:
        out.append(f"No pair of judges differs after Holm's correction over {m} comparisons.")
    else:
        out.append("No pair of judges shares enough mixed tasks for a comparison.")
    if len(top) >= 2:
        out.append(_power_sentence(power, top[0], top[1]))
    elif len(rank["order"]) >= 2 and rank["ranks"][top[0]] != (1, 1):
        out.append(_power_sentence(power, rank["order"][0], rank["order"][1]))
    if any(any(c != "–" for c in row[1:]) for row in caveat_rows(metrics)):
        out.append("Caveats per judge: the table below.")
    return [s for s in out if s]


def recommendation(metrics: dict[str, Any]) -> str:
    return " ".join(recommendation_sentences(metrics))


CAVEAT_COLUMNS = ("judge", "rank", "primary not above chance", "zero-advantage mixed groups",
                  "false praise within group", "unscored")  # fmt: skip


def _share(t: dict[str, Any], key: str, count: str, of: str) -> str:
    x = t.get(key)
    if x is None or x < CAVEAT_SHARE:
        return "–"
    return f"{100 * x:.0f} % ({t.get(count)} of {t.get(of)})"


def caveat_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """One row per ranked judge (rank order), then the unranked; "–": no caveat."""
    rank = rank_judges(metrics)
    evs = metrics.get("evaluators") or {}
    key = rank["endpoint"]
    rows = []
    for name in [*rank["order"], *rank["unranked"]]:
        ev = evs[name]
        t = ev.get("truth") or {}
        chance = chance_caveat(t, key) or "–"
        unscored = ev.get("unscored_rate")
        rows.append([
            name,
            rank_text(*rank["ranks"][name]) if name in rank["ranks"] else "unranked",
            chance,
            _share(t, "zero_advantage_mixed_rate", "n_zero_advantage_mixed", "n_pair_groups"),
            _share(t, "false_praise_within_group", "n_false_praise_within_group",
                   "n_failing_mixed"),
            "–" if unscored is None or unscored < CAVEAT_SHARE
            else f"{100 * unscored:.0f} % ({ev.get('n_unscored')} of {ev.get('n_rows')})",
        ])  # fmt: skip
    return rows


def ranking_blocks(metrics: dict[str, Any]) -> list[Block]:
    """Which judge to train on: the recommendation, and each judge's rank and caveats."""
    out: list[Block] = [
        Heading("Which judge to train on"),
        Paragraph.of(" ".join(recommendation_sentences(metrics))),
    ]
    if rows := caveat_rows(metrics):
        out += [table(CAVEAT_COLUMNS, rows, "caveats"), Paragraph.of(RANK_NOTE, note=True)]
    return out


RANK_NOTE = (
    "Rank: the places a judge can hold given the pairs that differ after Holm's correction "
    "(1–3: it could be first or third). A caveat shows at or above "
    f'{100 * CAVEAT_SHARE:.0f} %; "no CI (n = …)": fewer mixed task groups than the minimum '
    "for a CI."
)

