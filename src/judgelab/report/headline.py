"""README's findings (a compact table, up to four bullets from the audit, one from the
probes' attacks and one from the training-effect study) and docs/REFERENCE_AUDIT.md (the
full table, the recommendation, caveats, paired comparisons, the attack table and the study)
of a finished audit: every figure
with its CI or its n, read from the metrics files the stages wrote (nothing recomputed here),
every sentence generated from the figures it names.

`findings_table(data_dir)` / `findings_block(data_dir)` / `audit_document(data_dir)` take a
project's `data/` folder: `analysis/metrics.json` (the audit) and, where those parts have
run, `probes/metrics.json`, the training figures the analysis folded in and the study's
`study/prediction.json` and `study/effects.json`. A part that has
not run says so in its cells; nothing is left blank. A figure from fewer groups than the
minimum for a CI shows `value (n = 3)†`, with one footnote for the rule.

`python -m judgelab.report.headline reference/data` prints README's block;
`--write` rewrites README.md's two blocks (the findings and, after them, the practitioner's
reading, `judgelab.report.practice`; each between its markers) and docs/REFERENCE_AUDIT.md.
tests/unit/test_reference_results.py holds both to the committed reference audit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from judgelab.analysis.power import LABELS, sorted_pairs
from judgelab.analysis.ranking import CHANCE, endpoint, rank_judges
from judgelab.report import practice
from judgelab.report.attacks import attack_lines, fmt_p
from judgelab.report.decision import GLOSSARY, decision_sentences
from judgelab.report.format import (
    NA,
    NO_CI_MARK,
    and_list,
    fmt_ci,
    fmt_num,
    fmt_pct,
    interval,
    with_n,
)
from judgelab.report.power import HEADER as POWER_HEADER
from judgelab.report.power import rows as power_rows
from judgelab.report.prediction import (
    apart_sentence,
    check_sentence,
    first_order_sentence,
    judges_sentence,
    placebo_sentence,
    sentence,
    study_markdown,
)
from judgelab.report.ranking import (
    CAVEAT_COLUMNS,
    RANK_NOTE,
    caveat_rows,
    rank_text,
    recommendation_sentences,
)

NOT_RUN = "not run yet"
BEGIN, END = "<!-- reference-findings:begin -->", "<!-- reference-findings:end -->"
AUDIT_DOC = Path("docs/REFERENCE_AUDIT.md")

COMPACT_COLUMNS = (
    "judge",
    "primary (`analysis.primary`)",
    "false praise within group",
    "unscored",
    "zero-advantage mixed groups",
    "rank (range)",
)
COLUMNS = (
    "rank (range)",
    "judge",
    "primary (`analysis.primary`)",
    "strict pairwise acc.",
    "tied pairs",
    "pairwise acc. (ties ½)",
    "top-1 acc. − chance",
    "advantage fidelity",
    "false praise within group",
    "false praise ≥ threshold (absolute scale)",
    "unscored",
    "out of range",
    "zero-advantage mixed groups",
    "order-consistent acc. (probes)",
    "position consistency",
    "self-preference gap",
    "robust to comments / claims",
    "held-out pass rate after training (Δ)",
)


def _rate(ev: dict[str, Any], key: str, count: str) -> str:
    rate = ev.get(key)
    return NA if rate is None else f"{fmt_pct(rate)} ({ev.get(count, 0)} of {ev['n_rows']})"


def _zero_mixed(t: dict[str, Any]) -> str:
    rate = t.get("zero_advantage_mixed_rate")
    if rate is None:
        return NA
    return f"{fmt_pct(rate)} ({t.get('n_zero_advantage_mixed')} of {t.get('n_pair_groups')})"


def _beside_floor(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`with_n`, then the figure's noise floor where the probes measured one."""
    cell = with_n(t, key, pct)
    floor = t.get(f"{key}_noise_floor")
    if floor is None or cell == NA:
        return cell
    return f"{cell}; noise floor {fmt_pct(floor) if pct else fmt_num(floor)}"


