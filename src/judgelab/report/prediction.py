"""The study's report (`analysis.prediction`'s figures in words): whether the audit predicts
the training effect, each sentence generated from the figures it states."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgelab.io import write_json, write_parquet, write_text


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _e(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{low:.2f}, {high:.2f}]"


def verdict(pred: Mapping[str, Any]) -> str:
    """`predicts`, `predicts inverted`, `does not predict` (the CI covers 0) or `cannot tell`
    (no CI)."""
    low, high = pred["spearman_ci_low"], pred["spearman_ci_high"]
    if low is None or high is None:
        return "cannot tell"
    if low > 0:
        return "predicts"
    if high < 0:
        return "predicts inverted"
    return "does not predict"


def sentence(pred: Mapping[str, Any]) -> str:
    """One sentence on one figure's prediction of the training effect, with its n."""
    seeds = pred["seeds_per_arm"]
    plural = "" if seeds == [1] else "s"
    n = f"n = {pred['n_arms']} arms × {'/'.join(map(str, seeds)) or 0} seed{plural}"
    rho = f"ρ = {_f(pred['spearman'])}{_ci(pred['spearman_ci_low'], pred['spearman_ci_high'])}"
    low, high = pred["slope_ci_low"], pred["slope_ci_high"]
    band = "" if low is None or high is None else f" [{_e(low)}, {_e(high)}]"
    slope = f"slope {_e(pred['slope'])}{band}"  # effects are small: 3 significant digits
    what = f"The audit's {pred['figure']}"
    word = verdict(pred)
    if word == "cannot tell":
        why = pred["reason"] or "no CI"
        return (
            f"{what}: whether it predicts the training effect cannot be told ({why}): {rho}, {n}."
        )
    if word == "does not predict":
        return (f"{what} does not predict the training effect: {rho}, {slope}, {n} "
                "(the rank correlation's CI covers 0).")  # fmt: skip
    if word == "predicts inverted":
        return f"{what} predicts the training effect inverted: {rho}, {slope}, {n}."
    return f"{what} predicts the training effect: {rho}, {slope}, {n}."


def check_sentence(check: Mapping[str, Any]) -> str:
    """The effect measure's own check (`analysis.prediction.effect_check`) in one sentence,
    with its figures; where it fails, it says the prediction is not to be read."""
    rho, rates = check["spearman"], len(check["flips"])
    if rho is None:
        return (f"The effect measure could not be checked: {rates} planted flip rates "
                "(at least 3 are needed).")  # fmt: skip
    trend = "falls" if rho < 0 else "does not fall"
    planted = (
        f"the planted arms' effect {trend} as the flip rate rises (ρ = {rho:.2f} over "
        f"{rates} rates; falling in {check['seeds_falling']} of {check['n_seeds']} seeds)"
    )
    placebo = ""
    if check["placebo"] is not None and check["placebo_mean"] is not None:
        low, high = check["placebo_ci"]
        at = f"{check['placebo_mean']:.5f}"
        if low is None:
            placebo = (f", and the placebo's effect is {at} over {check['placebo_seeds']} "
                       "seed(s), too few for a CI")  # fmt: skip
        else:
            covers = "covers 0" if check["placebo_covers_zero"] else "does not cover 0"
            placebo = (f", and the placebo's effect, {at} [{low:.5f}, {high:.5f}] over "
                       f"{check['placebo_seeds']} seeds, {covers}")  # fmt: skip
    if check["holds"]:
        return f"The effect measure passes its check: {planted}{placebo}."
    return (f"The effect measure FAILS its check: {planted}{placebo}. The prediction below "
            "is not to be read as evidence either way.")  # fmt: skip


