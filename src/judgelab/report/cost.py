"""The probe report's cost table, from `analysis.cost`'s figures and timings."""

from __future__ import annotations

from typing import Any


def _g(block: dict[str, Any], key: str) -> str:
    """`1.23e+03 [1.1e+03, 1.4e+03]`, or the value and why it has no CI, or why it has none."""
    value = block.get(key)
    if value is None:
        return f"n/a ({(block.get('reasons') or {}).get(key, 'undefined')})"
    lo, hi = block.get(f"{key}_ci_low"), block.get(f"{key}_ci_high")
    if lo is not None and hi is not None:
        return f"{value:.3g} [{lo:.3g}, {hi:.3g}]"
    why = block.get(f"{key}_ci_reason")
    return f"{value:.3g} (no CI: {why})" if why else f"{value:.3g}"


def cost_lines(judges: dict[str, Any], timings: dict[str, dict[str, Any]]) -> list[str]:
    """The report's cost section: one row per judge with a ``cost`` block."""
    rows = [(n, judges[n]["cost"]) for n in sorted(judges) if "cost" in judges[n]]
    if not rows:
        return []
    lines = [
        "## Cost per correct verdict",
        "",
        "What each pass/fail pair a judge orders correctly costs, over the identity view of "
        "every known-truth group (the calls a reward would make; retries included; a tie or an "
        "unscored member is not correct). Tokens as the endpoint reported them; time: the "
        "latency of the request that made each reply (recorded in the judge cache with it, so "
        "a resumed run keeps it), times the server's threads for CPU-seconds (embedded "
        "models); money from the per-million-token prices in the model registry (endpoints). "
        "Whole probe run: every call of the judge in this run, a cached one at what it cost "
        "when it was made. Time varies between runs: it is in this report, not in "
        "metrics.json.",
        "",
        "| judge | model | groups | calls | correct / pass-fail pairs | tokens per correct pair "
        "| time per correct pair | money per 1000 correct pairs | whole probe run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in rows:
        t = timings.get(name, {})
        if t.get("cpu_seconds_per_correct_pair") is not None:
            time = (f"{t['cpu_seconds_per_correct_pair']:.3g} CPU-s "
                    f"({t['seconds_per_correct_pair']:.3g} s wall)")  # fmt: skip
        elif t.get("seconds_per_correct_pair") is not None:
            time = f"{t['seconds_per_correct_pair']:.3g} s"
        else:
            time = f"n/a ({t.get('reason') or 'not measured'})"
        run = c["probe_run"]
        run_time = t.get("probe_run_seconds")
        lines.append(
            f"| {name} | {c['judge_model']} ({c['kind']}) | {c['n_groups']} | "
            f"{c['n_identity_calls']} | {c['n_correct_pairs']} / {c['n_pass_fail_pairs']} | "
            f"{_g(c, 'tokens_per_correct_pair')} | {time} | "
            f"{_g(c, 'money_per_1000_correct_pairs')} | "
            f"{run['n_calls']} calls, {run['prompt_tokens']} + {run['completion_tokens']} tokens"
            + (f", {run_time:.0f} s" if run_time is not None else "")
            + " |"
        )
    return lines
