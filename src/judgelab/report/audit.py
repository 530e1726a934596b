"""The human-readable report: report.md and a self-contained report.html, both rendered from
one report model (`build_report`: `report.model`'s blocks) by `report.as_markdown` and
`report.as_html`; a section is written once, as blocks.

Contract:
- Built only from the metrics dict (`run_analysis`'s result), a latency summary, the worst
  false-praise examples and the PNGs already written; nothing is recomputed here. Optional
  sections (the bias probes) arrive ready-made, as a `Section`, from `report.panels`; the
  training section is blocks from `report.training`.
- report.html needs no network: inline CSS, PNGs embedded as base64 data URIs, no scripts.
  Every piece of text that came from data (evaluator and task names, judge explanations,
  completions, reasons) is HTML-escaped by `report.as_html`; the HTML is rendered from the
  model, not through a Markdown converter, because Markdown passes raw HTML through.
- In report.md, model-generated text sits inside code fences longer than any backtick run in
  it, so it cannot break out of the fence.
- Latency appears here only: timings differ between identical runs, so never in metrics.json.
- A figure shows its CI, or, without one, why (`<figure>_ci_reason`: "n = 2 groups: too few
  for a CI (minimum 5)"); resamples in which it was undefined are shown beside the CI. Prose
  calls a ranking or a difference real only when a valid CI excludes the null value; without
  a CI it says that no claim can be made.
- Group judges (`GROUP_PROTOCOLS`: RULER) are headlined by within-task figures; pooled ROC-AUC,
  the praise threshold and mean scores are labelled absolute-scale, with their within-task
  standardised versions beside them.
- The intro says what kind each failure is (tests failed, did not parse, no code) and what
  left a candidate without truth (sandbox error, no tests). Where some failing candidates had
  no code or code that did not parse, a second headline table and a finding per judge give
  the same figures on parseable code only (`truth_parseable`); otherwise one line says they
  are the same.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgelab.config.evaluators import GROUP_PROTOCOLS
from judgelab.report import as_html, as_markdown, failures
from judgelab.report import training as training_report
from judgelab.report.decision import DECISION_IMAGE, decision_blocks
from judgelab.report.format import NA, fmt_cell, fmt_ci, fmt_num, fmt_pct, interval, plural
from judgelab.report.model import (
    Block,
    BulletList,
    Code,
    Document,
    Figures,
    Heading,
    Image,
    Listing,
    Notes,
    Paragraph,
    Raw,
    ci_table,
    table,
)
from judgelab.report.panels import Section
from judgelab.report.power import power_blocks
from judgelab.report.ranking import ranking_blocks

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- formatting


HEADLINE_COLUMNS = (
    "evaluator",
    "protocol",
    "scored",
    "signal fidelity (the default primary)",
    "strict pairwise acc. (ties wrong)",
    "tie rate",
    "top-1 acc. − chance",
    "advantage fidelity",
    "zero-advantage mixed groups",
    "false praise within group",
    "false praise (standardised, mixed groups)",
    "pairwise acc. (ties ½, secondary)",
    "ROC-AUC (pooled, absolute scale)",
    "false praise (score ≥ threshold, absolute scale)",
)
DISTRIBUTION_COLUMNS = (
    "evaluator",
    "mean",
    "median",
    "std",
    "IQR",
    "unscored",
    "judge failures",
    "out of range",
    "zero-advantage groups",
    "within-group std",
)


def headline_rows(evaluators: dict[str, dict[str, Any]], truth: str = "truth") -> list[list[str]]:
    """One row per evaluator; `truth`: its figures on all code, or `truth_parseable`."""
    rows = []
    for name in sorted(evaluators):
        ev = evaluators[name]
        t = ev.get(truth, {})
        rows.append(
            [
                name,
                str(ev.get("protocol") or NA),
                f"{ev['n_scored']}/{ev['n_rows']}",
                fmt_cell(t, "signal_fidelity"),
                fmt_cell(t, "pairwise_accuracy_strict"),
                fmt_cell(t, "tied_pair_share", pct=True),
                fmt_cell(t, "top1_over_chance"),
                fmt_cell(t, "advantage_fidelity"),
                fmt_cell(t, "zero_advantage_mixed_rate", pct=True),
                fmt_cell(t, "false_praise_within_group", pct=True),
                fmt_cell(t, "false_praise_standardised", pct=True),
                fmt_cell(t, "pairwise_accuracy"),
                fmt_cell(t, "roc_auc"),
                fmt_cell(t, "false_praise_absolute", pct=True),
            ]
        )
    return rows


def distribution_rows(evaluators: dict[str, dict[str, Any]]) -> list[list[str]]:
    return [
        [
            name,
            fmt_num(ev.get("mean")),
            fmt_num(ev.get("median")),
            fmt_num(ev.get("std")),
            fmt_num(ev.get("iqr")),
            fmt_pct(ev.get("unscored_rate")),
            fmt_pct(ev.get("judge_failure_rate")),
            fmt_pct(ev.get("out_of_range_rate")),
            zero_advantage_cell(ev),
            fmt_num(ev.get("within_group_std")),
        ]
        for name, ev in sorted(evaluators.items())
    ]


def zero_advantage_cell(ev: dict[str, Any]) -> str:
    """`50 % (1 of 2)`: groups in which every candidate got the same score."""
    n, rate = ev.get("n_signal_groups") or 0, ev.get("zero_advantage_rate")
    if rate is None:
        return NA
    return f"{fmt_pct(rate)} ({ev['n_zero_advantage_groups']} of {n})"


def signal_finding(ev: dict[str, Any]) -> str | None:
    """A reward with no spread inside a group teaches GRPO nothing: say so, with its n."""
    n, rate = ev.get("n_signal_groups") or 0, ev.get("zero_advantage_rate")
    if not n or rate is None or rate == 0:
        return None
    if rate == 1:
        return (
            f"gives no learning signal: in all {plural(n, 'group')} every candidate got the same "
            "score, so GRPO's advantage is 0 for every one of them."
        )
    return (
        f"gives no learning signal in {ev['n_zero_advantage_groups']} of {plural(n, 'group')}: "
        "every candidate of those got the same score (zero advantage)."
    )


def n_unparseable(metrics: dict[str, Any]) -> int:
    """Candidates with execution truth on all code but not on parseable code only."""
    tr = metrics.get("execution_truth") or {}
    parseable = tr.get("parseable")
    if parseable is None:
        return 0
    return int(tr.get("n_candidates_with_truth") or 0) - int(
        parseable.get("n_candidates_with_truth") or 0
    )


def outcome_lines(metrics: dict[str, Any]) -> list[str]:
    """What kind each failure was, what left candidates without truth, and whether the
    figures on parseable code only differ from the headline ones."""
    tr = metrics.get("execution_truth") or {}
    kinds = tr.get("outcomes")
    if not tr.get("evaluator") or kinds is None:
        return []
    lines = []
    failed = [
        (kinds.get("tests_failed", 0), "ran and failed (a test, or a time or memory limit)"),
        (kinds.get("not_parsed", 0), "did not parse (a syntax error before any test ran)"),
        (kinds.get("no_code", 0), "had no code"),
    ]
    if any(n for n, _ in failed):
        kinds_failed = ", ".join(f"{n} {what}" for n, what in failed if n)
        lines.append(f"Of the {tr.get('n_failing')} failing candidates, {kinds_failed}.")
    untested = []
    if n := kinds.get("sandbox_error", 0):
        untested.append(f"{plural(n, 'sandbox error')} (no verdict on the code)")
    if n := kinds.get("no_tests", 0):
        untested.append(f"{n} on tasks without tests")
    if n := kinds.get("no_execution_row", 0):
        untested.append(f"{n} never run by the execution evaluator")
    if untested:
        lines.append(f"Without a test result: {', '.join(untested)}.")
    left_out = n_unparseable(metrics)
    if left_out:
        lines.append(
            f"The figures on parseable code only leave out the {plural(left_out, 'candidate')} "
            "without code or whose code did not parse."
        )
    else:
        lines.append(
            "No candidate with a test result lacked code or failed to parse, so the figures on "
            "parseable code only are those shown."
        )
    return lines


def parseable_finding(t: dict[str, Any], left_out: int, group: bool) -> str | None:
    """One line: the headline figures on parseable code only, when some code did not parse."""
    if not left_out or not t:
        return None
    figures = []
    if t.get("pairwise_accuracy") is not None:
        figures.append(f"pairwise accuracy {fmt_ci(t, 'pairwise_accuracy')}")
    if t.get("false_praise_absolute") is not None:
        scale = " (absolute scale)" if group else ""
        figures.append(
            f"false praise{scale} {fmt_ci(t, 'false_praise_absolute', pct=True)} "
            f"({t.get('n_false_praise')} of {plural(t.get('n_failing'), 'failing candidate')})"
        )
    if not figures:
        return None
    return (
        f"on parseable code only ({plural(left_out, 'candidate')} without code or that did not "
        f"parse left out): {'; '.join(figures)}."
    )


# ---------------------------------------------------------------------------- findings


def ranking_verdict(t: dict[str, Any]) -> str:
    """What pairwise accuracy says about ranking passing above failing code: a direction only
    when its CI excludes chance (0.5); otherwise that none can be claimed, and why."""
    ci = interval(t, "pairwise_accuracy")
    if not ci.valid:  # the figure beside it says why (fmt_ci)
        return "no ranking claim without a CI"
    if ci.high < 0.5:  # type: ignore[operator]
        return "ranks failing code ABOVE passing code"
    if ci.low > 0.5:  # type: ignore[operator]
        return "ranks passing code above failing code"
    return "cannot be told apart from chance at ranking passing vs failing code"


def findings(name: str, ev: dict[str, Any], left_out: int = 0) -> list[str]:
    """Short plain-language findings about one evaluator, worst news first; a group judge's
    within-task figures first and its absolute-scale ones labelled as such. `left_out`: the
    candidates without code or that did not parse (`n_unparseable`); when there are any, a
    line gives the figures without them."""
    if ev.get("protocol") == "execution":
        out = ["execution truth itself: runs the candidate against its tests."]
    else:
        out = truth_findings(ev, left_out)
    return out + score_findings(ev)


def truth_findings(ev: dict[str, Any], left_out: int) -> list[str]:
    """A judge's findings against execution truth: the primary figures, ranking and praise
    (a group judge's ranking first), parseable code only, learning signal, score gap, and
    why a headline figure is missing."""
    t = ev.get("truth", {})
    group = ev.get("protocol") in GROUP_PROTOCOLS
    ranking, praise = _ranking_lines(t, group), _praise_lines(t, group)
    out = _primary_lines(t) + (ranking + praise if group else praise + ranking)
    if parseable := parseable_finding(ev.get("truth_parseable", {}), left_out, group):
        out.append(parseable)
    if signal := signal_finding(ev):
        out.append(signal)
    if t.get("score_gap") is not None:
        scale = " (absolute scale)" if group else ""
        out.append(
            f"mean score{scale} {fmt_num(t.get('mean_score_passing'))} for passing vs "
            f"{fmt_num(t.get('mean_score_failing'))} for failing code "
            f"(gap {fmt_ci(t, 'score_gap')})."
        )
    missing: dict[str, list[str]] = {}
    for key, why in sorted(t.get("reasons", {}).items()):
        if key in ("pairwise_accuracy", "false_praise_absolute", "roc_auc"):
            missing.setdefault(why, []).append(key.replace("_", " "))
    out += [f"no {', '.join(keys)}: {why}." for why, keys in missing.items()]
    return out


def _primary_lines(t: dict[str, Any]) -> list[str]:
    if t.get("pairwise_accuracy_strict") is None:
        return []
    return [
        f"on mixed tasks, where GRPO learns: strict pairwise accuracy "
        f"{fmt_ci(t, 'pairwise_accuracy_strict')} ({t.get('n_strict_pairs')} of "
        f"{plural(t.get('n_pairs'), 'pair')} right, {t.get('n_tied_pairs')} tied); advantage "
        f"fidelity {fmt_ci(t, 'advantage_fidelity')} (1 = the tests' advantages, 0 = no "
        f"signal); {t.get('n_zero_advantage_mixed')} of "
        f"{plural(t.get('n_pair_groups'), 'task')} with one score for all; false praise "
        "within the group "
        f"{fmt_ci(t, 'false_praise_within_group', pct=True)} "
        f"({t.get('n_false_praise_within_group')} of {t.get('n_failing_mixed')} failing "
        "candidates scored at or above a passing one)."
    ]


def _ranking_lines(t: dict[str, Any], group: bool) -> list[str]:
    if t.get("pairwise_accuracy") is None:
        return []
    out = [
        f"{ranking_verdict(t)}: pairwise accuracy {fmt_ci(t, 'pairwise_accuracy')} over "
        f"{plural(t.get('n_pairs'), 'pair')} in {plural(t.get('n_pair_groups'), 'task')} "
        "(0.5 = chance)."
    ]
    if group:
        out.append(
            f"within tasks: top-1 accuracy {fmt_ci(t, 'top1_accuracy')}; "
            f"{t.get('n_tied_pairs')} of {plural(t.get('n_pairs'), 'pair')} tied "
            f"({fmt_ci(t, 'tied_pair_share', pct=True)})."
        )
    return out


def _praise_lines(t: dict[str, Any], group: bool) -> list[str]:
    fp = t.get("false_praise_absolute")
    if fp is None:
        return []
    thr, scale = t.get("praise_threshold"), " (absolute scale)" if group else ""
    n_fail = t.get("n_failing", 0)
    share = (
        f"{fmt_ci(t, 'false_praise_absolute', pct=True)} of failing candidates "
        f"({t.get('n_false_praise')} of {n_fail})"
    )
    if fp >= 0.2:
        out = [f"praises failing code{scale}: {share} scored >= {thr:g}."]
    elif fp > 0:
        out = [f"sometimes praises failing code{scale}: {share} scored >= {thr:g}."]
    else:
        out = [
            f"never praised failing code{scale}: none of {plural(n_fail, 'failing candidate')} "
            f"scored >= {thr:g}."
        ]
    if group and t.get("false_praise_standardised") is not None:
        out.append(
            "a group judge's scores mean something only inside a group; on within-task "
            "standardised scores (GRPO's advantage) "
            f"{fmt_ci(t, 'false_praise_standardised', pct=True)} of failing candidates "
            f"({t.get('n_false_praise_standardised')} of {n_fail}) score above their "
            "task's mean, so training would push them up."
        )
    return out


def score_findings(ev: dict[str, Any]) -> list[str]:
    """How an evaluator scores: its distribution, unscored rows, judge failures, raw scores
    out of range."""
    out = []
    if ev.get("mean") is not None:
        out.append(
            f"scores: mean {fmt_num(ev['mean'])}, median {fmt_num(ev['median'])}, "
            f"std {fmt_num(ev.get('std'))}, IQR {fmt_num(ev.get('iqr'))} "
            f"(Q1 {fmt_num(ev.get('q1'))}, Q3 {fmt_num(ev.get('q3'))})."
        )
    elif ev.get("reason"):
        out.append(f"no score statistics: {ev['reason']}.")
    if ev.get("unscored_rate"):
        reasons = ev.get("unscored_by_reason", {})
        top = max(sorted(reasons), key=lambda k: reasons[k]["n"]) if reasons else None
        tail = f" (most often: {top})" if top else ""
        out.append(f"left {fmt_pct(ev['unscored_rate'])} of rows unscored{tail}.")
    if ev.get("judge_failure_rate"):
        out.append(
            f"the judge itself failed (after its retries) on {fmt_pct(ev['judge_failure_rate'])} "
            f"of rows ({ev.get('n_judge_failures')} rows): timeouts, rate limits, server errors "
            "or replies that could not be read."
        )
    if ev.get("out_of_range_rate"):
        out.append(
            f"returned raw scores outside [0, 1] on {fmt_pct(ev['out_of_range_rate'])} "
            f"of rows (raw range {fmt_num(ev.get('raw_score_min'))} to "
            f"{fmt_num(ev.get('raw_score_max'))})."
        )
    return out


def parseable_note(left_out: int) -> str:
    return (
        f"The same figures without the {plural(left_out, 'candidate')} that had no code or whose "
        "code did not parse: how each judge does on code that ran."
    )


# ---------------------------------------------------------------------------- examples


# ---------------------------------------------------------------------------- markdown


def _intro(metrics: dict[str, Any]) -> list[str]:
    tr = metrics.get("execution_truth", {})
    settings = metrics.get("settings", {})
    lines = [
        f"{metrics.get('n_tasks', 0)} tasks, {metrics.get('n_candidates', 0)} candidates, "
        f"{len(metrics.get('evaluators', {}))} evaluators.",
    ]
    lines += population_lines(metrics)
    if tr.get("evaluator"):
        lines.append(
            f"Execution truth from `{tr['evaluator']}`: {tr.get('n_passing')} candidates pass "
            f"and {tr.get('n_failing')} fail their tests; {tr.get('n_candidates_no_truth')} "
            "candidates have no test result and are left out of the truth metrics."
        )
        lines += outcome_lines(metrics)
    else:
        lines.append(f"No execution truth: {tr.get('reason')}. Truth metrics are empty.")
    lines.append(
        f"Praise threshold {settings.get('praise_threshold')}; 95% CIs from "
        f"{settings.get('bootstrap')} cluster-bootstrap resamples of tasks (seed "
        f"{settings.get('seed')}), never from fewer than {settings.get('min_ci_groups')} "
        "tasks that contribute to the figure: below that a figure shows its value and its n "
        "instead. An evaluator's candidate score is the mean of its scored repeats."
    )
    lines.append(
        "The headline figures are within mixed tasks (a passing and a failing candidate), "
        "where GRPO learns: strict pairwise accuracy (a tied pair is not right; the tie rate "
        "beside it), top-1 accuracy minus the passing share (what guessing gets), advantage "
        "fidelity (the within-task correlation of the judge's GRPO advantages with the "
        "tests'; a group with one score for all gives no signal, 0) and false praise within "
        "the group (a failing candidate scored at or above a passing one). The ½-tie pairwise "
        "accuracy is a secondary figure. Pooled ROC-AUC and the praise threshold compare "
        "scores across tasks on an absolute scale: labelled so, and never a basis for "
        "comparing protocols whose scales differ."
    )
    return lines


def population_lines(metrics: dict[str, Any]) -> list[str]:
    """Which candidates the headline is about, and how they were judged (scores.populations)."""
    pop = metrics.get("population") or {}
    if pop.get("headline") != "natural":
        return []
    head = (
        f"The headline is the policy's own candidates ({pop.get('n_candidates')} candidates "
        f"of {pop.get('n_tasks')} tasks), the groups GRPO trains on; the known-truth contrast "
        "groups are a secondary section below."
    )
    judged = {
        "apart": " Each task's natural group was judged alone, as GRPO judges it, and its "
        "contrast group in a call of its own.",
        "together": " Each task's natural group was judged in one call beside its contrast "
        "group (`scores.populations: together`): a group judge saw the reference solution "
        "beside the policy's code, so its natural figures are reference-guided.",
    }.get(pop.get("judged") or "", " How the two were grouped for the judges is not recorded.")
    return [head + judged]


def provenance_line(provenance: dict[str, Any] | None) -> str | None:
    """Computed from: the commit (and whether tracked files differed from it), the params
    file's sha256 and each model's weights (`judgelab.provenance`)."""
    if not provenance:
        return None
    git = provenance.get("git")
    code = "code: not a git checkout"
    if git:
        code = f"commit `{git['commit'][:12]}`" + (
            " with uncommitted changes" if git["dirty"] else ""
        )
    models = ", ".join(f"{n} `{f}`" for n, f in sorted(provenance.get("models", {}).items()))
    modes = failures.structured_output_line(provenance.get("structured_output"))
    return (
        f"Computed from {code}; `{provenance['params']}` sha256 "
        f"`{provenance['params_sha256'][:16]}`; models: {models or 'none'}{modes}."
        + calls_sentence(provenance.get("calls"))
    )


CALL_KINDS = {"completions": "policy samples", "judge": "judge calls"}


def calls_sentence(calls: dict[str, dict[str, int]] | None) -> str:
    """` Of 120 policy samples, 120 came from a cache (120 from a seed: cache.seeds) and 0
    from a model; ...` from the stages' cache counts; empty when none were counted."""
    parts = []
    for kind, label in CALL_KINDS.items():
        c = (calls or {}).get(kind)
        if not c:
            continue
        total = c["hits"] + c["misses"]
        seeded = f" ({c['seeded']:,} from a seed: cache.seeds)" if c["seeded"] else ""
        parts.append(
            f"of {total:,} {label}, {c['hits']:,} came from a cache{seeded} and "
            f"{c['misses']:,} from a model"
        )
    return f" {'; '.join(parts)[0].upper()}{'; '.join(parts)[1:]}." if parts else ""


def build_report(
    metrics: dict[str, Any],
    latency: dict[str, dict[str, Any]],
    examples: list[dict[str, Any]],
    images: dict[str, Path],
    base: Path | None = None,
    sections: Sequence[Section] = (),
    provenance: dict[str, Any] | None = None,
) -> Document:
    """The report as one model (`report.model`), rendered by `report.as_markdown` and
    `report.as_html`. Image links are relative to `base` (report.md's folder) when given;
    `sections` (bias probes: report.panels) go before the examples."""
    images = dict(images)
    forest = images.pop(DECISION_IMAGE, None)
    blocks: list[Block] = [
        *failures.report_blocks(metrics),  # first: before any figure or ranking
        *decision_blocks(metrics, forest, "" if forest is None else _link(forest, base)),
        Heading("The audit"),
        Notes(tuple(_intro(metrics))),
        *ranking_blocks(metrics),
        *_tables(metrics),
        *power_blocks(metrics.get("power") or {}, fmt_ci),
        *training_report.section_blocks(metrics),
        *_latency(latency),
        Heading("Plots", glue=True),  # on the latency table's closing line, in HTML
        Figures(tuple(Image(label, path, _link(path, base)) for label, path in images.items())),
        *[Raw((s.markdown.rstrip(), ""), (s.html,)) for s in sections],
        *_examples(examples, _threshold(metrics)),
        *_provenance(provenance),
    ]
    return Document(TITLE, tuple(blocks))


TITLE = "judgelab: evaluator audit"


def _link(path: Path, base: Path | None) -> str:
    return path.relative_to(base).as_posix() if base is not None else path.name


def _provenance(provenance: dict[str, Any] | None) -> list[Block]:
    if (line := provenance_line(provenance)) is None:
        return []
    return [Heading("Provenance"), Paragraph.of(line, note=True)]


def render_markdown(
    metrics: dict[str, Any],
    latency: dict[str, dict[str, Any]],
    examples: list[dict[str, Any]],
    images: dict[str, Path],
    base: Path | None = None,
    sections: Sequence[Section] = (),
    provenance: dict[str, Any] | None = None,
) -> str:
    """report.md: `build_report` rendered to Markdown."""
    doc = build_report(metrics, latency, examples, images, base, sections, provenance)
    return as_markdown.render(doc)


def render_html(
    metrics: dict[str, Any],
    latency: dict[str, dict[str, Any]],
    examples: list[dict[str, Any]],
    images: dict[str, Path],
    sections: Sequence[Section] = (),
    provenance: dict[str, Any] | None = None,
) -> str:
    """report.html: `build_report` rendered to one self-contained page."""
    doc = build_report(metrics, latency, examples, images, None, sections, provenance)
    return as_html.render(doc)


def _threshold(metrics: dict[str, Any]) -> Any:
    return (metrics.get("settings") or {}).get("praise_threshold", 0.8)


BAD_NEWS = ("praises failing", "ranks failing")


def _tables(metrics: dict[str, Any]) -> list[Block]:
    """The headline tables (all code, then parseable code only when some did not parse),
    score distributions and each evaluator's findings (bad news marked)."""
    evs = metrics.get("evaluators", {})
    min_ci_groups = (metrics.get("settings") or {}).get("min_ci_groups")
    out: list[Block] = [
        Heading("Headline"),
        ci_table(HEADLINE_COLUMNS, headline_rows(evs), "headline", min_ci_groups),
    ]
    left_out = n_unparseable(metrics)
    if left_out:
        rows = headline_rows(evs, "truth_parseable")
        out += [
            Heading("Headline, parseable code only"),
            Paragraph.of(parseable_note(left_out), note=True),
            ci_table(HEADLINE_COLUMNS, rows, "headline-parseable", min_ci_groups),
        ]
    out += [
        Heading("Score distributions"),
        ci_table(DISTRIBUTION_COLUMNS, distribution_rows(evs), "distributions", min_ci_groups),
        Heading("Findings"),
    ]
    for name in sorted(evs):
        lines = findings(name, evs[name], left_out)
        out.append(BulletList(name, tuple((x, x.startswith(BAD_NEWS)) for x in lines)))
    return out


LATENCY_COLUMNS = ("evaluator", "rows", "mean s", "median s", "total s")


def _latency(latency: dict[str, dict[str, Any]]) -> list[Block]:
    rows = [
        [
            name,
            str(lat["n"]),
            fmt_num(lat["mean_latency_s"]),
            fmt_num(lat["median_latency_s"]),
            fmt_num(lat["total_latency_s"], 1),
        ]
        for name, lat in sorted(latency.items())
    ]
    return [Heading("Latency"), table(LATENCY_COLUMNS, rows, glue=True)]


def _examples(examples: list[dict[str, Any]], threshold: Any) -> list[Block]:
    """The worst false praise; model-generated text as listings (fenced, escaped)."""
    out: list[Block] = [
        Heading("Worst false praise"),
        Paragraph.of(
            f"Failing code that a judge scored at or above the praise threshold ({threshold})."
        ),
    ]
    if not examples:
        out.append(Paragraph.of("No failing candidate was scored at or above it."))
    for i, ex in enumerate(examples, 1):
        where = (
            "task ", Code(ex["task_id"]), ", candidate ", Code(ex["candidate_id"]),
            ", judge ", Code(ex["judge"] or NA), f", repeat {ex['repeat']}",
        )  # fmt: skip
        out += [
            Heading(f"{i}. {ex['evaluator']} gave {ex['score']:.3f} to failing code", level=3),
            Paragraph(where),
            Listing("Why the tests failed:", ex.get("test_reason") or "(no reason recorded)"),
            Listing("Explanation:", ex["explanation"] or "(none)"),
            Listing("Code:", ex["code"] or "(no completion found)"),
        ]
    if examples:  # report.md has always had a second blank line after the last example
        out.append(Raw(("",), ()))
    return out
