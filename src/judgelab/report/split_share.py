"""Report section and plot for metrics.json's ``split_share`` block (`analysis.split_share`):
each judge's signal fidelity split into alignment (where the tests split a group) and noise
(where they do not), and the judges' order at split shares from 0.1 to 0.9, so that advice
still holds when the policy (or the task set) moves the share of groups the tests split.

Every sentence is built from the block's fields (`sentences`); every figure carries its n
(split and unsplit task groups). No section when the block is absent or has a `reason`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from judgelab.report.format import NA, fmt_num  # noqa: E402
from judgelab.report.model import BulletList, Paragraph, Section, table  # noqa: E402
from judgelab.report.plots import save_figure, write_csv  # noqa: E402
from judgelab.report.sections import section  # noqa: E402

TITLE = "Signal fidelity as the policy improves"
IMAGE = "signal fidelity by split share"
TOP = 3  # the crossings reported: among the judges ranked this high at the expected share
CONVENTION_NOTE = {
    "std": "std-normalised (ART; TRL's default scale_rewards='group'): any uneven scoring of "
    "a group the tests do not split costs a whole unit of noise, whatever the size of the "
    "differences",
    "centred": "centred (Dr. GRPO, RLOO-like; TRL's scale_rewards='none'): noise costs by the "
    "size of the differences, in units of the tests' own push",
    "batch": "batch-scaled (TRL's scale_rewards='batch'): centred, over one std of all the "
    "audit's rewards, so noise costs by its size relative to the judge's overall spread",
}


def _block(metrics: dict[str, Any]) -> dict[str, Any] | None:
    block = metrics.get("split_share")
    return block if block and "reason" not in block and block.get("judges") else None


def _ci(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return NA
    return fmt_num(value) if low is None or high is None else (
        f"{fmt_num(value)} [{fmt_num(low)}, {fmt_num(high)}]")  # fmt: skip


def _ranked(block: dict[str, Any]) -> list[str]:
    """Judges by SF at the expected share, best first (name breaks ties)."""
    judges = block["judges"]
    return sorted(judges, key=lambda n: (-(judges[n]["at_expected"]["signal_fidelity"]
                                          if judges[n]["at_expected"]["signal_fidelity"]
                                          is not None else float("-inf")), n))  # fmt: skip


def _segments(block: dict[str, Any]) -> str:
    """'X ranks first at split shares 0.1-0.3, Y at 0.4-0.9' from `first_by_share`."""
    runs: list[tuple[str | None, list[float]]] = []
    for share, name in zip(block["shares"], block["first_by_share"], strict=True):
        if runs and runs[-1][0] == name:
            runs[-1][1].append(share)
        else:
            runs.append((name, [share]))
    if len(runs) == 1:
        return (f"{runs[0][0]} has the highest signal fidelity at every split share from "
                f"{block['shares'][0]:g} to {block['shares'][-1]:g}.")  # fmt: skip
    parts = [f"{n} at {s[0]:g}" if len(s) == 1 else f"{n} at {s[0]:g}–{s[-1]:g}"
             for n, s in runs]  # fmt: skip
    return f"Highest signal fidelity by split share: {'; '.join(parts)}."


def sentences(block: dict[str, Any]) -> list[str]:
    """The section's claims, each from the block's fields."""
    n_s, n_u = block["n_split_groups"], block["n_unsplit_groups"]
    own = block["own_share"]
    share = block["expected_share"]
    where = ("this audit's own" if block["expected_is_own"]
             else "the expected share you set (analysis.expected_split_share)")  # fmt: skip
    out = [
        f"Signal fidelity splits into alignment A (where the tests split a group; n = {n_s} "
        f"tasks here) and noise N (how hard the judge pushes where they do not, per group, in "
        f"units of the tests' push; n = {n_u} tasks). At a split share s it is "
        f"s·A / (s + (1 − s)·N); this audit's share is {own:.3f} ({n_s} of {n_s + n_u} "
        f"tasks). Advantages are {CONVENTION_NOTE[block['convention']]} (analysis.advantage).",
        _segments(block),
    ]
    ranked = _ranked(block)
    best = block["judges"][ranked[0]]["at_expected"]
    out.append(f"At {where} split share, {share:.3f}, {ranked[0]} ranks first: signal fidelity "
               f"{_ci(best['signal_fidelity'], best['ci_low'], best['ci_high'])}.")  # fmt: skip
    top = set(ranked[:TOP])
    for c in block["crossings"]:
        a, b = c["judges"]
        if a in top and b in top:
            above = max((a, b), key=lambda n: block["judges"][n]["alignment"])
            below = b if above == a else a
            out.append(f"{above} and {below} swap order at a split share of {c['share']:.2f}: "
                       f"below it {below} is ahead (less noise), above it {above} (better "
                       f"alignment).")  # fmt: skip
    return out


COLUMNS = ("judge", "alignment A (split tasks)", "noise N (unsplit tasks)",
           "SF at 0.1", "SF at 0.3", "SF at 0.5", "SF at 0.7", "SF at 0.9",
           "SF at the expected share")  # fmt: skip


def _rows(block: dict[str, Any]) -> list[list[str]]:
    rows = []
    shown = [block["shares"].index(s) for s in (0.1, 0.3, 0.5, 0.7, 0.9)]
    for name in _ranked(block):
        j = block["judges"][name]
        e = j["at_expected"]
        rows.append([
            name,
            f"{_ci(j['alignment'], j['alignment_ci_low'], j['alignment_ci_high'])}, "
            f"n = {j['n_split_groups']}",
            f"{_ci(j['noise'], j['noise_ci_low'], j['noise_ci_high'])}, "
            f"n = {j['n_unsplit_groups']}",
            *(fmt_num(j["curve"][i]["signal_fidelity"]) for i in shown),
            f"{_ci(e['signal_fidelity'], e['ci_low'], e['ci_high'])} (s = {e['share']:.3f})",
        ])  # fmt: skip
    return rows


def split_share_section(metrics: dict[str, Any]) -> list[Section]:
    """The section, or none without a usable ``split_share`` block."""
    block = _block(metrics)
    if block is None:
        return []
    claims = sentences(block)
    note = (f"Each CI: the {len(block['judges'])} judges' figures over the analysis's task "
            f"resamples (percentile); none from fewer split or unsplit tasks than "
            f"analysis.min_ci_groups. The plot '{IMAGE}' draws every judge's curve.")  # fmt: skip
    rows = _rows(block)
    body = [BulletList.of(claims), table(COLUMNS, rows, "split-share"), Paragraph.of(note, True)]
    return [section(TITLE, body)]


def curve_frame(metrics: dict[str, Any]) -> pl.DataFrame:
    """judge, share, signal_fidelity, ci_low, ci_high: the plot's table (for `dvc plots`)."""
    block = _block(metrics) or {"judges": {}}
    rows = [(name, r["share"], r["signal_fidelity"], r["ci_low"], r["ci_high"])
            for name, j in sorted(block["judges"].items()) for r in j["curve"]]  # fmt: skip
    schema = {"judge": pl.String, "share": pl.Float64, "signal_fidelity": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64}  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


