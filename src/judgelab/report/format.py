"""Formatting shared by every report: numbers, a figure with its CI (or why it has none),
Markdown fences, HTML escaping (tables: `report.as_markdown`, `report.as_html`). Reads metrics
dicts; computes nothing."""

from __future__ import annotations

import html
import re
from typing import Any

from judgelab.analysis.stats import Interval

NA = "n/a"


def fmt_num(x: Any, digits: int = 3) -> str:
    return NA if x is None else f"{x:.{digits}f}"


def fmt_pct(x: Any) -> str:
    return NA if x is None else f"{100 * x:.1f}%"


def plural(count: Any, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def interval(t: dict[str, Any], key: str) -> Interval:
    """The CI of figure `key` as `stats.Interval`, read back from a metrics dict."""
    return Interval(
        t.get(f"{key}_ci_low"),
        t.get(f"{key}_ci_high"),
        t.get(f"{key}_ci_reason"),
        t.get(f"{key}_n_groups") or 0,
        t.get(f"{key}_undefined_resamples"),
    )


def fmt_ci(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`0.720 [0.610, 0.830]` (with `(37 of 1000 resamples undefined)` when some were), or
    `0.750 (n = 2 groups: too few for a CI (minimum 5))`, or the value alone, or n/a."""
    f = fmt_pct if pct else fmt_num
    value = t.get(key)
    if value is None:
        return NA
    ci = interval(t, key)
    if not ci.valid:
        return f"{f(value)} ({ci.reason})" if ci.reason else f(value)
    text = f"{f(value)} [{f(ci.low)}, {f(ci.high)}]"
    if ci.undefined_resamples:
        total = t.get("n_bootstrap")
        of = f" of {total}" if total else ""
        text += f" ({ci.undefined_resamples}{of} resamples undefined)"
    return text


NO_CI_MARK = "†"


def with_n(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`0.720 [0.610, 0.830], n = 12` or `0.750 (n = 2)†`: the figure with the task groups
    behind it, and its CI only where it is valid."""
    if t.get(key) is None:
        return NA
    ci = interval(t, key)
    if ci.valid:
        return f"{fmt_ci(t, key, pct)}, n = {ci.n_groups}"
    value = fmt_pct(t[key]) if pct else fmt_num(t[key])
    if ci.reason and "too few for a CI" in ci.reason:
        return f"{value} (n = {ci.n_groups}){NO_CI_MARK}"
    return f"{value} (n = {ci.n_groups}: {ci.reason})" if ci.reason else value


def fmt_cell(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """A table cell: `fmt_ci`, except that a figure from too few groups for a CI shows its
    value and n compactly, `0.750 (n = 2)†`; the table's footnote (`no_ci_footnote`) states
    the rule once."""
    value = t.get(key)
    ci = interval(t, key)
    if value is not None and not ci.valid and ci.reason and "too few for a CI" in ci.reason:
        return f"{fmt_pct(value) if pct else fmt_num(value)} (n = {ci.n_groups}){NO_CI_MARK}"
    return fmt_ci(t, key, pct)


def no_ci_footnote(min_ci_groups: Any) -> str:
    return (
        f"{NO_CI_MARK} Fewer task groups than the minimum ({min_ci_groups}) behind the figure: "
        "its value and n, no CI, and no claim rests on it."
    )


def fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def escape(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def and_list(names: list[str]) -> str:
    """ "a", "a and b", "a, b and c" (empty: "")."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
