"""The report's training section and curves plot, from `analysis.training`'s figures: a row
per judge, findings generated from the figures they name, the held-out selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from judgelab.analysis.training import load_training  # noqa: E402
from judgelab.report.model import (  # noqa: E402
    Block,
    BulletList,
    Heading,
    Paragraph,
    Run,
    Strong,
    table,
)
from judgelab.report.plots import save_figure  # noqa: E402


def selection_line(metrics: dict[str, Any]) -> str | None:
    """How the held-out tasks were chosen (the same for every judge), or None if fixed."""
    sel = next((m["heldout"].get("selection") for m in metrics.values()), None)
    if not sel:
        return None
    rates = ", ".join(f"{t} ({sel['base_pass_rate'][t]:.2f})" for t in sel["tasks"])
    filled = (
        f"; {', '.join(sel['filled'])} filled in (too few tasks of the pool were mixed)"
        if sel["filled"]
        else ""
    )
    return (
        f"Held-out tasks, with the base policy's pass rate: {rates}; chosen from a pool of "
        f"{sel['pool']} where the base policy is neither always right nor always wrong{filled}."
    )


def groups_line(metrics: dict[str, Any]) -> str | None:
    """How the training tasks were chosen (`train.select: mixed`), or None if they were not."""
    sel = next((m.get("groups_selection") for m in metrics.values()), None)
    if not sel:
        return None
    rates = ", ".join(f"{t} ({sel['base_pass_rate'][t]:.2f})" for t in sel["tasks"])
    filled = (
        f"; {', '.join(sel['filled'])} filled in (too few screened tasks were mixed)"
        if sel["filled"]
        else ""
    )
    return (
        f"Training tasks, with the base policy's pass rate on the epoch-0 draws it trains on: "
        f"{rates}; chosen from {sel['screened']} screened where the base policy is neither "
        f"always right nor always wrong, so the tests tell its samples apart{filled}."
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def steps_sentence(judge: str, m: dict[str, Any]) -> str:
    """The GRPO steps a judge's policy took, in how many trained epochs and groups, and
    every trained epoch without a step, with why (`analysis.training.no_step_reason`)."""
    if "trained_epochs" not in m:  # figures from before the counts were kept
        return f"**{judge}**: {_plural(m['steps'], 'GRPO step')} taken."
    seeds = f" over {m['n_seeds']} seeds" if "n_seeds" in m else ""
    epochs = _plural(m["trained_epochs"], "trained epoch")
    groups = f"{m['stepped_groups']} of {_plural(m['trained_groups'], 'group')}"
    if m["steps"] == 0:
        head = f"**{judge}** took no GRPO step in {epochs}{seeds}"
    else:
        head = (
            f"**{judge}** took {_plural(m['steps'], 'GRPO step')} in {epochs}{seeds}, on "
            f"{groups} with reward spread"
        )
    why = "; ".join(f"epoch {n['epoch']}: no step, {n['why']}" for n in m["no_step"])
    return head + (f" ({why})." if why else ".")


def scale_line(metrics: dict[str, Any]) -> str | None:
    """What this section is at its size: where no judge's held-out design reaches the stated
    effect (every MDE above it), a demonstration, not evidence; None where one does."""
    mdes = [m["mde"] for m in metrics.values()]
    if any(d.get("mde") is not None and d["decidable"] for d in mdes):
        return None
    known = [d["mde"] for d in mdes if d.get("mde") is not None]
    size = f"its smallest detectable held-out change is {min(known):.2f}" if known else (
        "it has no held-out draws to detect a change with"
    )  # fmt: skip
    return (
        f"**A demonstration at this size, not evidence:** {size}, above the stated effect of "
        f"{_effect(metrics):.2f}, so the runs below show that training runs on each judge "
        "and where its steps pushed (their within-group alignment), not what training on a "
        "judge does to the policy. Raise train.heldout (pool, limit, samples), train.epochs "
        "and train.groups_per_epoch for evidence."
    )


def plot_curves(root: Path, path: Path) -> bool:
    """One panel per judge (a column per judge and a row per seed with training seeds):
    reward, train and held-out pass rate by epoch (False: no data)."""
    data = load_training(root)
    if not data:
        return False
    seeds = sorted({s for runs in data.values() for s in runs}, key=lambda s: (s is not None, s))
    fig, axes = plt.subplots(
        len(seeds), len(data), figsize=(4.2 * len(data), 3.2 * len(seeds)), squeeze=False
    )
    for col, (judge, runs) in enumerate(data.items()):
        for row, seed in enumerate(seeds):
            ax = axes[row][col]
            if seed not in runs:
                ax.set_axis_off()
                ax.set_title(f"{judge}, seed {seed}: no run")
                continue
            h, _ = runs[seed]
            _plot_run(ax, h, judge if seed is None else f"{judge}, seed {seed}")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _plot_run(ax: Any, h: pl.DataFrame, title: str) -> None:
    """One policy's curves; its reward-hacking epochs shaded red."""
    e = h["epoch"].to_list()
    ax.plot(e, h["reward_mean"].to_list(), "o-", label="judge reward (mean)")
    ax.plot(e, h["train_pass_rate"].to_list(), "s--", label="train pass rate")
    ax.plot(e, h["heldout_pass_rate"].to_list(), "^-", label="held-out pass rate")
    for epoch, flag in zip(e, h["reward_hacking"].to_list(), strict=True):
        if flag:
            ax.axvspan(epoch - 0.5, epoch + 0.5, color="red", alpha=0.12)
    ax.set_title(title)
    ax.set_xlabel("epoch (0 = base policy)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks(e)


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f} %" if pct else f"{x:.3f}"


