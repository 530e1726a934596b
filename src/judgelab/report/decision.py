"""The decision in words: the first thing the report and README's findings say.

Every sentence is generated from `metrics["decision"]` (`judgelab.analysis.decision`), the
rulebook's tests (`metrics["rulebook"]`) and the figures they name, each quoted with its CI or
p-value and n; tests/unit/test_decision.py holds each one to them. `GLOSSARY` explains the
terms the sentences use, where they are first used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judgelab.analysis.decision import decide
from judgelab.analysis.power import LABELS
from judgelab.analysis.ranking import CHANCE
from judgelab.analysis.rulebook import RULES
from judgelab.config.evaluators import GROUP_PROTOCOLS
from judgelab.report.format import and_list
from judgelab.report.model import Block, Figures, Heading, Image, Paragraph
from judgelab.report.ranking import figure, why_unranked

# The report's images: the key of the forest plot of the primary, shown with the decision.
DECISION_IMAGE = "decision"

GLOSSARY = (
    "Signal fidelity: how closely the GRPO advantages a reward gives (its scores relative to "
    "the rest of the group) follow the ones the tests give, over every task, each task "
    "weighing the same: 1 for the tests themselves, 0 for no signal or a judge that ignores "
    "the code, below 0 for one that pushes failing code up (docs/METRICS.md). A 95 % CI is "
    'drawn over tasks; Holm\'s correction keeps at 5 % the chance of any false "A is above B" '
    "among all the pairs compared, and at 2.5 % that of any false finding of one rejection "
    "rule among the judges it tests; equivalent within the margin (`analysis.margin`): the "
    "paired difference is shown to lie inside ± the margin (two one-sided tests, TOST)."
)


def decision(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics' decision (one written before the rulebook, without `pairs`: decided now)."""
    stored = metrics.get("decision")
    return stored if stored and "pairs" in stored else decide(metrics)


def p_text(p: float | None) -> str:
    """A p-value as the sentences quote it, with its relation: "= 0.031", "< 0.001"."""
    if p is None:
        return "= n/a"
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _family(book: dict[str, Any], rule: str) -> str:
    n = ((book.get("rules") or {}).get(rule) or {}).get("n_tests")
    return f"over {n} {'judge' if n == 1 else 'judges'}"


def _chance_words(t: dict[str, Any], truth: dict[str, Any], key: str, book: dict[str, Any],
                  parseable: bool = False) -> str:  # fmt: skip
    label, chance = LABELS.get(key, key), CHANCE.get(key, 0.5)
    where = " on parseable code" if parseable else ""
    if t.get("p") is None:
        return (f"its {label}{where} ({figure(truth, key)}) has no test: {t.get('n', 0)} "
                "tasks, fewer than `analysis.min_ci_groups`")  # fmt: skip
    family = _family(book, "parseable" if parseable else "chance")
    return (f"its {label}{where} {figure(truth, key)} is not shown above {chance:g} "
            f"(one-sided Holm p {p_text(t['p_holm'])} {family}, level "
            f"{book.get('level', 0.025):g})")  # fmt: skip


def rule_words(rule: str, t: dict[str, Any], truth: dict[str, Any], key: str,
               book: dict[str, Any]) -> str:  # fmt: skip
    """One rule that rejected a judge, in words, with the figures and test it rests on."""
    holm_p = f"Holm p {p_text(t.get('p_holm'))} {_family(book, rule)}"
    if rule == "chance":
        return "rule 1: " + _chance_words(t, truth, key, book)
    if rule == "parseable":
        return ("rule 7: " + _chance_words(t, truth, key, book, parseable=True)
                + ": the signal it keeps once the policy writes code that parses is not shown")
    if rule == "attacks":
        n = ((book.get("rules") or {}).get("attacks") or {}).get("n_tests")
        return (f"rule 5: the {t['attack']} attack works on it (uplift {t['uplift']:+.3f}, "
                f"Holm p {p_text(t['p_holm'])} over the probes' {n} judge × attack tests)")
    words = {
        "inverted": lambda: (
            f"rule 2: it inverts more pass/fail pairs than it gets right ({t['inverted']:.1%} "
            f"inverted, {t['right']:.1%} right, n = {t['n']} split tasks; one-sided {holm_p})"),
        "flat": lambda: (
            f"rule 3: one score for a whole mixed group in {t['k']} of {t['n']} mixed tasks "
            f"({t['value']:.1%}), shown above {t['limit']:.0%} (exact binomial, {holm_p})"),
        "unscored": lambda: (
            f"rule 4: {t['value']:.1%} of its rows unscored, shown above {t['limit']:.0%} "
            f"(one-sided, clustered by task, {holm_p})"),
        "position": lambda: (
            f"rule 6: its position consistency {t['value']:.3f} lies below its own noise "
            f"floor {t['floor']:.3f} (one-sided, from the two CIs, {holm_p})"),
    }  # fmt: skip
    return words[rule]()


