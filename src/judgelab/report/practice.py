"""README's reading of a finished audit for a practitioner: what to take from it, where the
data stops, and what the probes add. It follows the findings block and does not repeat it:
the decision (the tests, the judge to use, the rejections, a reference-guided design) and the
flat groups are said there. Every sentence is generated from the figures it names
(`metrics.json` of the analysis and of the probes) and is said only where they bear it out:
a claim that a rerun no longer supports is not written. tests/unit/test_practice.py holds
each sentence to hand-made figures on both sides of its condition.

`practice_bullets(analysis, probes)` returns README's bullets after the findings block
(`judgelab.report.headline` splices them between their own markers).
"""

from __future__ import annotations

import re
from typing import Any

from judgelab.analysis.power import LABELS
from judgelab.analysis.ranking import rank_judges
from judgelab.config.evaluators import JUDGE_PROTOCOLS
from judgelab.report.decision import decision, rejection_reasons
from judgelab.report.format import and_list, fmt_pct, with_n

BEGIN, END = "<!-- reference-practice:begin -->", "<!-- reference-practice:end -->"


def _truth(analysis: dict[str, Any]) -> dict[str, dict[str, Any]]:
    evs = analysis.get("evaluators") or {}
    return {n: ev.get("truth") or {} for n, ev in evs.items() if ev.get("protocol") != "execution"}


def _llm(analysis: dict[str, Any]) -> list[str]:
    evs = analysis.get("evaluators") or {}
    return sorted(n for n, ev in evs.items() if ev.get("protocol") in JUDGE_PROTOCOLS)


def pairs_sentence(analysis: dict[str, Any]) -> str | None:
    """Whether any LLM judge gets most passing-failing pairs right (strict, ties wrong)."""
    truth = _truth(analysis)
    key = "pairwise_accuracy_strict"
    llm = [n for n in _llm(analysis) if truth[n].get(key) is not None]
    if not llm:
        return None
    best = max(llm, key=lambda n: truth[n][key])
    above = [n for n in llm if (truth[n].get(f"{key}_ci_low") or 0) > 0.5]
    if above:
        named = "; ".join(f"{n} {with_n(truth[n], key)}" for n in above)
        verb = "gets" if len(above) == 1 else "get"
        return f"{and_list(above)} {verb} most passing–failing pairs right by a valid CI: {named}."
    highs = {n: truth[n].get(f"{key}_ci_high") for n in llm}
    if all(h is not None and h < 0.5 for h in highs.values()):
        return (
            "No LLM judge gets most passing–failing pairs right: each one's strict pairwise "
            f"accuracy (a tie counts as wrong) lies below 0.5 by a valid CI, the highest "
            f"{best}'s {with_n(truth[best], key)}."
        )
    if all(truth[n][key] < 0.5 for n in llm):
        reach = [n for n, h in highs.items() if h is not None and h >= 0.5]
        no_ci = [n for n, h in highs.items() if h is None]
        why = [f"{and_list(reach)}'s CI reaches 0.5"] if reach else []
        why += [f"{and_list(no_ci)} {'has' if len(no_ci) == 1 else 'have'} no CI"] if no_ci else []
        return (
            "No LLM judge is shown to get most passing–failing pairs right: each one's strict "
            f"pairwise accuracy (a tie counts as wrong) is below 0.5, the highest {best}'s "
            f"{with_n(truth[best], key)}, but {' and '.join(why)}: the audit cannot say that "
            "none does."
        )
    return None


def rejected_higher_sentence(analysis: dict[str, Any]) -> str | None:
    """The rejected rewards that score at least as high as the judge the decision names (the
    decision itself, the tests and the rejections, opens the findings block)."""
    d = decision(analysis)
    if d["verdict"] != "judge":
        return None
    truth, key, j = _truth(analysis), d["primary"], d["judge"]
    level = truth[j].get(key)
    values = {n: truth.get(n, {}).get(key) for n in d.get("rejected") or {}}
    higher = [
        n
        for n, v in values.items()
        if level is not None and v is not None and v >= level and d["rejected"][n]
    ]
    if not higher:
        return None
    one = len(higher) == 1
    parts = "; ".join(f"{n} ({with_n(truth[n], key)})" for n in higher)
    reasons = rejection_reasons(analysis)
    why = "; ".join(f"{n}: {'; '.join(reasons[n])}" for n in higher)
    return (
        f"{parts} {'scores' if one else 'score'} as high on {LABELS.get(key, key)} as {j}, "
        f"the judge the decision names, but {'is' if one else 'are'} rejected ({why})."
    )


def unseparated_sentence(analysis: dict[str, Any]) -> str | None:
    """How many mixed tasks the pairs the block calls not separated would need."""
    power = analysis.get("power") or {}
    pairs = power.get("pairs") or {}
    left = [p for a in pairs for p in pairs[a].values()
            if p.get("p_value") is not None and not p["separated"]]  # fmt: skip
    needed = [p["tasks_to_decide"] for p in left if p.get("tasks_to_decide")]
    if not left or not needed:
        return None
    span = f"{min(needed)}" if min(needed) == max(needed) else f"{min(needed)} to {max(needed)}"
    units = power.get("units") or "shared tasks"
    return (
        f"The {len(needed)} undecided pairs (not separated, not shown equivalent) would each "
        f"need {span} shared tasks ({units}) to be decided at the margin "
        f"{power.get('margin', 0.05):g}: a gap of the margin found or equivalence within it "
        f"shown (from each pair's own spread, power {power.get('power', 0.8):g})."
    )