def _probe_cells(probe: dict[str, Any] | None) -> list[str]:
    if probe is None:
        return [NOT_RUN] * 4
    order = with_n(probe.get("calibration", {}), "order_consistent_accuracy")
    position = _beside_floor(probe.get("position", {}), "position_consistency")
    self_gap = with_n(probe.get("self_preference", {}), "self_gap")
    perturbation = probe.get("perturbation", {})
    robust = (
        " / ".join(
            _beside_floor(perturbation[kind], "robustness_rate", pct=True)
            if kind in perturbation
            else NA
            for kind in ("comments", "claims")
        )
        if perturbation
        else "not run"  # probed without perturbations (the attacks have their own section)
    )
    return [order, position, self_gap, robust]


def _training_cell(trained: dict[str, Any] | None) -> str:
    if trained is None:
        return NOT_RUN
    heldout = trained.get("heldout", {})
    if heldout.get("final") is None:
        return NA
    delta, ci = heldout["delta"], heldout.get("delta_ci")
    spread = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f"({heldout.get('ci_reason')})"
    n = f"{heldout['n_tasks']} tasks"
    if "n_seeds" in heldout:  # trained over several seeds: the CI resamples tasks and seeds
        n += f" × {heldout['n_seeds']} seeds"
    mde = trained.get("mde") or {}
    # a design that cannot detect the stated effect says so, whatever its CI shows
    if mde.get("mde") is not None and not mde["decidable"]:
        n += f"; unable to decide: MDE {mde['mde']:.2f} > {mde['effect']:.2f}"
    return f"{heldout['base']:.3f} → {heldout['final']:.3f} (Δ {delta:+.3f} {spread}, n = {n})"


def _judges(analysis: dict[str, Any]) -> list[str]:
    """Evaluators other than the truth: ranked ones in rank order, unranked ones last."""
    truth = analysis.get("execution_truth", {}).get("evaluator")
    ranking = rank_judges(analysis)
    return [n for n in (*ranking["order"], *sorted(ranking["unranked"])) if n != truth]


def _rank_cell(ranking: dict[str, Any], name: str) -> str:
    return rank_text(*ranking["ranks"][name]) if name in ranking["ranks"] else "unranked"


def findings_rows(analysis: dict[str, Any], probes: dict[str, Any] | None) -> list[list[str]]:
    """The full table (COLUMNS): one row per judge, in rank order (`rank_judges`)."""
    training = analysis.get("training")
    trained_judges = set(analysis.get("train_rewards", []))
    ranking = rank_judges(analysis)
    rows = []
    for name in _judges(analysis):
        ev = analysis["evaluators"][name]
        t = ev.get("truth", {})
        probe = (probes or {}).get("judges", {}).get(name)
        probe_cells = _probe_cells(probe) if probes is not None else [NOT_RUN] * 4
        if probes is not None and probe is None:
            probe_cells = ["not probed"] * 4
        if name not in trained_judges:
            train_cell = "not trained"
        else:
            train_cell = _training_cell((training or {}).get(name))
        rows.append(
            [
                _rank_cell(ranking, name),
                name,
                f"{LABELS.get(ranking['endpoint'], ranking['endpoint'])}: "
                f"{with_n(t, ranking['endpoint'])}",
                with_n(t, "pairwise_accuracy_strict"),
                with_n(t, "tied_pair_share", pct=True),
                with_n(t, "pairwise_accuracy"),
                with_n(t, "top1_over_chance"),
                with_n(t, "advantage_fidelity"),
                with_n(t, "false_praise_within_group", pct=True),
                with_n(t, "false_praise_absolute", pct=True),
                _rate(ev, "unscored_rate", "n_unscored"),
                _rate(ev, "out_of_range_rate", "n_out_of_range"),
                _zero_mixed(t),
                *probe_cells,
                train_cell,
            ]
        )
    return rows


