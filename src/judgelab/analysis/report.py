"""The human-readable report: report.md and a self-contained report.html.

Contract:
- Built only from the metrics dict (`run_analysis`'s result), a latency summary, the worst
  false-praise examples and the PNGs already written; nothing is recomputed here. Optional
  sections (training curves, bias probes) arrive ready-made from `analysis.panels`.
- report.html needs no network: inline CSS, PNGs embedded as base64 data URIs, no scripts.
  Every piece of text that came from data (evaluator and task names, judge explanations,
  completions, reasons) is HTML-escaped; the HTML is written by hand, not through a Markdown
  converter, because Markdown passes raw HTML through.
- In report.md, model-generated text sits inside code fences longer than any backtick run in
  it, so it cannot break out of the fence.
- Latency appears here only: timings differ between identical runs, so never in metrics.json.
"""

from __future__ import annotations

import base64
import html
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from judgelab.analysis import training as training_report
from judgelab.analysis.panels import Section
from judgelab.analysis.truth import Truth

logger = logging.getLogger(__name__)

EXCERPT_LINES = 40
EXCERPT_CHARS = 2000
EXPLANATION_CHARS = 600
NA = "n/a"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#1d1d1f;line-height:1.45}
h1,h2,h3{line-height:1.2}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}
th,td{border:1px solid #d0d0d0;padding:.3em .5em;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
th{background:#f2f4f7}
tr:nth-child(even) td{background:#fafafa}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.6em;overflow-x:auto;font-size:.8em;
white-space:pre-wrap}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}
.note{color:#555;font-size:.9em}
.bad{color:#b00020;font-weight:600}
"""


# ---------------------------------------------------------------------------- formatting


def fmt_num(x: Any, digits: int = 3) -> str:
    return NA if x is None else f"{x:.{digits}f}"


def fmt_pct(x: Any) -> str:
    return NA if x is None else f"{100 * x:.1f}%"


def _n(count: Any, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def fmt_ci(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`0.720 [0.610, 0.830]`, or the value alone without a CI, or n/a."""
    f = fmt_pct if pct else fmt_num
    value = t.get(key)
    if value is None:
        return NA
    low, high = t.get(f"{key}_ci_low"), t.get(f"{key}_ci_high")
    if low is None or high is None:
        return f(value)
    return f"{f(value)} [{f(low)}, {f(high)}]"


HEADLINE_COLUMNS = (
    "evaluator",
    "protocol",
    "scored",
    "mean",
    "median",
    "std",
    "IQR",
    "unscored",
    "judge failures",
    "out of range",
    "ROC-AUC",
    "pairwise acc.",
    "top-1 acc.",
    "false praise",
)


def headline_rows(evaluators: dict[str, dict[str, Any]]) -> list[list[str]]:
    rows = []
    for name in sorted(evaluators):
        ev = evaluators[name]
        t = ev.get("truth", {})
        rows.append(
            [
                name,
                str(ev.get("protocol") or NA),
                f"{ev['n_scored']}/{ev['n_rows']}",
                fmt_num(ev.get("mean")),
                fmt_num(ev.get("median")),
                fmt_num(ev.get("std")),
                fmt_num(ev.get("iqr")),
                fmt_pct(ev.get("unscored_rate")),
                fmt_pct(ev.get("judge_failure_rate")),
                fmt_pct(ev.get("out_of_range_rate")),
                fmt_ci(t, "roc_auc"),
                fmt_ci(t, "pairwise_accuracy"),
                fmt_ci(t, "top1_accuracy"),
                fmt_ci(t, "false_praise_rate", pct=True),
            ]
        )
    return rows


# ---------------------------------------------------------------------------- findings


def findings(name: str, ev: dict[str, Any]) -> list[str]:
    """Short plain-language findings about one evaluator, worst news first."""
    out: list[str] = []
    t = ev.get("truth", {})
    thr = t.get("praise_threshold")
    if ev.get("protocol") == "execution":
        out.append("execution truth itself: runs the candidate against its tests.")
    fp = t.get("false_praise_rate")
    if fp is not None and ev.get("protocol") != "execution":
        n_fail = t.get("n_failing", 0)
        share = f"{fmt_pct(fp)} of failing candidates ({t.get('n_false_praise')} of {n_fail})"
        if fp >= 0.2:
            out.append(f"praises failing code: {share} scored >= {thr:g}.")
        elif fp > 0:
            out.append(f"sometimes praises failing code: {share} scored >= {thr:g}.")
        else:
            out.append(
                f"never praised failing code: none of {_n(n_fail, 'failing candidate')} "
                f"scored >= {thr:g}."
            )
    pa = t.get("pairwise_accuracy")
    if pa is not None and ev.get("protocol") != "execution":
        low, high = t.get("pairwise_accuracy_ci_low"), t.get("pairwise_accuracy_ci_high")
        verdict = "ranks passing code above failing code"
        if high is not None and high < 0.5:
            verdict = "ranks failing code ABOVE passing code"
        elif low is not None and high is not None and low <= 0.5 <= high:
            verdict = "cannot be told apart from chance at ranking passing vs failing code"
        out.append(
            f"{verdict}: pairwise accuracy {fmt_ci(t, 'pairwise_accuracy')} over "
            f"{_n(t.get('n_pairs'), 'pair')} in {_n(t.get('n_pair_groups'), 'task')} "
            "(0.5 = chance)."
        )
    gap = t.get("score_gap")
    if gap is not None and ev.get("protocol") != "execution":
        out.append(
            f"mean score {fmt_num(t.get('mean_score_passing'))} for passing vs "
            f"{fmt_num(t.get('mean_score_failing'))} for failing code (gap {gap:+.3f})."
        )
    missing: dict[str, list[str]] = {}
    for key, why in sorted(t.get("reasons", {}).items()):
        if key in ("pairwise_accuracy", "false_praise_rate", "roc_auc"):
            missing.setdefault(why, []).append(key.replace("_", " "))
    if ev.get("protocol") != "execution":
        for why, keys in missing.items():
            out.append(f"no {', '.join(keys)}: {why}.")
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


# ---------------------------------------------------------------------------- examples


def excerpt(text: str | None) -> str:
    """The first EXCERPT_LINES lines / EXCERPT_CHARS characters, marked when cut."""
    if not text:
        return ""
    lines = text.splitlines()
    cut = "\n".join(lines[:EXCERPT_LINES])
    if len(cut) > EXCERPT_CHARS:
        cut = cut[:EXCERPT_CHARS]
    if cut != text.rstrip("\n") and cut != text:
        cut += "\n[... cut ...]"
    return cut


def worst_false_praise(
    scores: pl.DataFrame, rollouts: pl.DataFrame, truth: Truth, n: int = 5
) -> list[dict[str, Any]]:
    """The n highest-scored (row-level) failing candidates from evaluators other than the
    execution truth, with the judge's explanation and the completion joined from rollouts."""
    failing = truth.table.filter(pl.col("passed") == False).select("candidate_id")  # noqa: E712
    if not failing.height or not scores.height:
        return []
    rows = (
        scores.filter((pl.col("status") == "scored") & (pl.col("protocol") != "execution"))
        .join(failing, on="candidate_id", how="inner")
        .sort(
            ["score", "evaluator", "candidate_id", "repeat"], descending=[True, False, False, False]
        )
        .head(n)
    )
    completions = rollouts.select("candidate_id", "completion") if rollouts.height else None
    out = []
    for row in rows.iter_rows(named=True):
        completion = None
        if completions is not None:
            hit = completions.filter(pl.col("candidate_id") == row["candidate_id"])
            completion = hit.get_column("completion")[0] if hit.height else None
        explanation = row.get("explanation") or ""
        if len(explanation) > EXPLANATION_CHARS:
            explanation = explanation[:EXPLANATION_CHARS] + " [... cut ...]"
        out.append(
            {
                "task_id": row["task_id"],
                "candidate_id": row["candidate_id"],
                "evaluator": row["evaluator"],
                "judge": row.get("judge"),
                "repeat": row["repeat"],
                "score": row["score"],
                "raw_score": row.get("raw_score"),
                "explanation": explanation,
                "code": excerpt(completion),
            }
        )
    return out


# ---------------------------------------------------------------------------- markdown


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _intro(metrics: dict[str, Any]) -> list[str]:
    tr = metrics.get("execution_truth", {})
    settings = metrics.get("settings", {})
    lines = [
        f"{metrics.get('n_tasks', 0)} tasks, {metrics.get('n_candidates', 0)} candidates, "
        f"{len(metrics.get('evaluators', {}))} evaluators.",
    ]
    if tr.get("evaluator"):
        lines.append(
            f"Execution truth from `{tr['evaluator']}`: {tr.get('n_passing')} candidates pass "
            f"and {tr.get('n_failing')} fail their tests; {tr.get('n_candidates_no_truth')} "
            "candidates have no test result and are left out of the truth metrics."
        )
    else:
        lines.append(f"No execution truth: {tr.get('reason')}. Truth metrics are empty.")
    lines.append(
        f"Praise threshold {settings.get('praise_threshold')}; 95% CIs from "
        f"{settings.get('bootstrap')} cluster-bootstrap resamples of tasks (seed "
        f"{settings.get('seed')}). An evaluator's candidate score is the mean of its scored "
        "repeats."
    )
    return lines


def render_markdown(
    metrics: dict[str, Any],
    latency: dict[str, dict[str, Any]],
    examples: list[dict[str, Any]],
    images: dict[str, Path],
    base: Path | None = None,
    sections: Sequence[Section] = (),
) -> str:
    """report.md; image links are relative to `base` (the report's folder) when given.
    `sections` (training curves, bias probes: analysis.panels) go before the examples."""
    evs = metrics.get("evaluators", {})
    out = ["# judgelab: evaluator audit", ""]
    out += [" ".join(_intro(metrics)), "", "## Headline", ""]
    out.append("| " + " | ".join(HEADLINE_COLUMNS) + " |")
    out.append("|" + "---|" * len(HEADLINE_COLUMNS))
    for row in headline_rows(evs):
        out.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
    out += ["", "## Findings", ""]
    for name in sorted(evs):
        out.append(f"### {_md_cell(name)}")
        out += [f"- {_md_cell(line)}" for line in findings(name, evs[name])]
        out.append("")
    out += training_report.markdown_section(metrics)
    out += [
        "## Latency",
        "",
        "| evaluator | rows | mean s | median s | total s |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(latency):
        lat = latency[name]
        out.append(
            f"| {_md_cell(name)} | {lat['n']} | {fmt_num(lat['mean_latency_s'])} | "
            f"{fmt_num(lat['median_latency_s'])} | {fmt_num(lat['total_latency_s'], 1)} |"
        )
    out += ["", "## Plots", ""]
    for label, path in images.items():
        link = path.relative_to(base).as_posix() if base is not None else path.name
        out.append(f"![{_md_cell(label)}]({link})")
    for section in sections:
        out += ["", section.markdown.rstrip()]
    out += ["", "## Worst false praise", ""]
    if not examples:
        out.append("No failing candidate was scored by a judge.")
    for i, ex in enumerate(examples, 1):
        out.append(f"### {i}. {_md_cell(ex['evaluator'])} gave {ex['score']:.3f} to failing code")
        out.append("")
        out.append(
            f"task `{ex['task_id']}`, candidate `{ex['candidate_id']}`, judge "
            f"`{ex['judge'] or NA}`, repeat {ex['repeat']}"
        )
        out += [
            "",
            "Explanation:",
            "",
            _fence(ex["explanation"] or "(none)"),
            "",
            "Code:",
            "",
            _fence(ex["code"] or "(no completion found)"),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------- html


def _e(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_html(
    metrics: dict[str, Any],
    latency: dict[str, dict[str, Any]],
    examples: list[dict[str, Any]],
    images: dict[str, Path],
    sections: Sequence[Section] = (),
) -> str:
    evs = metrics.get("evaluators", {})
    h: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>judgelab: evaluator audit</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>judgelab: evaluator audit</h1>",
    ]
    h += [f'<p class="note">{_e(line)}</p>' for line in _intro(metrics)]
    h.append('<h2>Headline</h2><table id="headline"><thead><tr>')
    h += [f"<th>{_e(c)}</th>" for c in HEADLINE_COLUMNS]
    h.append("</tr></thead><tbody>")
    for row in headline_rows(evs):
        h.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    h.append("</tbody></table>")
    h.append("<h2>Findings</h2>")
    for name in sorted(evs):
        h.append(f"<h3>{_e(name)}</h3><ul>")
        for line in findings(name, evs[name]):
            cls = ' class="bad"' if line.startswith(("praises failing", "ranks failing")) else ""
            h.append(f"<li{cls}>{_e(line)}</li>")
        h.append("</ul>")
    h += training_report.html_section(metrics, _e)
    h.append(
        "<h2>Latency</h2><table><thead><tr><th>evaluator</th><th>rows</th><th>mean s</th>"
        "<th>median s</th><th>total s</th></tr></thead><tbody>"
    )
    for name in sorted(latency):
        lat = latency[name]
        h.append(
            f"<tr><td>{_e(name)}</td><td>{lat['n']}</td><td>{fmt_num(lat['mean_latency_s'])}"
            f"</td><td>{fmt_num(lat['median_latency_s'])}</td>"
            f"<td>{fmt_num(lat['total_latency_s'], 1)}</td></tr>"
        )
    h.append("</tbody></table><h2>Plots</h2>")
    for label, path in images.items():
        h.append(
            f'<figure><img alt="{_e(label)}" src="{_data_uri(path)}">'
            f"<figcaption>{_e(label)}</figcaption></figure>"
        )
    h += [section.html for section in sections]
    h.append("<h2>Worst false praise</h2>")
    if not examples:
        h.append("<p>No failing candidate was scored by a judge.</p>")
    for i, ex in enumerate(examples, 1):
        h.append(f"<h3>{i}. {_e(ex['evaluator'])} gave {ex['score']:.3f} to failing code</h3>")
        h.append(
            f"<p>task <code>{_e(ex['task_id'])}</code>, candidate "
            f"<code>{_e(ex['candidate_id'])}</code>, judge <code>{_e(ex['judge'] or NA)}</code>, "
            f"repeat {ex['repeat']}</p>"
        )
        h.append(f"<p><b>Explanation:</b></p><pre>{_e(ex['explanation'] or '(none)')}</pre>")
        h.append(f"<p><b>Code:</b></p><pre>{_e(ex['code'] or '(no completion found)')}</pre>")
    h.append("</body></html>")
    return "\n".join(h) + "\n"
