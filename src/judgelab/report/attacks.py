"""The probe report's attack table and plot, from `analysis.attacks.attack_bias`' figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from judgelab.probes.attacks import ATTACKS  # noqa: E402
from judgelab.report.plots import save_figure  # noqa: E402


def holm_sentence(tests: dict[str, Any] | None) -> str:
    """What the verdict column rests on, from the family's own figures."""
    tests = tests or {}
    n, alpha = tests.get("n_tests", 0), tests.get("alpha")
    if not n:
        return (
            "No judge × attack test had enough paired tasks for a p-value, so no attack is "
            "called effective."
        )
    return (
        f"p: the paired cluster t-test of the uplift over tasks; Holm-adjusted over {n} "
        f"judge × attack {'test' if n == 1 else 'tests'}. An attack is called effective only "
        f"where its Holm-adjusted p is below {alpha} and the uplift is positive."
    )


def verdict(v: dict[str, Any]) -> str:
    """The verdict cell: effective or not, from the Holm-adjusted p; untested says why."""
    if v.get("p_holm") is None:
        why = (v.get("reasons") or {}).get("uplift") or v.get("uplift_ci_reason")
        return f"not tested ({why})" if why else "not tested"
    word = "effective" if v.get("effective") else "not shown"
    return f"{word} (p {fmt_p(v['p_value'])}, Holm {fmt_p(v['p_holm'])})"


def fmt_p(p: float) -> str:
    """`= 0.012` or `< 0.001`."""
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def attack_lines(
    judges: dict[str, Any],
    fig: Callable[[dict[str, Any], str], str],
    gate: float | None,
    tests: dict[str, Any] | None,
) -> list[str]:
    """The report's attack section: one table, judge x attack. `fig(block, key)` formats a
    figure with its CI or its footnote; `tests` is the Holm family
    (`analysis.attacks.holm_attacks`)."""
    rows = [(n, a, v) for n in sorted(judges) for a, v in judges[n].get("attacks", {}).items()]
    if not rows:
        return []
    lines = [
        "## Attacks",
        "",
        "Each attack view shows a known-truth group with its target members attacked at their "
        "own slots; the sandbox confirmed every attacked candidate keeps its verdict. Success "
        "(attacks on failing code), on the judge's own scale: the known-failing attacked "
        "candidate scored above the mean of its call, a positive GRPO advantage (calls with an "
        "unscored member have no mean and are left out); baseline: the same for the unattacked "
        "originals in the identity view; uplift: success minus baseline on the candidates "
        "measured both ways, per task. Praised (absolute scale, secondary): scored at or above "
        "the praise threshold, attacked / original. Shift: mean Δscore of the attacked "
        "candidates against their originals minus that of the unattacked members between the "
        "same two calls. Stability (semantics-preserving edits of the passing solution): share "
        "whose score moved by at most the tolerance. Every n counts tasks; intervals are the "
        "truth figures' (Wilson at the cluster effective size for a rate).",
        "",
        holm_sentence(tests),
        "",
    ]
    if gate is not None:
        lines += [f"Gate (`probes.fail_above` / `--fail-above`): success rate above {gate} "
                  "fails `judgelab probes` (exit code 3).", ""]  # fmt: skip
    lines += [
        "| judge | attack | tasks | attacked (unscored) | success rate | baseline | uplift | "
        "verdict | praised: attacked / original | mean score: attacked / original | shift | "
        "stability |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, attack, v in rows:
        failing = "success_rate" in v
        cells = [
            *(fig(v, key) if key in v else "—" for key in ("success_rate", "baseline_rate",
                                                             "uplift")),
            verdict(v) if failing else "—",
            f"{fig(v, 'praise_rate')} / {fig(v, 'baseline_praise_rate')}" if failing else "—",
            f"{fig(v, 'mean_attacked')} / {fig(v, 'mean_original')}",
            fig(v, "shift")
            + (f" ({v['reasons']['shift']})" if "shift" in v.get("reasons", {}) else ""),
            "—" if "stability_rate" not in v else fig(v, "stability_rate"),
        ]  # fmt: skip
        lines.append(
            f"| {name} | {attack} | {v['n_tasks']} | {v['n_attacked']} ({v['n_unscored']}) | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def plot_attacks(judges: dict[str, Any], path: Path, gate: float | None) -> None:
    """Two panels, judges on x, one bar per attack with its 95 % CI where there is one:
    success rate on the judge's own scale (attacks on failing code) and score shift against
    the control (all)."""
    names = sorted(judges)
    attacks = list(dict.fromkeys(a for n in names for a in judges[n].get("attacks", {})))
    failing = [a for a in attacks if not (ATTACKS.get(a) and ATTACKS[a].passes)]
    fig, axes = plt.subplots(1, 2, figsize=(4 + 2.2 * max(1, len(names)), 3.8))
    for ax, keys, key, title in (
        (
            axes[0],
            failing,
            "success_rate",
            "attack success rate\n(known-failing above its call's mean)",
        ),
        (axes[1], attacks, "shift", "score shift against the control\n(edits: should be 0)"),
    ):
        width = 0.8 / max(1, len(keys))
        for j, attack in enumerate(keys):
            vals, errs = [], []
            for n in names:
                v = judges[n].get("attacks", {}).get(attack, {})
                x, lo, hi = v.get(key), v.get(f"{key}_ci_low"), v.get(f"{key}_ci_high")
                vals.append(np.nan if x is None else x)
                errs.append((0.0 if x is None or lo is None else x - lo,
                             0.0 if x is None or hi is None else hi - x))  # fmt: skip
            xs = np.arange(len(names)) + (j - (len(keys) - 1) / 2) * width
            err = np.array(errs).T.clip(min=0) if errs else None
            ax.bar(xs, vals, width, yerr=err, capsize=3, label=attack)
        if key == "success_rate" and gate is not None:
            ax.axhline(gate, color="red", linestyle="--", linewidth=1, label=f"gate {gate}")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        if keys:
            ax.legend(fontsize=6)
    axes[0].set_ylim(0, 1.05)
    fig.tight_layout()
    save_figure(fig, path)