def first_order_sentence(check: Mapping[str, Any]) -> str:
    """The first-order study's check (`analysis.prediction.first_order_check`) in words, each
    clause from the figure it states; where it fails, the prediction is not to be read."""
    low, high = check["slope_ci"]
    if low is None:
        return (f"The effect measure could not be checked: {check['slope_ci_reason']}. The "
                "prediction below is not to be read as evidence either way.")  # fmt: skip
    falls = "falls" if high < 0 else ("rises" if low > 0 else "does not clearly fall")
    parts = [
        f"the planted arms' effect {falls} as the flip rate rises (slope {_e(check['slope'])} "
        f"per unit of flip rate [{_e(low)}, {_e(high)}], {len(check['flips'])} rates)"
    ]
    if check["placebo_mean"] is not None:
        pl, ph = check["placebo_ci"]
        if pl is None:
            parts.append(f"the placebo's effect is {_e(check['placebo_mean'])}, without a CI")
        else:
            covers = "covers 0" if check["placebo_covers_zero"] else "does not cover 0"
            parts.append(f"the placebo's, {_e(check['placebo_mean'])} [{_e(pl)}, {_e(ph)}], "
                         f"{covers}")  # fmt: skip
    if check["tests_effect"] is not None and check["tests_ci"][0] is not None:
        tl, th = check["tests_ci"]
        seen = ("is seen: its CI lies above 0" if check["tests_detected"]
                else "is not clearly seen at this size: its CI reaches 0")  # fmt: skip
        parts.append(f"the tests' own direction {seen} ({_e(check['tests_effect'])} "
                     f"[{_e(tl)}, {_e(th)}]){_bank_clause(check.get('tests_bank'))}")  # fmt: skip
    text = "; ".join(parts)
    if check["holds"]:
        return f"The effect measure passes its check: {text}."
    return (f"The effect measure FAILS its check: {text}. The prediction below is not to be "
            "read as evidence either way.")  # fmt: skip


def _bank_clause(bank: Mapping[str, int] | None) -> str:
    """How the tests' own arm moves each bank task (`first_order_check`'s `tests_bank`)."""
    if not bank:
        return ""
    return (f", raising passing against failing code on {bank['raised']} of the "
            f"{bank['tasks']} bank tasks and lowering it on {bank['lowered']}")  # fmt: skip


def judges_sentence(vs: Mapping[str, Any]) -> str:
    """Each judge against the planted arms' line (`analysis.prediction.judges_vs_planted`),
    said off the line only where its corrected CI excludes 0."""
    fig = vs["figure"]
    if vs["slope"] is None:
        return f"The judges could not be set against the planted arms: {vs['reason']}."
    judges = vs["judges"]
    if not judges:
        return ""
    level = next(iter(judges.values())).get("ci_level")
    corrected = (f"{level:.1%} CIs, corrected over the {len(judges)} judges"
                 if len(judges) > 1 else "95 % CI")  # fmt: skip
    if vs.get("figure_resampled"):
        corrected += f"; each arm's {fig} and effect redrawn on the same task resamples"
    if vs.get("bank_tasks_resampled"):
        corrected += (
            f", each effect on the same draws of the {vs['bank_tasks_resampled']} bank tasks"
        )
    lead = (
        "The planted arms lie near one line by construction (flipping a share p of the tests' "
        f"verdicts scales both their {fig} and their effect by about 1 − 2p), so ρ over all "
        "arms is mostly theirs; a judge's own test is its distance from that line, effect − "
        f"({_e(vs['intercept'])} + {_e(vs['slope'])} · {fig}) ({corrected}): "
    )
    parts, off = [], False
    for arm, j in judges.items():
        r = f"{j['residual']:+.3g}"
        n = f"n = {j['n_tasks']} tasks"
        if j["ci_low"] is None:
            parts.append(f"{arm} {r} (no CI: {j['ci_reason']})")
            continue
        band = f"[{j['ci_low']:+.3g}, {j['ci_high']:+.3g}]"
        if j["ci_low"] > 0 or j["ci_high"] < 0:
            off = True
            way = "more" if j["ci_low"] > 0 else "less"
            parts.append(
                f"{arm} moves held-out passing code against failing {way} than its {fig} of "
                f"{j['figure']:.3f} predicts ({_e(j['effect'])} against {_e(j['predicted'])}; "
                f"{r} {band}, {n})"
            )
        else:
            parts.append(f"{arm} is not off the line by a valid CI ({r} {band}, {n})")
    text = lead + "; ".join(parts) + "."
    if not off:
        text += (f" At this size the study cannot tell a judge's training effect from what its "
                 f"{fig} predicts.")  # fmt: skip
    return text