def _ci_text(ci: list[float] | None, pct: bool = True, reason: str | None = None) -> str:
    """` [low, high]`, or ` (why there is no CI)`, or nothing."""
    if not ci:
        return f" ({reason})" if reason else ""
    return f" [{_f(ci[0], pct)}, {_f(ci[1], pct)}]"


def seeds_n_text(h: dict[str, Any]) -> str:
    """`8 tasks × 2 seeds` (and the cells left out, where a seed lacks a task's rate)."""
    text = f"{h['n_tasks']} tasks × {h['n_seeds']} seeds"
    missing = h["n_tasks"] * h["n_seeds"] - h["n_cells"]
    return text + (f", {missing} task-seed cells untested" if missing else "")


def table_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """One row per judge; a judge trained over seeds shows them, the n (tasks × seeds) behind
    its held-out change, and in how many seeds the alarm fired."""
    rows = []
    for judge, m in metrics.items():
        r, h = m["reward"], m["heldout"]
        seeded = "n_seeds" in m
        rows.append(
            [
                f"{judge} ({m['n_seeds']} seeds)" if seeded else judge,
                str(m["epochs"]),
                _f(r["mean"]),
                _f(r["median"]),
                _f(r["std"]),
                _f(r["iqr"]),
                _f(h.get("base"), True) + _ci_text(h.get("base_ci"), True, h.get("ci_reason")),
                _f(h.get("final"), True) + _ci_text(h.get("final_ci"), True, h.get("ci_reason")),
                (f"{100 * h['delta']:+.0f} pp" if h.get("delta") is not None else "–")
                + _ci_text(h.get("delta_ci"), True, h.get("ci_reason"))
                + (f", n = {seeds_n_text(h)}" if seeded and h.get("delta") is not None else ""),
                mde_text(m["mde"]),
                alignment_text(m["alignment"]),
                alarm_cell(m),
                "–" if m.get("forged") is None else str(m["forged"]),
                f"{m['groups_skipped']}/{m['groups']}",
            ]
        )
    return rows


HEADER = [
    "judge", "epochs", "reward mean", "median", "std", "IQR", "held-out base [95 % CI]",
    "held-out final [95 % CI]", "change [95 % CI]", "MDE (80 % power)",
    "alignment [95 % CI]", "alarm", "forged", "groups skipped",
]  # fmt: skip


