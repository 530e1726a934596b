"""Report section for the optional probe stage: bias-probe panels.

(Training has its own section, `analysis.training`, from the training stage's tables.)

Contract:
- `bias_section(probes_metrics)` reads the probes' metrics JSON: `{"judges": {judge: {...}}}`
  or `{"evaluators": {...}}` (or a flat `{judge: {...}}`); every numeric leaf is a figure, and a
  leaf `x` with siblings `x_ci_low`/`x_ci_high` gets those as its 95% CI; without them the
  sibling `x_ci_reason` says why (`stats.Interval.fields`: its other siblings, `x_n_groups`
  and `x_undefined_resamples`, describe the CI and are not figures). One table of figures by
  judge and one bar panel per figure (bars per judge, CI whiskers).
- Missing inputs are not an error: the section says "not run" and how to produce it.
- It returns a `Section` of report-model blocks (`report.sections`), rendered to HTML (the
  panels a base64 PNG data URI) and Markdown; nothing is written to disk.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from judgelab.analysis.stats import CI_SUFFIXES  # noqa: E402
from judgelab.report.model import Embedded, Paragraph, Section  # noqa: E402
from judgelab.report.model import table as table_block  # noqa: E402
from judgelab.report.sections import section  # noqa: E402

logger = logging.getLogger(__name__)

MAX_BIAS_PANELS = 12
NOT_RUN = "not run"


def _png_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _not_run(title: str, how: str) -> Section:
    return section(title, [Paragraph.of(f"{NOT_RUN}: {how}", note=True)], ran=False)


# ---------------------------------------------------------------------------- bias probes


def _figures(obj: Any, prefix: str = "") -> dict[str, float | str]:
    """Numeric leaves, and the `_ci_reason` strings that stand in for a missing CI."""
    out: dict[str, float | str] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.update(_figures(value, f"{prefix}{key}."))
    elif isinstance(obj, int | float) and not isinstance(obj, bool) and np.isfinite(obj):
        out[prefix[:-1]] = float(obj)
    elif isinstance(obj, str) and prefix.endswith("_ci_reason."):
        out[prefix[:-1]] = obj
    return out


def read_probes(path: Path | None) -> dict[str, dict[str, float | str]]:
    """{judge: {figure: value}} from the probes' metrics JSON; {} if absent or unreadable."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        logger.warning("probe metrics %s unreadable: %s", path, err)
        return {}
    judges = (data.get("judges") or data.get("evaluators") or data) if isinstance(data, dict) else 0
    if not isinstance(judges, dict):
        logger.warning("probe metrics %s: expected an object of judges", path)
        return {}
    return {str(j): _figures(v) for j, v in sorted(judges.items()) if isinstance(v, dict)}


Figure = tuple[float, float | None, float | None, str | None]  # value, low, high, no-CI reason


def _with_ci(figures: dict[str, float | str]) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for key, value in figures.items():
        if key.endswith(CI_SUFFIXES) or isinstance(value, str):
            continue
        low, high = figures.get(f"{key}_ci_low"), figures.get(f"{key}_ci_high")
        reason = figures.get(f"{key}_ci_reason")
        out[key] = (
            value,
            low if isinstance(low, float) else None,
            high if isinstance(high, float) else None,
            reason if isinstance(reason, str) else None,
        )
    return out