def unscored_sentence(analysis: dict[str, Any]) -> str | None:
    """The LLM judges that return no usable score for most candidates, and what that costs."""
    evs, truth = analysis.get("evaluators") or {}, _truth(analysis)
    d = decision(analysis)
    n_key = "pairwise_accuracy_strict_n_groups"
    llm = _llm(analysis)
    ranks = rank_judges(analysis).get("ranks") or {}
    out = []
    for n in llm:
        ev = evs[n]
        if (ev.get("unscored_rate") or 0) <= 0.5:
            continue
        others = [truth[o].get(n_key) or 0 for o in llm if o != n]
        text = (
            f"{n} returns no usable score for most candidates ({fmt_pct(ev['unscored_rate'])}, "
            f"{ev.get('n_unscored')} of {ev.get('n_rows')})"
        )
        if others:
            lo, hi = min(others), max(others)
            span = f"{lo}" if lo == hi else f"{lo}–{hi}"
            text += (
                f": its pairwise figures rest on {truth[n].get(n_key) or 0} mixed tasks against "
                f"{span} for the other LLM judges"
            )
        best = (ranks.get(n) or (None, None))[0]
        if best is not None and best > 1:
            why = ("; signal fidelity counts each unscored candidate as no push (advantage 0)"
                   if d["primary"] == "signal_fidelity" else "")  # fmt: skip
            text += f"{why}; it cannot rank first (rank {best}–{ranks[n][1]})"
        out.append(text + ".")
    return " ".join(out) or None


def _task_span(tasks: list[str]) -> str:
    """`HumanEval/0–29` for consecutive ids of one source, else `N tasks`."""
    parsed = [re.fullmatch(r"(.+)/(\d+)", t) for t in tasks]
    if tasks and all(parsed):
        heads = {m.group(1) for m in parsed if m}
        nums = sorted(int(m.group(2)) for m in parsed if m)
        if len(heads) == 1 and nums == list(range(nums[0], nums[0] + len(nums))):
            return f"{heads.pop()}/{nums[0]}–{nums[-1]}"
    return f"{len(tasks)} tasks"


def probes_bullet(probes: dict[str, Any] | None) -> str | None:
    """What the probes add: order-consistent accuracy, the order's sway beside the repeats'
    noise, and the family gap, each where the probes measured it."""
    judges = (probes or {}).get("judges") or {}
    if not judges:
        return None
    tasks = ((probes or {}).get("settings") or {}).get("tasks") or []
    out = [
        f"The probes ran on {_task_span(tasks)} for {and_list(sorted(judges))} "
        "([docs/PROBES.md](docs/PROBES.md); n counts tasks)."
    ]
    acc = "order_consistent_accuracy"
    cal = {n: j.get("calibration") or {} for n, j in judges.items()}
    have = sorted((n for n in cal if cal[n].get(acc) is not None), key=lambda n: -cal[n][acc])
    if have:
        parts = "; ".join(f"{n} {with_n(cal[n], acc)}" for n in have)
        out.append(
            "On the known-truth groups judged in both orders, the share of (passing, failing) "
            f"pairs in which the passing code wins in both: {parts}."
        )
    out += _order_sentences(judges)
    out += _family_sentences(judges)
    return " ".join(out)


def _order_sentences(judges: dict[str, Any]) -> list[str]:
    key = "position_consistency"
    swayed = []
    for n, j in sorted(judges.items()):
        across, repeats = j.get("position") or {}, j.get("noise_floor") or {}
        high, low = across.get(f"{key}_ci_high"), repeats.get(f"{key}_ci_low")
        if high is not None and low is not None and high < low:
            swayed.append(
                f"The order sways {n}: the share of pairs that keep their order across the "
                f"two orders is {with_n(across, key)}, against {with_n(repeats, key)} "
                "between repeats in one order."
            )
    return swayed


def _family_sentences(judges: dict[str, Any]) -> list[str]:
    key = "family_gap"
    gaps = {n: j.get("self_preference") or {} for n, j in sorted(judges.items())}
    valid = {n: g for n, g in gaps.items()
             if g.get(f"{key}_ci_low") is not None and not g.get(f"{key}_confounded")}  # fmt: skip
    up = [n for n, g in valid.items() if g[f"{key}_ci_low"] > 0]
    down = [n for n, g in valid.items() if g[f"{key}_ci_high"] < 0]
    out = []
    for names, verb in ((up, "above"), (down, "below")):
        if names:
            parts = "; ".join(f"{with_n(valid[n], key)} for {n}" for n in names)
            out.append(
                f"{and_list(names)} {'scores' if len(names) == 1 else 'score'} code from "
                f"{'its' if len(names) == 1 else 'their'} own model family {verb} other "
                f"families' code of the same task and test verdict (family gap {parts}); a gap "
                "within one test verdict may still be quality the tests do not see."
            )
    return out


def practice_bullets(analysis: dict[str, Any], probes: dict[str, Any] | None) -> list[str]:
    """README's bullets after the findings block; a bullet with nothing to say is left out."""
    take = [pairs_sentence(analysis), rejected_higher_sentence(analysis)]
    stops = [unseparated_sentence(analysis), unscored_sentence(analysis)]
    bullets = [
        ("What a practitioner can take from it.", take),
        ("Where the data stops.", stops),
        ("A judge is more than its accuracy.", [probes_bullet(probes)]),
    ]
    return [f"**{head}** {' '.join(s for s in said if s)}"
            for head, said in bullets if any(said)]  # fmt: skip


def practice_block(analysis: dict[str, Any], probes: dict[str, Any] | None) -> str:
    return "".join(f"- {b}\n" for b in practice_bullets(analysis, probes))