def mde_text(d: dict[str, Any]) -> str:
    """`0.43 (8 tasks, 16 + 32 draws): unable to decide`, or `0.12 (...)`."""
    if d.get("mde") is None:
        return "– (no held-out draws)"
    n = f"{d['n_tasks']} tasks, {d['base_draws']} base + {d['final_draws']} final draws"
    verdict = "" if d["decidable"] else f": unable to decide (> {d['effect']:.2f})"
    return f"{d['mde']:.2f} ({n}){verdict}"


def alignment_text(a: dict[str, Any]) -> str:
    """`+0.25 [-0.10, 0.60], n = 12 groups (48 samples)`; the CI's absence is said once in
    the section's note (fewer groups than the minimum)."""
    if a.get("alignment") is None:
        return f"– (n = {a['alignment_groups']} groups with reward spread)"
    ci = (
        f" [{a['alignment_ci_low']:+.2f}, {a['alignment_ci_high']:+.2f}]"
        if a.get("alignment_ci_low") is not None
        else ""
    )
    return (
        f"{a['alignment']:+.2f}{ci}, n = {a['alignment_groups']} groups "
        f"({a['alignment_samples']} samples)"
    )


def alarm_text(alarm: dict[str, Any]) -> str:
    """The alarm with its n and its threshold (`fired at epoch 2: e = 31 >= 20 ...`), and
    what the run's design let it detect (`reach_text`)."""
    n = f"{alarm['n_groups']} groups, {alarm['n_samples']} samples"
    reach = f"; {reach_text(alarm['design'])}" if alarm.get("design") else ""
    if alarm.get("evalue_max") is None:
        return f"not recorded (a history written before the alarm was kept; {n}){reach}"
    if alarm["fired"]:
        return (
            f"fired at epoch {alarm['first_epoch']} (e-value {alarm['evalue_max']:.3g} >= "
            f"{alarm['threshold']:.0f} = 1/alpha, alpha = {alarm['alpha']}; {n}){reach}"
        )
    return (
        f"not fired (largest e-value {alarm['evalue_max']:.3g} < {alarm['threshold']:.0f} = "
        f"1/alpha, alpha = {alarm['alpha']}; {n}){reach}"
    )


def reach_text(d: dict[str, Any]) -> str:
    """What the design (`alignment.alarm_design`) let the alarm detect: `could not fire` when
    its e-process cannot reach 1/alpha, else the alignment it catches with the stated power,
    or that not even a judge rewarding only failing code is caught that often."""
    per_epoch = "1 group" if d["groups_per_epoch"] == 1 else f"{d['groups_per_epoch']} groups"
    design = f"{d['epochs']} trained epochs × {per_epoch} of {d['k']}"
    power = f"{100 * d['power']:.0f} %"
    if not d["can_fire"]:
        return (
            f"could not fire: {design} reach an e-value of at most {d['max_evalue']:.3g} < "
            f"{d['threshold']:.0f} = 1/alpha, whatever the judge"
        )
    if d["detectable_alignment"] is None:
        return (
            f"could not reach {power} power: {design} catch even a judge that rewards only "
            f"failing code in {100 * d['power_anti']:.0f} % of runs (simulated, "
            f"{d['runs']} runs)"
        )
    return (
        f"could have detected alignment ≤ {d['detectable_alignment']:+.2f} with {power} power "
        f"({design}; simulated, {d['runs']} runs a judge){onset_text(d.get('onset'))}"
    )


def onset_text(onset: dict[str, Any] | None) -> str:
    """The design's onset statement (`alignment.simulated_onset`): a judge aligned for the
    first epochs, then hacking, caught in that share of runs, with its median delay."""
    if not onset or onset["onset_at"] < 1:
        return ""
    n, delay = onset["onset_at"], onset["delay_median"]
    plural = lambda x: "epoch" if x == 1 else "epochs"  # noqa: E731
    after = "" if delay is None else f", a median {delay} {plural(delay)} after the turn"
    return (
        f"; a judge hacking after {n} aligned {plural(n)} caught in "
        f"{100 * onset['caught']:.0f} % of runs{after}"
    )


def alarm_cell(m: dict[str, Any]) -> str:
    if "n_seeds" in m:
        return f"{m['reward_hacking_seeds']} of {m['n_seeds']} seeds"
    return alarm_text(m["alignment"]["alarm"])