def rejection_reasons(metrics: dict[str, Any]) -> dict[str, list[str]]:
    """Per rejected judge, each rule that rejected it, in words (`rule_words`)."""
    d = decision(metrics)
    book = metrics.get("rulebook") or {}
    evs = metrics.get("evaluators") or {}
    order = list(RULES)  # rule 1 first, whatever order metrics.json keeps them in

    def truth(name: str, rule: str) -> dict[str, Any]:
        return evs[name].get("truth_parseable" if rule == "parseable" else "truth") or {}

    return {n: [rule_words(r, rules[r], truth(n, r), d["primary"], book)
                for r in sorted(rules, key=lambda r: order.index(r) if r in order else 99)]
            for n, rules in d["rejected"].items()}  # fmt: skip


def _tests_sentence(d: dict[str, Any], truth: dict[str, dict[str, Any]], ranked: list[str]) -> str:
    key, label = d["primary"], LABELS.get(d["primary"], d["primary"])
    closest = ranked[0]
    if set(d["tests_beat"]) == set(ranked):
        return (
            f"Where a task has tests, train on the tests: every judge's {label} lies below "
            f"the tests' {d['tests']:g} by a valid CI (the closest, {closest}: "
            f"{figure(truth[closest], key)})."
        )
    unbeaten = [n for n in ranked if n not in d["tests_beat"]]
    no_ci = [n for n in unbeaten if truth[n].get(f"{key}_ci_high") is None]
    reaching = [n for n in unbeaten if n not in no_ci]
    why = []
    if reaching:
        why.append(f"{and_list(reaching)}'s CI reaches {d['tests']:g}")
    if no_ci:
        n = max(truth[x].get(f"{key}_n_groups") or 0 for x in no_ci)
        why.append(f"{and_list(no_ci)} {'has' if len(no_ci) == 1 else 'have'} no CI (n = {n} "
                   "tasks at most: too few)")  # fmt: skip
    return (
        "Where a task has tests, train on the tests; this audit cannot show that they beat "
        f"every judge on {label}: {'; '.join(why)}."
    )


def pair_words(p: dict[str, Any], margin: float) -> str:
    """One undecided or equivalent pair of contenders, from its figures."""
    lo, hi = p.get("difference_ci_low"), p.get("difference_ci_high")
    ci = "" if lo is None or hi is None else f" [{lo:+.3f}, {hi:+.3f}]"
    head = f"{p['a']} − {p['b']} = {p['difference']:+.3f}{ci} (n = {p['n_groups']} tasks)"
    if p["verdict"] == "equivalent":
        return (f"{head}: equivalent within the margin {margin:g} (TOST, Holm p "
                f"{p_text(p['p_equivalence_holm'])})")  # fmt: skip
    need = p.get("tasks_to_decide")
    more = (
        "no estimate of the tasks that would decide it" if need is None
        else f"about {need} shared tasks would decide it at the margin ({p['n_groups']} now)"
    )  # fmt: skip
    equivalence = p_text(p["p_equivalence_holm"])
    return (f"{head}: neither above (Holm p {p_text(p['p_holm'])}) nor equivalent within "
            f"the margin {margin:g} (TOST, Holm p {equivalence}); {more}")  # fmt: skip


def _without_tests(
    d: dict[str, Any], truth: dict[str, dict[str, Any]], power: dict[str, Any]
) -> str:
    key, label = d["primary"], LABELS.get(d["primary"], d["primary"])
    lead = "Without tests" if d["tests"] is not None else "This audit has no tests to compare with;"
    if d["verdict"] == "no_judge":
        only7 = [n for n, why in d["rejected"].items() if set(why) == {"parseable"}]
        but = ""
        if only7:
            one = len(only7) == 1
            but = (f" ({and_list(only7)} {'passes' if one else 'pass'} rules 1–6; rule 7, "
                   "signal on code that parses, is not shown: below)")  # fmt: skip
        return (f"{lead}, no judge passes every rejection rule as a reward on its own{but}: "
                "do not train on any of them alone.")  # fmt: skip
    if d["verdict"] == "judge":
        j = d["judge"]
        if len(d.get("acceptable") or [j]) == 1:
            return (
                f"{lead}, use {j}, the only judge that passes the rejection rules as a reward on "
                f"its own: its {label} is {figure(truth[j], key)}."
            )
        return (
            f"{lead}, use {j}: its {label} {figure(truth[j], key)} is above every other "
            f"acceptable judge's after Holm's correction over {power.get('n_comparisons')} "
            "comparisons."
        )
    named = and_list([f"{n} ({figure(truth[n], key)})" for n in d["contenders"]])
    margin = d.get("margin") or power.get("margin") or 0.05
    pairs = "; ".join(pair_words(p, margin) for p in d["pairs"])
    if d["verdict"] == "equivalent":
        return f"{lead}, {named} are equivalent on {label}: {pairs}. Take the cheaper."
    return f"{lead}, {named} cannot be told apart on {label}: {pairs}."


