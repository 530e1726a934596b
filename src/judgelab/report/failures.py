"""What the analysis report says first, before any figure or ranking: the judges that failed
and, for a judge-only audit, that nothing is ranked against the tests; the provenance clause
of auto-detected structured-output modes."""

from __future__ import annotations

from typing import Any

from judgelab.report.model import Block, BulletList, Heading, Paragraph

FAILED_HEADING = "Judges that failed"


FAILED_NOTE = (
    "Every figure below for these judges comes from the calls that worked, or from none: "
    "fix the cause and rerun (replies already received are reused from the cache)."
)


def report_blocks(metrics: dict[str, Any]) -> list[Block]:
    """What the report says first, before any figure or ranking: the judges that failed
    (`metrics["judge_failures"]`, the lines `run_analysis` stored; bad news), and for a
    judge-only audit that nothing is ranked against the tests (`agreement_lines`)."""
    out: list[Block] = []
    if lines := metrics.get("judge_failures") or []:
        failed = tuple((x, True) for x in lines)
        out += [
            Heading(FAILED_HEADING),
            Paragraph.of(FAILED_NOTE, note=True),
            BulletList(None, failed, one_line=True),
        ]
    if agreement := agreement_lines(metrics):
        items = tuple((x, False) for x in agreement)
        out += [Heading("Judge-only audit"), BulletList(None, items, one_line=True)]
    return out


def structured_output_line(modes: dict[str, dict[str, str]] | None) -> str:
    """The provenance clause naming each auto-detected judge endpoint's structured-output
    mode (judgelab.flows.scores records them; `judgelab.evaluators.transport.detect.Detection`)."""
    if not modes:
        return ""
    parts = []
    for name, d in sorted(modes.items()):
        # "probe": what runs before the trial requests were so named wrote
        how = {"trial": "detected", "probe": "detected", "remembered": "detected earlier"}.get(
            d.get("source", "")
        )
        parts.append(f"{name} `{d.get('mode')}` ({how or 'not detected: ' + d.get('detail', '')})")
    return "; structured output: " + ", ".join(parts)


NOTHING_RANKED = (
    "Judge-only audit: no execution evaluator, so nothing here is ranked against the tests. "
    "The score distributions below show how each judge scores (unscored, out-of-range and "
    "zero-advantage rates); agreement between judges is not accuracy: two judges can agree "
    "and both be wrong."
)


def agreement_lines(metrics: dict[str, Any]) -> list[str]:
    """The judge-only section's sentences, each generated from the figures it names."""
    if "judge_only" not in metrics:
        return []
    lines = [NOTHING_RANKED]
    agree = metrics["judge_only"]
    if not agree:
        return lines
    alpha, n = agree.get("krippendorff_alpha"), agree.get("n_candidates", 0)
    alpha_text = "undefined" if alpha is None else f"{alpha:.3f}"
    lines.append(
        f"Krippendorff's alpha (interval) of {len(agree['judges'])} judges: {alpha_text} "
        f"(n = {n} candidates scored by at least two judges; no CI)."
    )
    for p in agree["pairs"]:
        tau = p["kendall_tau_b"]
        tau_text = "undefined" if tau is None else f"{tau:.3f}"
        lines.append(
            f"Kendall's tau-b of {p['a']} and {p['b']}: {tau_text} "
            f"(n = {p['n_candidates']} candidates both scored)."
        )
    return lines