def plot_bias(table: dict[str, dict[str, Figure]], rows: list[tuple[str, str]]) -> str:
    """One panel per row shown (`probe_rows`: (label, figure key)), each judge a bar."""
    titles = dict((key, label) for label, key in rows[:MAX_BIAS_PANELS])
    names = list(titles)
    judges = list(table)
    cols = min(4, max(1, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        vals = [table[j].get(name, (np.nan, None, None, None)) for j in judges]
        v = np.array([x[0] for x in vals], dtype=float)
        low = np.array([np.nan if x[1] is None else x[1] for x in vals], dtype=float)
        high = np.array([np.nan if x[2] is None else x[2] for x in vals], dtype=float)
        y = np.arange(len(judges))
        ax.barh(y, v, color="#8338ec")
        has_ci = ~np.isnan(low) & ~np.isnan(high) & ~np.isnan(v)
        if has_ci.any():  # whiskers only where the probes gave a CI
            err = np.vstack([v - low, high - v])[:, has_ci].clip(min=0)
            ax.errorbar(v[has_ci], y[has_ci], xerr=err, fmt="none", ecolor="black", capsize=3)
        ax.set_yticks(y, judges, fontsize=7)
        ax.axvline(0, color="grey", linewidth=0.8)
        ax.set_title(titles[name], fontsize=8, wrap=True)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.tight_layout()
    return _png_uri(fig)


# The figures the audit report shows of the probes, in plain words: (label, key) where the
# key is a figure of data/probes/metrics.json (flattened, `_figures`); `{a}` an attack's name,
# `{p}` a perturbation's. Every other figure is in the probes' own report.
PROBE_ROWS = (
    ("order-consistent accuracy: passing beats failing code in both orders",
     "calibration.order_consistent_accuracy"),
    ("position consistency: a pair keeps its order when the slots swap",
     "position.position_consistency"),
    ("the same between repeats in one order (its noise floor)", "noise_floor.position_consistency"),
    ("signal fidelity on the probes' known-truth groups (the probes' own calls; not the "
     "audit's contrast groups)", "calibration.signal_fidelity"),
    ("self-preference: its own family's score gap, same task and verdict",
     "self_preference.family_gap"),
)  # fmt: skip
ATTACK_ROWS = (
    ("attack {a}: success (the attacked failing code above its call's mean)",
     "attacks.{a}.success_rate"),
    ("attack {a}: the same for the unattacked original", "attacks.{a}.baseline_rate"),
    ("attack {a}: uplift (success − baseline)", "attacks.{a}.uplift"),
    ("attack {a}: Holm-adjusted p of the uplift", "attacks.{a}.p_holm"),
)  # fmt: skip
PERTURBATION_ROWS = (
    ("perturbation {p}: robustness (the score moves by at most the tolerance)",
     "perturbation.{p}.robustness_rate"),
)  # fmt: skip


def probe_rows(table: dict[str, dict[str, Figure]]) -> list[tuple[str, str]]:
    """(label, key) of every shown figure that some judge has, in PROBE_ROWS' order, then
    each attack's and each perturbation's."""
    keys = {k for figs in table.values() for k in figs}
    attacks = sorted({k.split(".")[1] for k in keys if k.startswith("attacks.")})
    perturbations = sorted({k.split(".")[1] for k in keys if k.startswith("perturbation.")})
    rows = list(PROBE_ROWS)
    rows += [(label.format(a=a), key.format(a=a)) for a in attacks for label, key in ATTACK_ROWS]
    rows += [(label.format(p=p), key.format(p=p))
             for p in perturbations for label, key in PERTURBATION_ROWS]  # fmt: skip
    return [(label, key) for label, key in rows if key in keys]


def bias_section(probes_metrics: Path | None) -> Section:
    title = "Bias probes"
    probes = read_probes(probes_metrics)
    table = {j: _with_ci(f) for j, f in probes.items() if f}
    rows = probe_rows(table)
    if not rows:
        return _not_run(title, "no probe metrics (data/probes/metrics.json); run the probes first")

    def cell(judge: str, name: str) -> str:
        value, low, high, reason = table[judge].get(name, (None, None, None, None))
        if value is None:
            return "n/a"
        if low is not None and high is not None:
            return f"{value:.3f} [{low:.3f}, {high:.3f}]"
        return f"{value:.3f} ({reason})" if reason else f"{value:.3f}"

    note = (
        "What the probes found (docs/PROBES.md), each figure with its 95 % CI over tasks where "
        "one is valid; every figure and its n: the probes' own report, data/probes/report.md."
    )
    judges = list(table)
    body = [
        Paragraph.of(note, note=True),
        # a figure without a CI says why in its cell: no † cell, so no minimum applies
        table_block(
            ["figure", *judges],
            [[label, *(cell(j, name) for j in judges)] for label, name in rows],
            "bias",
            spaced=True,
        ),
        Embedded("bias panels", plot_bias(table, rows)),
    ]
    return section(title, body, sep="\n")