def compact_columns(analysis: dict[str, Any]) -> list[str]:
    """COMPACT_COLUMNS with the primary's own name and what is beside it."""
    key = endpoint(analysis)
    beside = {"signal_fidelity": "; pairs right / inverted / tied / unscored",
              "pairwise_accuracy_strict": "; tied pairs"}.get(key, "")  # fmt: skip
    return [COMPACT_COLUMNS[0], f"{LABELS.get(key, key)}{beside}", *COMPACT_COLUMNS[2:]]


def _pair_rates(t: dict[str, Any]) -> str:
    rates = [t.get(f"{k}_pair_rate") for k in ("right", "inverted", "tied", "unscored")]
    if any(r is None for r in rates):
        return ""
    return "; " + " / ".join(fmt_pct(r) for r in rates)


def compact_rows(analysis: dict[str, Any]) -> list[list[str]]:
    """README's table (`compact_columns`): the primary endpoint as configured with what is
    beside it, false praise in its within-group form, unscored and zero-advantage rates, the
    rank range."""
    ranking = rank_judges(analysis)
    key = ranking["endpoint"]
    rows = []
    for name in _judges(analysis):
        ev = analysis["evaluators"][name]
        t = ev.get("truth", {})
        primary = with_n(t, key)
        if key == "signal_fidelity":
            primary += _pair_rates(t)
        if key == "pairwise_accuracy_strict" and t.get("tied_pair_share") is not None:
            primary += f"; {fmt_pct(t['tied_pair_share'])} tied"
        rows.append(
            [
                name,
                primary,
                with_n(t, "false_praise_within_group", pct=True),
                _rate(ev, "unscored_rate", "n_unscored"),
                _zero_mixed(t),
                _rank_cell(ranking, name),
            ]
        )
    return rows