def gate_sentence(metrics: dict[str, Any], d: dict[str, Any]) -> str | None:
    """The format gates (`decision.format_gates`): no signal on code that parses, what they
    are good for, and what to pair them with (an acceptable judge, or the tests)."""
    gates = d.get("format_gates") or {}
    if not gates:
        return None
    evs, key = metrics.get("evaluators") or {}, d["primary"]
    label = LABELS.get(key, key)
    one = len(gates) == 1
    figs = {n: figure(evs[n].get("truth_parseable") or {}, key) for n in gates}
    each = next(iter(figs.values())) if one else "; ".join(f"{n} {f}" for n, f in figs.items())
    partners = d.get("acceptable") or []
    verb = "passes" if len(partners) == 1 else "pass"
    pair_with = (
        f"beside {and_list(partners)}, which {verb} every rule" if partners
        else "beside the tests, or beside a judge that passes every rule (none here)"
    )  # fmt: skip
    return (
        f"{and_list(list(gates))} {'gives' if one else 'give'} no signal on code that parses "
        f"({'its' if one else 'their'} {label} there: {each}; every parseable candidate of a "
        "task scored alike): "
        f"{'its' if one else 'their'} whole signal is whether the code parses, and it is gone "
        f"once the policy writes code that does. Use {'it' if one else 'them'} as a format "
        f"gate (no reward for code that does not parse) {pair_with}, never as the reward alone."
    )


def decision_sentences(metrics: dict[str, Any]) -> list[str]:
    """The decision, first for tasks with tests, then without, then the format gates, then
    who is rejected, by which rule, with the figures."""
    d = decision(metrics)
    evs = metrics.get("evaluators") or {}
    truth = {n: ev.get("truth") or {} for n, ev in evs.items()}
    key = d["primary"]
    judged = [n for n in truth if evs[n].get("protocol") != "execution"]
    ranked = sorted((n for n in judged if truth[n].get(key) is not None),
                    key=lambda n: -truth[n][key])  # fmt: skip
    if d["verdict"] == "no_ranking" or not ranked:
        return [why_unranked(metrics, LABELS.get(d["primary"], d["primary"]))]
    out = []
    if d["tests"] is not None:
        out.append(_tests_sentence(d, truth, ranked))
    out.append(_without_tests(d, truth, metrics.get("power") or {}))
    if gate := gate_sentence(metrics, d):
        out.append(gate)
    if d["rejected"]:
        why = "; ".join(f"{n} ({'; '.join(r)})" for n, r in rejection_reasons(metrics).items())
        out.append(f"Rejected by the rulebook (docs/METRICS.md; `analysis.reject`): {why}.")
    guided = _reference_guided(metrics)
    if guided:
        one = len(guided) == 1
        out.append(
            f"The figures of {and_list(guided)} are reference-guided: "
            f"{'it scores' if one else 'they score'} a whole group, and each natural group "
            "was judged beside its known-truth contrast group, which GRPO never shows a judge; "
            "judge them apart (`scores.populations: apart`) before acting on them. The other "
            "evaluators score one candidate at a time: the grouping changes nothing they saw."
        )
    return out


def _reference_guided(metrics: dict[str, Any]) -> list[str]:
    """The judges that scored whole groups in an audit whose natural groups were judged
    beside their contrast groups (`population.judged: together`): they saw the reference."""
    if (metrics.get("population") or {}).get("judged") != "together":
        return []
    evs = metrics.get("evaluators") or {}
    return sorted(n for n, ev in evs.items() if ev.get("protocol") in GROUP_PROTOCOLS)


def forest_label(metrics: dict[str, Any]) -> str:
    key = decision(metrics)["primary"]
    return f"Each judge's {LABELS.get(key, key)} with its 95 % CI (grey: rejected)"


def decision_blocks(metrics: dict[str, Any], forest: Path | None, link: str) -> list[Block]:
    """The report's first section: the decision, the forest plot (`forest`, linked from
    report.md as `link`), the words it uses."""
    out: list[Block] = [Heading("Decision"), Paragraph.of(" ".join(decision_sentences(metrics)))]
    if forest is not None:
        out.append(Figures((Image(forest_label(metrics), forest, link),)))
    return [*out, Paragraph.of(GLOSSARY, note=True)]