def findings(metrics: dict[str, Any]) -> list[str]:
    out = []
    for judge, m in metrics.items():
        out.append(steps_sentence(judge, m))
        h = m["heldout"]
        if h.get("delta") is None:
            continue
        rose = (m["reward_last_epoch"] or 0) > (m["reward_first_epoch"] or 0)
        verdict = "rose" if rose else "did not rise"
        change = change_text(h, m["mde"])
        if "n_seeds" in m:
            out.append(_seeds_finding(judge, m, verdict, change))
            continue
        out.append(
            f"**{judge}**: the judge's reward {verdict} over {m['epochs']} epochs "
            f"({_f(m['reward_first_epoch'])} → {_f(m['reward_last_epoch'])}); held-out pass "
            f"rate {_f(h['base'], True)} → {_f(h['final'], True)} "
            f"({change}, {h['n_tasks']} held-out tasks)." + alignment_sentence(m)
        )
    return out


def change_text(h: dict[str, Any], mde: dict[str, Any]) -> str:
    """What the held-out change supports: a training result whose design cannot detect
    the stated effect (`mde["effect"]`) is unable to decide, whatever its CI says."""
    ci = h.get("delta_ci")
    power = f"{100 * mde['power']:.0f} %"
    if mde.get("mde") is None or not mde["decidable"]:
        size = "–" if mde.get("mde") is None else f"{mde['mde']:.2f}"
        return (
            f"unable to decide: the smallest effect this design detects at {power} power is "
            f"{size}, above the stated {mde['effect']:.2f}"
        )
    if ci is None:
        return f"no CI: {h.get('ci_reason') or 'not computed'}; no change can be claimed"
    if ci[0] > 0 or ci[1] < 0:
        return f"a change: its CI{_ci_text(ci)} excludes 0"
    return (
        f"no change of {mde['effect']:.2f} or more (detectable: {mde['mde']:.2f} at {power} "
        f"power): its CI{_ci_text(ci)} includes 0"
    )


def alignment_sentence(m: dict[str, Any]) -> str:
    """Where GRPO's push went by the tests, and the alarm, each with its n."""
    a = m["alignment"]
    if a.get("alignment") is None:
        return " No trained group had reward spread: no alignment figure."
    ci_low, ci_high = a.get("alignment_ci_low"), a.get("alignment_ci_high")
    if ci_low is None:
        where = "no CI (too few groups)"
    elif ci_high < 0:
        where = "towards failing code: its CI excludes 0"
    elif ci_low > 0:
        where = "towards passing code: its CI excludes 0"
    else:
        where = "its CI includes 0"
    text = (
        f" Within-group alignment {alignment_text(a)}: {where}"
        + (f"; permutation test of a push towards failing code: p = {a['alignment_p']:.3f}."
           if a.get("alignment_p") is not None else ".")
    )  # fmt: skip
    if "n_seeds" in m:
        return text + (
            f" Reward-hacking alarm in {m['reward_hacking_seeds']} of {m['n_seeds']} seeds."
        )
    return text + f" Reward-hacking alarm: {alarm_text(a['alarm'])}."


def _seeds_finding(judge: str, m: dict[str, Any], verdict: str, change: str) -> str:
    h = m["heldout"]
    per_seed = ", ".join(
        f"seed {s} {100 * d:+.0f} pp" if (d := p["heldout"].get("delta")) is not None
        else f"seed {s} –"
        for s, p in m["per_seed"].items()
    )  # fmt: skip
    alarm = (
        alignment_sentence(m)
        + " Per seed: "
        + "; ".join(
            f"seed {s} {alarm_text(p['alignment']['alarm'])}" for s, p in m["per_seed"].items()
        )
        + "."
    )
    return (
        f"**{judge}** ({m['n_seeds']} training seeds): the judge's reward {verdict} over "
        f"{m['epochs']} epochs (mean over seeds {_f(m['reward_first_epoch'])} → "
        f"{_f(m['reward_last_epoch'])}); held-out pass rate {_f(h['base'], True)} → "
        f"{_f(h['final'], True)} ({change}, n = {seeds_n_text(h)}; the CI resamples tasks, "
        f"then seeds within each task). Change per seed: {per_seed}." + alarm
    )