def _table(columns: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def _footnote(analysis: dict[str, Any], rows: list[list[str]]) -> list[str]:
    if not any(NO_CI_MARK in c for row in rows for c in row):
        return []
    n = (analysis.get("settings") or {}).get("min_ci_groups")
    return [
        "",
        f"{NO_CI_MARK} Fewer task groups than the minimum ({n}) for a CI: value and n only.",
    ]


def _load(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    analysis = json.loads((data_dir / "analysis" / "metrics.json").read_text())
    probes_path = data_dir / "probes" / "metrics.json"
    probes = json.loads(probes_path.read_text()) if probes_path.exists() else None
    return analysis, probes


def _study(data_dir: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The training-effect study's prediction.json and effects.json (`judgelab study --out
    <data>/study`), where it has run."""
    study = data_dir / "study"
    if not (study / "prediction.json").exists():
        return None
    return (json.loads((study / "prediction.json").read_text()),
            json.loads((study / "effects.json").read_text()))  # fmt: skip


def study_bullet(data_dir: Path) -> str | None:
    """README's training bullet: the effect measure's check and whether the audit's primary
    predicts the training effect, each sentence generated from the figures it names."""
    found = _study(data_dir)
    if found is None:
        return None
    prediction, effects = found
    preds, check = prediction["predictions"], prediction.get("effect_check")
    if not preds:
        return None
    first = effects["settings"].get("method") == "first-order"
    parts = [(first_order_sentence if first else check_sentence)(check)] if check else []
    apart = prediction.get("arms_apart")  # the planted arms carry no headline figure
    parts.append(apart_sentence(apart) if apart else sentence(preds[0]))
    if prediction.get("judges_vs_planted"):
        parts.append(judges_sentence(prediction["judges_vs_planted"]))
        parts.append(placebo_sentence(prediction["judges_vs_planted"]))
    parts = [p for p in parts if p]  # a study with no judge arm has no judges' sentence
    what = ("one GRPO step (plain SGD, to first order)" if first
            else f"{effects['settings']['steps']} GRPO step(s)")  # fmt: skip
    return (
        f"**Does the audit predict training?** {' '.join(parts)} (The effect: how {what} from "
        "the base policy moves held-out passing against failing code; "
        f"[docs/TRAINING.md](docs/TRAINING.md#does-the-audit-predict-training).)"
    )


def study_section(data_dir: Path) -> list[str]:
    """docs/REFERENCE_AUDIT.md's study section (the study's own markdown, from its files)."""
    found = _study(data_dir)
    if found is None:
        return []
    prediction, effects = found
    text = study_markdown(prediction["predictions"], effects["bank"], effects["seconds"],
                          prediction.get("effect_check"), effects.get("pooled"),
                          prediction.get("judges_vs_planted"),
                          prediction.get("arms_apart"))  # fmt: skip
    return ["", text.rstrip("\n")]


def findings_table(data_dir: Path) -> str:
    """The full markdown table for the audit under `data_dir` (a project's data/ folder)."""
    analysis, probes = _load(data_dir)
    return "\n".join(_table(COLUMNS, findings_rows(analysis, probes))) + "\n"


def unseparated(power: dict[str, Any]) -> str:
    """The pairs Holm's correction does not separate: each one's verdict at the margin
    (equivalent within it, or undecided with the tasks that would decide it), never a
    figure at the observed gap."""
    tested = [(a, b, p) for a, b, p in sorted_pairs(power.get("pairs") or {})
              if p.get("p_value") is not None]  # fmt: skip
    left = [(a, b, p) for a, b, p in tested if not p["separated"]]
    if not tested:
        return "no pair of judges shares enough tasks to be compared"
    if not left:
        return f"every one of the {len(tested)} compared pairs differs after Holm's correction"
    equivalent = [f"{a} and {b}" for a, b, p in left if p.get("equivalent")]
    undecided = sorted(((a, b, p) for a, b, p in left if not p.get("equivalent")),
                       key=lambda t: (t[2].get("tasks_to_decide") is None,
                                      t[2].get("tasks_to_decide") or 0))  # fmt: skip
    parts = [f"{a} and {b} (n = {p['n_groups']}): about {p['tasks_to_decide']}"
             if p.get("tasks_to_decide") is not None
             else f"{a} and {b} (n = {p['n_groups']}): not estimated"
             for a, b, p in undecided]  # fmt: skip
    margin = power.get("margin", 0.05)
    out = (f"{len(left)} of the {len(tested)} compared pairs do not differ after Holm's "
           f"correction; {len(equivalent)} of them {'is' if len(equivalent) == 1 else 'are'} "
           f"shown equivalent within the margin {margin:g} (TOST, Holm)")  # fmt: skip
    if equivalent:
        out += f" ({and_list(equivalent)})"
    if parts:
        units = f" ({power['units']})" if power.get("units") else ""
        out += (f"; the shared tasks{units} each undecided pair would need to be decided at "
                f"the margin (power {power['power']:g}): " + "; ".join(parts))  # fmt: skip
    return out


def bullets(analysis: dict[str, Any]) -> list[str]:
    """The audit's findings (three, four with a power analysis), each generated from the
    figures it names."""
    ranking = rank_judges(analysis)
    key, label = ranking["endpoint"], LABELS.get(ranking["endpoint"], ranking["endpoint"])
    evs = analysis.get("evaluators") or {}
    truth = {n: evs[n].get("truth") or {} for n in _judges(analysis)}
    sentences = recommendation_sentences(analysis)
    first = " ".join(s for s in sentences[1:] if not s.startswith("Caveats per judge"))
    out = [f"**Ranking ({ranking['criterion']}).** {first or sentences[0]}"]

    chance = CHANCE.get(key, 0.5)
    book = analysis.get("rulebook") or {}
    tests = book.get("judges") or {}
    fid = [n for n, t in truth.items() if (t.get("advantage_fidelity_ci_low") or -9) > 0]
    if tests:  # rule 1: one-sided, Holm over the judges
        above = [n for n in truth if (tests.get(n) or {}).get("chance", {}).get("rejects") is False]
        how = (f"after Holm's correction over {book['rules']['chance']['n_tests']} judges "
               f"(one-sided, level {book.get('level', 0.025):g}: rule 1)")  # fmt: skip
    else:
        above = [n for n, t in truth.items() if (t.get(f"{key}_ci_low") or -9) > chance]
        how = "by a valid CI"
    above_txt = (
        f"{and_list(above)}'s {label} is shown above {chance:g} {how}"
        if above
        else f"No judge's {label} is shown above {chance:g} {how}"
    )
    fid_txt = (
        "advantage fidelity above 0 by a valid CI: "
        + "; ".join(f"{n} {with_n(truth[n], 'advantage_fidelity')}" for n in fid)
        if fid
        else "no judge's advantage fidelity is shown above 0 by a valid CI"
    )
    out.append(f"**Better than chance?** {above_txt}; {fid_txt}.")

    flat = sorted(
        (n for n in truth if (truth[n].get("zero_advantage_mixed_rate") or 0) >= 0.2),
        key=lambda n: -truth[n]["zero_advantage_mixed_rate"],
    )
    unscored = sorted(
        (n for n in truth if (evs[n].get("unscored_rate") or 0) >= 0.2),
        key=lambda n: -evs[n]["unscored_rate"],
    )
    parts = [
        f"{n} gives every candidate one score in {_zero_mixed(truth[n])} mixed groups" for n in flat
    ]
    parts += [f"{n} leaves {_rate(evs[n], 'unscored_rate', 'n_unscored')} rows unscored"
              for n in unscored]  # fmt: skip
    signal = "; ".join(parts) if parts else "no judge is flat or unscored in 20 % of its groups"
    out.append(f"**No signal for GRPO.** {signal}.")
    if analysis.get("power"):
        out.append(f"**Not separated.** {unseparated(analysis['power'])}.")
    return out


def _attacks(probes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """judge -> attack -> figures, for the judges the probes attacked."""
    judges = (probes or {}).get("judges") or {}
    return {n: j["attacks"] for n, j in sorted(judges.items()) if j.get("attacks")}


def attack_bullet(probes: dict[str, Any] | None) -> str | None:
    """The attack finding, from the probes' figures (`analysis.attacks`), or None where no
    attack ran: each attack's success rate per judge beside its unattacked baseline, the
    judge-attack pairs called effective (Holm-adjusted p below alpha over the judge x attack
    family, positive uplift) and those whose score shift a valid CI sets apart from 0; no
    other difference is called real."""
    attacks = _attacks(probes)
    if not attacks:
        return None
    names = list(dict.fromkeys(a for per in attacks.values() for a in per))
    tasks = len((probes or {}).get("settings", {}).get("tasks") or [])
    parts = []
    for attack in names:
        rates = [
            f"{judge} {with_n(per[attack], 'success_rate', pct=True)} "
            f"(baseline {with_n(per[attack], 'baseline_rate', pct=True)})"
            for judge, per in attacks.items()
            if attack in per and "success_rate" in per[attack]
        ]
        if rates:
            parts.append(f"{attack}: " + "; ".join(rates))
    success = (
        "Success: the attacked known-failing candidate scored above its call's mean (a "
        "positive GRPO advantage); baseline: the same for the unattacked original. "
        + ". ".join(parts)
        + ". "
        + _effective(attacks, (probes or {}).get("attack_tests") or {})
        + " "
        if parts
        else ""
    )
    return f"**Attacks (probes on {tasks} tasks).** {success}{_shifted(attacks)}."


def _effective(attacks: dict[str, dict[str, Any]], tests: dict[str, Any]) -> str:
    """The attacks called effective over the Holm family, from its own figures."""
    n, alpha = tests.get("n_tests", 0), tests.get("alpha")
    if not n:
        return "No judge × attack test had enough paired tasks for a p-value."
    found = [
        f"{attack} on {judge} (uplift {with_n(v, 'uplift', pct=True)}, Holm-adjusted "
        f"p {fmt_p(v['p_holm'])})"
        for judge, per in attacks.items()
        for attack, v in per.items()
        if v.get("effective")
    ]
    family = f"Holm-adjusted over {n} judge × attack {'test' if n == 1 else 'tests'}"
    if not found:
        return f"No attack raised success above its baseline at p < {alpha}, {family}."
    return f"Effective at p < {alpha}, {family}: " + "; ".join(found) + "."


def _shifted(attacks: dict[str, dict[str, Any]]) -> str:
    moved = []
    for judge, per in attacks.items():
        for attack, v in per.items():
            ci = interval(v, "shift")
            if ci.valid and (ci.low > 0 or ci.high < 0):
                verb = "raised" if ci.low > 0 else "lowered"
                moved.append(
                    f"{attack} {verb} {judge}'s scores of the attacked candidates by "
                    f"{v['shift']:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}], n = {ci.n_groups}"
                )
    return (
        "Against the unattacked members of the same calls, "
        + "; ".join(moved)
        + "; no other attack moved a judge's scores by a valid CI"
        if moved
        else "No attack moved any judge's scores by a valid CI (the shift against the "
        "unattacked members of the same calls)"
    )


JUDGED = {
    "apart": "each task's own samples were judged alone in one call, as GRPO judges them, and "
    "its contrast group in a call of its own (`scores.populations: apart`)",
    "together": "each task's own samples were judged in one call beside its contrast group "
    "(`scores.populations: together`), so a group judge saw the reference solution beside "
    "the policy's code",
}


def design_sentence(analysis: dict[str, Any]) -> str | None:
    """What was judged and how (the analysis' `population`): README says it after the
    findings, so that no hand-written sentence about the run goes stale."""
    pop = analysis.get("population") or {}
    if pop.get("headline") != "natural":
        return None
    judged = JUDGED.get(pop.get("judged") or "", "how the two were grouped is not recorded")
    return (
        f"**What was judged.** {analysis.get('n_tasks')} tasks and "
        f"{analysis.get('n_candidates')} candidates: the policy's own {pop.get('n_candidates')} "
        f"of {pop.get('n_tasks')} tasks (the headline, the groups GRPO trains on) and the "
        f"known-truth contrast groups; {judged}."
    )


def findings_block(
    data_dir: Path, loaded: tuple[dict[str, Any], dict[str, Any] | None] | None = None
) -> str:
    """README's block: the compact table, its footnote, the audit's bullets and, where the
    probes attacked the judges, the attack finding. `loaded`: the metrics `_load` read, where
    the caller has them already."""
    analysis, probes = loaded or _load(data_dir)
    rows = compact_rows(analysis)
    lines = [f"**Decision.** {' '.join(decision_sentences(analysis))}", ""]
    lines += [*_table(compact_columns(analysis), rows), *_footnote(analysis, rows), ""]
    extra = [b for b in (attack_bullet(probes), study_bullet(data_dir)) if b]
    lines += [f"- {b}" for b in [*bullets(analysis), *extra]]
    design = design_sentence(analysis)
    lines += ["", design] if design else []
    lines += ["", f"The full table, the caveats and every paired comparison: [{AUDIT_DOC}]"
                  f"({AUDIT_DOC})."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _columns_note(threshold: Any) -> str:
    """What the full table's columns measure."""
    return (
        "Strict pairwise accuracy counts a tied (passing, failing) pair as wrong; the ½-tie "
        "figure is secondary. Top-1 − chance: best-of-k accuracy minus the passing share of "
        "the group. Advantage fidelity: the within-group correlation of the judge's GRPO "
        "advantages (score − mean) / std with the tests' (1 = as the tests, 0 = no signal). "
        "False praise within group: failing candidates scored at or above a passing one of "
        f"their group. False praise ≥ threshold ({threshold}) is on an absolute scale, which "
        "a group judge (RULER) does not have: it is not a basis for comparing protocols. "
        "Order-consistent accuracy (probes): on the known-truth probe groups judged in two "
        "orders, the share of (passing, failing) pairs whose passing candidate wins in both. "
        "Position consistency leaves out flat pairs (tied in both orders)."
    )


def audit_document(data_dir: Path) -> str:
    """docs/REFERENCE_AUDIT.md: generated, held to the committed metrics by a test."""
    analysis, probes = _load(data_dir)
    power = analysis.get("power") or {}
    full = findings_rows(analysis, probes)
    threshold = (analysis.get("settings") or {}).get("praise_threshold")
    lines = [
        "# The reference audit in full",
        "",
        "Generated by `python -m judgelab.report.headline reference/data --write` from "
        "`reference/data/analysis/metrics.json` and `reference/data/probes/metrics.json`; "
        'tests/unit/test_reference_results.py holds this file to them. "n" counts the task '
        "groups behind a figure (probe groups for the probe columns). Mixed groups: tasks "
        "with both a passing and a failing candidate, the only ones where GRPO can learn to "
        "prefer passing code.",
        "",
        "## Decision",
        "",
        " ".join(decision_sentences(analysis)),
        "",
        GLOSSARY,
        "",
        "## Which judge to train on",
        "",
        " ".join(recommendation_sentences(analysis)),
        "",
        *_table(CAVEAT_COLUMNS, caveat_rows(analysis)),
        "",
        RANK_NOTE,
        "",
        "## Every figure",
        "",
        *_table(COLUMNS, full),
        *_footnote(analysis, full),
        "",
        _columns_note(threshold),
        "",
        f"## Paired comparisons ({LABELS.get(power.get('endpoint') or '', 'primary')})",
        "",
        *_table(POWER_HEADER, power_rows(power, fmt_ci)),
        "",
        f"Paired t-based cluster intervals over the {power.get('units') or 'shared mixed tasks'}; "
        "p-values Holm-corrected "
        f"over {power.get('n_comparisons')} comparisons; equivalence: TOST within the margin "
        f"{power.get('margin')} (`analysis.margin`), Holm-corrected over the same pairs; "
        f"tasks to decide an undecided pair: shared tasks that find a gap of the margin or "
        f"show equivalence within it with power {power.get('power')}, each test at alpha "
        f"{power.get('alpha')} / {power.get('n_comparisons')}, from the pair's own spread.",
    ]
    attacks = attack_lines(
        (probes or {}).get("judges") or {},  # judges without attacks give no rows
        with_n,
        ((probes or {}).get("settings") or {}).get("fail_above"),
        (probes or {}).get("attack_tests"),
    )
    lines += ["", *attacks, *_footnote(analysis, [attacks])] if attacks else []
    lines += study_section(data_dir)
    return "\n".join(lines) + "\n"


def splice(readme: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """README with one generated block replaced (between its markers)."""
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}{end}{tail}"


def readme_blocks(readme: str, data_dir: Path) -> str:
    """README with both generated blocks rewritten: the findings, and the practitioner's
    reading of them (`judgelab.report.practice`)."""
    analysis, probes = loaded = _load(data_dir)
    readme = splice(readme, findings_block(data_dir, loaded))
    return splice(readme, practice.practice_block(analysis, probes), practice.BEGIN, practice.END)


def main(argv: list[str]) -> None:
    data = Path(argv[0] if argv and not argv[0].startswith("--") else "data")
    if "--write" in argv:
        root = Path.cwd()
        readme = root / "README.md"
        readme.write_text(readme_blocks(readme.read_text(), data))
        (root / AUDIT_DOC).write_text(audit_document(data))
        return
    sys.stdout.write(findings_block(data))


if __name__ == "__main__":
    main(sys.argv[1:])