def plot_split_share(metrics: dict[str, Any], png: Path, csv: Path) -> bool:
    """Every judge's SF across split shares (CI band where it has one), the audit's share
    dashed and the expected one dotted; False, and nothing written, without a block."""
    block = _block(metrics)
    if block is None:
        return False
    frame = curve_frame(metrics)
    write_csv(frame, csv)
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in _ranked(block):
        part = frame.filter(pl.col("judge") == name)
        x = part["share"].to_numpy()
        (line,) = ax.plot(x, part["signal_fidelity"].to_numpy(), marker="o", markersize=3,
                          label=name)  # fmt: skip
        if part["ci_low"].null_count() == 0:
            ax.fill_between(x, part["ci_low"].to_numpy(), part["ci_high"].to_numpy(),
                            color=line.get_color(), alpha=0.12)  # fmt: skip
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axvline(block["own_share"], color="black", linestyle="--", linewidth=1,
               label=f"this audit ({block['own_share']:.2f})")  # fmt: skip
    if not block["expected_is_own"]:
        ax.axvline(block["expected_share"], color="black", linestyle=":", linewidth=1,
                   label=f"expected ({block['expected_share']:.2f})")  # fmt: skip
    ax.set_xlabel("share of groups the tests split")
    ax.set_ylabel("signal fidelity")
    ax.set_title(f"{IMAGE} ({block['convention']} advantages; n = "
                 f"{block['n_split_groups']} split, {block['n_unsplit_groups']} unsplit tasks)",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    save_figure(fig, png)
    return True