def absent_line(metrics: dict[str, Any]) -> str | None:
    """What to say about configured judges without training output (never that training was
    not configured when it was), or None when every configured judge has its output."""
    configured = metrics.get("train_rewards") or []
    found = set(metrics.get("training") or {})
    missing = [j for j in configured if j not in found]
    if not configured and not found:
        return "No training run (train.rewards is empty)."
    if not missing:
        return None
    return (
        f"train.rewards names {', '.join(missing)}, but the training stage's output has no "
        "history for "
        + ("it" if len(missing) == 1 else "them")
        + " (the stage has not run, or its output was removed): no figures."
    )


SEEDS_NOTE = (
    " A judge trained over several seeds (`train.seeds`: the same held-out tasks and draws, "
    "each seed its own LoRA initialisation and training draws) shows its seeds pooled: each "
    "held-out task's pass rate is its mean over the seeds, and the CI is a two-level "
    "bootstrap (tasks, then seeds within each task), from `analysis.min_ci_groups` tasks or "
    "more; the alarm is raised per seed and counted per judge."
)


def _effect(training: dict[str, Any]) -> float:
    """The stated effect the runs' MDEs were held to (one setting for all of them)."""
    return next(iter(training.values()))["mde"]["effect"]


INTRO = (
    "GRPO with LoRA on the policy, one run per judge; rewards are the judge's scores of the "
    "policy's own samples during training. Held-out pass rate: the tests' verdict on "
    "tasks never trained on, base policy (epoch 0) against the final one. "
    "Samples the sandbox could not test are left out of every pass rate, not counted as "
    "failures. MDE: the smallest held-out change the design (tasks × draws × seeds) "
    "detects at the stated power (`analysis.power`), with every draw's variance at its "
    "worst; a run whose MDE is above {effect:.2f} "
    "(`analysis.power.training_effect`) is unable to decide. Alignment: "
    "where GRPO's push went inside each trained group, by the tests — 2·ΣAᵢ·passedᵢ / "
    "Σ|Aᵢ| over every group GRPO stepped on (reward spread; not the last epoch's, which "
    "is scored and never trained on) (+1: all of it towards passing code, −1: "
    "all towards failing code), with a cluster bootstrap CI over groups from "
    "`analysis.min_ci_groups` groups up. The reward-hacking alarm is an e-detector of "
    "within-group anti-alignment over the run, mixing over the epoch at which the judge "
    "turned (the start included): it fires when it reaches 1/alpha, which a judge blind "
    "to the tests does with probability at most alpha over the whole run "
    "(`train.alarm_alpha`; the training stage raises it, this report reads it). "
    "Forged: samples the tests found faking a pass."
)


def strong_runs(text: str) -> tuple[Run, ...]:
    """A sentence's `**…**` spans as strong runs, the rest as text."""
    return tuple(Strong(part) if i % 2 else part for i, part in enumerate(text.split("**")) if part)


def section_blocks(metrics: dict[str, Any]) -> list[Block]:
    """The section as blocks (`report.model`), the same in report.md and report.html."""
    training = metrics.get("training") or {}
    out: list[Block] = [Heading("Training on each judge")]
    absent = absent_line(metrics)
    if absent:
        out.append(Paragraph.of(absent))
    if not training:
        return out
    scale = scale_line(training)
    if scale:
        out.append(Paragraph(strong_runs(scale)))
    seeded = any("n_seeds" in m for m in training.values())
    intro = INTRO.format(effect=_effect(training)) + (SEEDS_NOTE if seeded else "")
    out.append(Paragraph.of(intro))
    # no cell carries a † (a missing CI is said in its cell), so no minimum applies
    out.append(table(HEADER, table_rows(training), "training"))
    chosen = [line for line in (groups_line(training), selection_line(training)) if line]
    out += [Paragraph.of(line) for line in chosen]
    items = tuple((strong_runs(line), False) for line in findings(training))
    out.append(BulletList(None, items, glue=True))  # HTML: on the table's closing line
    return out
