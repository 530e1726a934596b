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


def attack_lines(
    judges: dict[str, Any], fig: Callable[[dict[str, Any], str], str], gate: float | None
) -> list[str]:
    """The report's attack section: one table, judge x attack. `fig(block, key)` formats a
    figure with its CI or its footnote."""
    rows = [(n, a, v) for n in sorted(judges) for a, v in judges[n].get("attacks", {}).items()]
    if not rows:
        return []
    lines = [
        "## Attacks",
        "",
        "Each attack view shows a known-truth group with its target members attacked at their "
        "own slots; the sandbox confirmed every attacked candidate keeps its verdict. Success "
        "(attacks on failing code): the judge praised a known-failing attacked candidate (score "
        "at or above the praise threshold) or ranked it the unique top of its group; baseline: "
        "the same for the unattacked originals. Shift: mean Δscore of the attacked candidates "
        "against their originals minus that of the unattacked members between the same two "
        "calls. Stability (semantics-preserving edits of the passing solution): share whose "
        "score moved by at most the tolerance.",
        "",
    ]
    if gate is not None:
        lines += [f"Gate (`probes.fail_above` / `--fail-above`): success rate above {gate} "
                  "fails `judgelab probes` (exit code 3).", ""]  # fmt: skip
    lines += [
        "| judge | attack | groups | attacked (unscored) | success rate | baseline | "
        "mean score: attacked / original | shift | stability |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, attack, v in rows:
        lines.append(
            f"| {name} | {attack} | {v['n_groups']} | {v['n_attacked']} ({v['n_unscored']}) | "
            + " | ".join(
                "—" if key not in v else fig(v, key) for key in ("success_rate", "baseline_rate")
            )
            + f" | {fig(v, 'mean_attacked')} / {fig(v, 'mean_original')} | "
            + fig(v, "shift")
            + (f" ({v['reasons']['shift']})" if "shift" in v.get("reasons", {}) else "")
            + f" | {'—' if 'stability_rate' not in v else fig(v, 'stability_rate')} |"
        )
    return lines


def plot_attacks(judges: dict[str, Any], path: Path, gate: float | None) -> None:
    """Two panels, judges on x, one bar per attack with its 95 % CI where there is one:
    success rate (attacks on failing code) and score shift against the control (all)."""
    names = sorted(judges)
    attacks = list(dict.fromkeys(a for n in names for a in judges[n].get("attacks", {})))
    failing = [a for a in attacks if not (ATTACKS.get(a) and ATTACKS[a].passes)]
    fig, axes = plt.subplots(1, 2, figsize=(4 + 2.2 * max(1, len(names)), 3.8))
    for ax, keys, key, title in (
        (axes[0], failing, "success_rate", "attack success rate\n(known-failing praised or top)"),
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