def apart_sentence(apart: Mapping[str, Any]) -> str:
    """The study's headline (`analysis.prediction.arms_apart`): the real judges and the
    placebo on their own, and the planted arms' ρ only as the measure's calibration."""
    fig, planted, others = apart["figure"], apart["planted"], apart["others"]
    rows = "; ".join(
        f"{r['arm']}{' (placebo)' if r['kind'] == 'placebo' else ''} {fig} {r['figure']:.3f}, "
        f"effect {_e(r['effect'])}"
        for r in others["arms"]
    )
    if others["spearman"] is None:
        among = f"no rank correlation among them ({others['reason']})"
    else:
        among = (f"their rank correlation is ρ = {others['spearman']:.3f} (n = "
                 f"{others['n_arms']} arms, no CI: not evidence either way)")  # fmt: skip
    text = (f"Apart from the planted arms, the evidence on real rewards is {others['n_arms']} "
            f"arm(s): {rows or 'none'}; {among}.")  # fmt: skip
    if planted["spearman"] is not None:
        text += (f" The {planted['n_arms']} planted arms are built to lie on one line (ρ = "
                 f"{planted['spearman']:.3f} among them), so they calibrate the effect measure "
                 f"and carry any correlation over all {apart['all']['n_arms']} arms (ρ = "
                 f"{_f(apart['all']['spearman'])}); that correlation is no claim about "
                 f"judges.")  # fmt: skip
    return text


def placebo_sentence(vs: Mapping[str, Any]) -> str:
    """The placebo against the planted arms' line (`judges_vs_planted`'s `placebo`)."""
    p = vs.get("placebo")
    if not p:
        return ""
    band = "no CI" if p["ci_low"] is None else f"[{p['ci_low']:+.3g}, {p['ci_high']:+.3g}]"
    off = p["ci_low"] is not None and (p["ci_low"] > 0 or p["ci_high"] < 0)
    way = "off the line" if off else "not off the line by a valid CI"
    return (f"The placebo ({vs['figure']} {p['figure']:.3f}, effect {_e(p['effect'])}) is {way}: "
            f"residual {p['residual']:+.3g} {band} ({p['ci_level']:.1%} CI, n = {p['n_tasks']} "
            f"tasks).")  # fmt: skip


def resampled_banks(pooled: Mapping[str, Mapping[str, Any]] | None) -> int | None:
    """The number of bank tasks the effects' CIs resample (`pooled_effects`' crossed
    bootstrap); None where the bank is held fixed."""
    counts = {row.get("bank_tasks_resampled") for row in (pooled or {}).values()}
    return counts.pop() if len(counts) == 1 and None not in counts else None


