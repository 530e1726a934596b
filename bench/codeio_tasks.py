"""Benchmark: the CodeI/O task source (`judgelab.tasks.codeio`) on N items, batched vs one
item per sandbox run.

The tasks stage's CodeI/O work, as `judgelab tasks` does it (`load_codeio`): read the wheel's
data file, check each item, run every runnable item's generator and reference `runs` times in
the sandbox (3 processes), build the tasks, run each kept task's reference as a candidate
against its tests (`verify_reference`). Paths:

- `batched`: `tasks.codeio.batch` items per sandbox run (the default, 64), `workers` runs at
  once;
- `per-item`: one item per sandbox run (batch 1), the same workers: what the batching saves
  (a sandbox run costs ~0.1-0.2 s before the item's own work), measured on the first
  `--per-item` items only, and scaled per item.

Prints the CPU, each path's wall time and items per second, and the share of items dropped by
reason (the same for both paths: the table does not depend on the batch size, checked here).

    .venv/bin/python bench/codeio_tasks.py --items 1000 --per-item 100
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from collections import Counter
from pathlib import Path

from judgelab.config import CodeIOSettings
from judgelab.tasks.codeio import load_codeio


def cpu() -> str:
    text = Path("/proc/cpuinfo").read_text()
    name = re.search(r"model name\s*:\s*(.*)", text)
    flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())  # type: ignore[union-attr]
    wanted = ["avx2", "avx512f", "avx512_bf16", "amx_tile"]
    return (
        f"{name.group(1) if name else platform.processor()}, {os.cpu_count()} cores, "
        + " ".join(f for f in wanted if f in flags)
    )


def run(settings: CodeIOSettings) -> tuple[float, dict]:
    start = time.perf_counter()
    result = load_codeio(settings)
    return time.perf_counter() - start, result.report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--per-item", type=int, default=100)
    parser.add_argument("--file", default="codeio-hq")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.2f}")
    base = CodeIOSettings(enabled=True, file=args.file, limit=args.items, workers=args.workers)
    wall, report = run(base)
    n = report["selected"]
    print(f"batched ({base.batch}/run, {base.workers} workers): {n} items in {wall:.1f} s, "
          f"{n / wall:.1f} items/s, kept {report['kept']} ({report['kept'] / n:.1%})")  # fmt: skip
    w_nv, r_nv = run(base.model_copy(update={"verify_reference": False}))
    print(f"  without verify_reference: {w_nv:.1f} s, kept {r_nv['kept']}: the references' "
          f"check costs {wall - w_nv:.1f} s ({(wall - w_nv) / max(report['kept'], 1) * 1000:.0f} "
          "ms per kept task)")  # fmt: skip
    counts = Counter(report["dropped"])
    for reason, count in counts.most_common():
        print(f"  dropped {reason}: {count} ({count / n:.1%})")
    if args.per_item:
        small = base.model_copy(update={"limit": args.per_item})
        w_b, r_b = run(small)
        w_1, r_1 = run(small.model_copy(update={"batch": 1}))
        m = r_b["selected"]
        a = {d["task_id"]: d["reason"] for d in r_b["dropped_items"]}
        b = {d["task_id"]: d["reason"] for d in r_1["dropped_items"]}
        differ = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
        print(f"items whose outcome differs between the two paths: {differ or 'none'}")
        print(f"first {m} items: batched {w_b:.1f} s ({w_b / m * 1000:.0f} ms/item), "
              f"per-item {w_1:.1f} s ({w_1 / m * 1000:.0f} ms/item): {w_1 / w_b:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
