"""report.md and report.html rendered from committed inputs, for the golden report test.

Two cases: the reference audit (reference/data: its metrics.json, tables, training histories
and probes) through the analysis stage's own `write_images` + `write_reports`, and the unit
golden (tests/golden/analysis_metrics.json) with failed judges and hostile example text, no
images, sections or provenance. Embedded PNGs (`data:image/png;base64,...`) are replaced by a
placeholder: the bytes of a PNG depend on the matplotlib build, the text around them does not.

`python tests/support/report_golden.py --write` (with PYTHONPATH naming the source tree)
writes the expected files under tests/golden/report/.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "golden" / "report"
DATA_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")
PLACEHOLDER = "data:image/png;base64,PNG"
PROVENANCE = {
    "git": {"commit": "0123456789abcdef0123", "dirty": False},
    "params": "params.yaml",
    "params_sha256": "ab" * 32,
    "models": {"policy": "qwen.gguf"},
    "calls": {"judge": {"hits": 3, "misses": 1, "seeded": 2}},
}


def normalise(text: str) -> str:
    return DATA_URI.sub(PLACEHOLDER, text)


def reference_reports(out_dir: Path) -> tuple[str, str]:
    """The reference audit's report, rendered by the analysis stage's writers."""
    from judgelab.analysis.truth import execution_truth
    from judgelab.analysis.writers import split_populations
    from judgelab.config import load_settings
    from judgelab.report.outputs import write_images, write_reports
    from judgelab.schemas import validate_file

    data = ROOT / "reference" / "data"
    settings = load_settings(ROOT / "reference" / "params.yaml").analysis
    metrics = json.loads((data / "analysis" / "metrics.json").read_text(encoding="utf-8"))
    scores = validate_file(data / "scores" / "scores.parquet", "scores")
    rollouts = validate_file(data / "rollouts" / "rollouts.parquet", "rollouts")
    headline, _ = split_populations(rollouts, scores)
    truth = execution_truth(headline)
    images = write_images(headline, truth, metrics, settings, out_dir / "plots", data / "training")
    write_reports(
        metrics,
        scores,
        rollouts,
        truth,
        images,
        settings,
        out_dir,
        probes_metrics=data / "probes" / "metrics.json",
        provenance=PROVENANCE,
    )
    return (
        (out_dir / "report.md").read_text(encoding="utf-8"),
        (out_dir / "report.html").read_text(encoding="utf-8"),
    )


EXAMPLE = {
    "evaluator": "ruler|<b>",
    "score": 0.9,
    "task_id": "HumanEval/1",
    "candidate_id": "c-1",
    "judge": None,
    "repeat": 0,
    "test_reason": None,
    "explanation": "```fenced``` & <script>alert(1)</script>",
    "code": "def f():\n    return '|'",
}


def bare_reports() -> tuple[str, str]:
    """The unit golden's metrics with failed judges, a latency row and a worst-praise example
    whose text holds Markdown and HTML metacharacters; no images, sections or provenance."""
    from judgelab.report.audit import render_html, render_markdown

    metrics = json.loads((ROOT / "tests" / "golden" / "analysis_metrics.json").read_text())
    metrics["judge_failures"] = ["ruler-a: 2 of 2 judge calls failed <timeout>", "b & c"]
    latency = {"a<b": {"n": 3, "mean_latency_s": 0.5, "median_latency_s": 0.25,
                       "total_latency_s": 1.5}}  # fmt: skip
    examples = [EXAMPLE, {**EXAMPLE, "judge": "j", "test_reason": "assert 1 == 2"}]
    return (
        render_markdown(metrics, latency, examples, {}),
        render_html(metrics, latency, examples, {}),
    )


def all_reports(tmp: Path) -> dict[str, str]:
    """{file name under tests/golden/report: its normalised text}."""
    ref_md, ref_html = reference_reports(tmp)
    bare_md, bare_html = bare_reports()
    return {
        "reference.md": normalise(ref_md),
        "reference.html": normalise(ref_html),
        "bare.md": bare_md,
        "bare.html": bare_html,
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        reports = all_reports(Path(tmp))
    if "--write" in sys.argv:
        EXPECTED.mkdir(parents=True, exist_ok=True)
        for name, text in reports.items():
            (EXPECTED / name).write_text(text, encoding="utf-8")