def bank_sentence(bank: Mapping[str, int], pooled: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Whether the study's intervals resample the bank (`resampled_banks`), said plainly."""
    k = resampled_banks(pooled)
    if k is not None:
        return (f"Its intervals resample the training tasks and, independently, these {k} "
                "bank tasks (a crossed bootstrap), so the bank's choice is in them.")  # fmt: skip
    units = "the training tasks and seeds" if pooled is not None else "the arms and seeds"
    n = bank.get("bank_contrast_tasks", 0)
    return (f"Its intervals hold the bank fixed: they resample {units} only, so the choice "
            f"of these {n} bank tasks is not in them.")  # fmt: skip


def _pooled_table(pooled: Mapping[str, Mapping[str, Any]], primary: Mapping[str, Any]) -> list[str]:
    audit = {r["arm"]: r["audit"] for r in primary["arms"]}
    over = "tasks × bank tasks" if resampled_banks(pooled) is not None else "tasks"
    lines = [
        f"| arm | {primary['figure']} | effect (first order, one SGD step) | 95 % CI over {over} "
        "| seed SD (seeds) | tasks stepped on |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for arm, row in sorted(pooled.items(), key=lambda kv: -(audit.get(kv[0]) or -9)):
        ci = (f"n/a ({row['ci_reason']})" if row["ci_low"] is None
              else f"[{_e(row['ci_low'])}, {_e(row['ci_high'])}]")  # fmt: skip
        sd = f"{_e(row.get('seed_sd'))} ({len(row.get('seeds') or [])})"
        lines.append(f"| {arm} | {_f(audit.get(arm))} | {_e(row['effect'])} | {ci} | {sd} | "
                     f"{row['stepped_groups']} of {row['groups']} |")  # fmt: skip
    return lines


def study_markdown(
    preds: Sequence[Mapping[str, Any]],
    bank: Mapping[str, int],
    seconds: Mapping[str, float],
    check: Mapping[str, Any] | None = None,
    pooled: Mapping[str, Mapping[str, Any]] | None = None,
    vs: Mapping[str, Any] | None = None,
    apart: Mapping[str, Any] | None = None,
) -> str:
    """The study's section: the effect measure's check, the real judges and the placebo
    apart from the planted arms (`apart`; without it, the primary's sentence over every arm),
    the judges and the placebo against the planted arms' line (`vs`), each arm's figure and
    effect (`pooled`: the first-order study's, with CIs over groups), then the other figures'
    sentences, the primary's over every arm among them."""
    if not preds:
        return "## Does the audit predict training?\n\nNo figure was compared.\n"
    primary = preds[0]
    judged = " ".join(s for s in (judges_sentence(vs), placebo_sentence(vs)) if s) if vs else ""
    checked = []
    if check:
        first = check.get("method") == "first-order"
        checked = [first_order_sentence(check) if first else check_sentence(check), ""]
    lines = [
        "## Does the audit predict training?",
        "",
        *checked,
        apart_sentence(apart) if apart else sentence(primary),
        *(["", judged] if judged else []),
        "",
        f"Bank: {bank.get('bank_samples', 0)} base-policy samples of {bank.get('bank_tasks', 0)}"
        f" held-out tasks, {bank.get('bank_contrast_tasks', 0)} with a passing and a failing "
        f"sample (the effect's n). {bank_sentence(bank, pooled)}",
        "",
    ]
    rest = [*preds[1:], *([primary] if apart else [])]
    if pooled is not None:
        lines += _pooled_table(pooled, primary)
        return _tail(lines, rest, seconds, planted_note=bool(apart))
    lines += [
        f"| arm | {primary['figure']} | effect (mean over seeds) | 95 % CI over seeds | seed SD "
        "| seeds |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in sorted(primary["arms"], key=lambda r: -r["audit"]):
        sd = "n/a" if row["effect_sd"] is None else f"{row['effect_sd']:.5f}"
        low, high = row["effect_ci"]
        ci = "n/a (fewer than 3 seeds)" if low is None else f"[{low:.5f}, {high:.5f}]"
        lines.append(
            f"| {row['arm']} | {_f(row['audit'])} | {row['effect_mean']:.5f} | {ci} | {sd} | "
            f"{row['n_seeds']} |"
        )
    return _tail(lines, rest, seconds, planted_note=bool(apart))


def _tail(
    lines: list[str],
    preds: Sequence[Mapping[str, Any]],
    seconds: Mapping[str, float],
    planted_note: bool = False,
) -> str:
    lines += ["", "Other figures:", ""]
    if planted_note:
        lines += ["(Over every arm, the planted ones included: they carry these correlations.)",
                  ""]  # fmt: skip
    lines += [f"- {sentence(p)}" for p in preds]
    if seconds:
        lines += [
            "",
            "Time: "
            + ", ".join(
                f"{k} {v:.0f}" + ("" if k == "cached_arms" else " s")
                for k, v in sorted(seconds.items())  # a fresh run's order is its own
            )
            + ".",
        ]
    return "\n".join(lines) + "\n"


STUDY_DIGITS = 9  # significant digits of the study's files


def write_study(
    out: Path,
    rewards: Any,
    raw: Mapping[str, Any],
    preds: Sequence[Mapping[str, Any]],
    audits: Mapping[str, Any],
    text: str,
    check: Mapping[str, Any] | None = None,
    vs: Mapping[str, Any] | None = None,
    apart: Mapping[str, Any] | None = None,
) -> None:
    """The study's files under `out`: rewards.parquet (per arm, seed and candidate),
    effects.json (the settings, the bank, the seconds and each (arm, seed)'s effect),
    prediction.json (each figure's prediction, the effect measure's check, the judges against
    the planted arms' line, each arm's audit) and study.md (`text`)."""
    from judgelab.analysis.stats import clean_json

    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / "rewards.parquet", rewards)
    # effects are far below 1 (a first-order one about 1e-7): 9 significant digits, not 6
    # decimals
    write_json(out / "effects.json", clean_json(dict(raw), STUDY_DIGITS, significant=True))
    write_json(
        out / "prediction.json",
        clean_json({"predictions": preds, "effect_check": check, "judges_vs_planted": vs,
                    "arms_apart": apart, "audit": audits}, STUDY_DIGITS, significant=True),
    )  # fmt: skip
    write_text(out / "study.md", text)
