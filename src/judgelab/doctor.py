"""`judgelab doctor`: is this machine ready to run the audit?

Each check returns a `Check(name, status, detail)`; status is "ok", "warn" (works, but
something is worth knowing) or "fail" (a run would fail). Checks, in order:

- config: params.yaml loads and validates;
- model:<name>: every embedded model of the registry is assembled and matches its pinned
  sha256 (by its verification stamp; `rehash=True` re-hashes the files);
- cpu: the CPU model and the instruction sets that matter (AVX2, AVX-512, AMX, native bf16);
- llama.cpp: llama-cpp-python and its server import in a child process (a build with the
  wrong CPU flags dies there with SIGILL, not in the doctor); the instruction sets the build
  compiled in, against the variant this CPU calls for (`hardware.llama_build`): one the CPU
  lacks fails, one it has but the build left out warns (slower);
- training: the dtype `train.dtype` resolves to here (`auto`: bfloat16 only with native
  support), warning when an explicit bfloat16 would run emulated on this CPU;
- endpoint:<name>: every endpoint model answers HTTP at `<base_url>/models` within the
  timeout (any HTTP status counts as reachable; 401/403 warn that the key was refused), and
  its `api_key_env` variable is set;
- structured_output:<name>: for every reachable endpoint model a judge calls, the
  structured-output mode its judge calls send (`judgelab.evaluators.transport.detect`): the
  setting, or for `auto` what the trial requests found (warn when none was conclusive);
- sandbox: the execution sandbox runs a one-line program;
- disk: free space where results and models go.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from judgelab.config import EmbeddedModel, EndpointModel, Settings, load_settings
from judgelab.errors import ConfigError, JudgelabError
from judgelab.extras import install_hint, missing
from judgelab.hardware import CpuInfo, cpu_info, cpu_supports, llama_build, training_dtype
from judgelab.paths import models_dir, project_root

Status = Literal["ok", "warn", "fail"]
MIN_FREE_GB = 2.0
ENDPOINT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str


def check_config(params: Path) -> tuple[Check, Settings | None]:
    try:
        settings = load_settings(params)
    except JudgelabError as err:
        return Check("config", "fail", str(err)), None
    return Check("config", "ok", f"{params}: {len(settings.models)} models"), settings


def check_models(settings: Settings, rehash: bool = False) -> list[Check]:
    from judgelab.models.zoo import verify_assembled

    out = []
    for name, spec in settings.models.items():
        if not isinstance(spec, EmbeddedModel):
            continue
        try:
            out.append(Check(f"model:{name}", "ok", verify_assembled(spec.zoo, rehash=rehash)))
        except JudgelabError as err:
            out.append(Check(f"model:{name}", "fail", str(err)))
    return out


_LLAMA_PROBE = (
    "import llama_cpp, llama_cpp.server.app; "
    "print(llama_cpp.__version__); print(llama_cpp.llama_print_system_info().decode())"
)


def check_llama_cpp(timeout_s: float = 120.0) -> Check:
    if lacking := missing("embedded"):
        return Check(
            "llama.cpp", "fail",
            f"not installed (no module {', '.join(lacking)}): {install_hint('embedded')}",
        )  # fmt: skip
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _LLAMA_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return Check("llama.cpp", "fail", f"import did not finish in {timeout_s:.0f}s")
    if proc.returncode != 0:
        why = f"signal {-proc.returncode}" if proc.returncode < 0 else proc.stderr.strip()[-300:]
        hint = (
            " (SIGILL: rebuild with portable flags, see Makefile)" if proc.returncode == -4 else ""
        )
        return Check("llama.cpp", "fail", f"import failed: {why}{hint}")
    version, _, info = proc.stdout.partition("\n")
    return compare_build(info, version)


def check_cpu() -> Check:
    cpu = cpu_info()
    bf16 = "native bfloat16" if cpu.native_bf16 else "no native bfloat16"
    return Check("cpu", "ok", f"{cpu.summary()}; {bf16}; {os.cpu_count()} cores")


# llama_print_system_info's names -> ggml's CMake options (hardware._GGML_ISA's keys). It
# does not report SSE 4.2, so that option is not compared.
_SYSTEM_INFO_ISA = {
    "AVX": "GGML_AVX", "AVX2": "GGML_AVX2", "FMA": "GGML_FMA",
    "F16C": "GGML_F16C", "BMI2": "GGML_BMI2", "AVX_VNNI": "GGML_AVX_VNNI",
    "AVX512": "GGML_AVX512", "AVX512_VBMI": "GGML_AVX512_VBMI",
    "AVX512_VNNI": "GGML_AVX512_VNNI", "AVX512_BF16": "GGML_AVX512_BF16",
    "AMX_INT8": "GGML_AMX_INT8",
}  # fmt: skip


def compiled_isa(system_info: str) -> set[str]:
    """The ggml options a build compiled in, from `llama_print_system_info()`'s
    `CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | ...`."""
    on = set()
    for field in system_info.replace("\n", "|").split("|"):
        name, _, value = field.rpartition("=")
        name = name.split(":")[-1].strip()
        if value.strip() == "1" and name in _SYSTEM_INFO_ISA:
            on.add(_SYSTEM_INFO_ISA[name])
    return on


def compare_build(system_info: str, version: str, cpu: CpuInfo | None = None) -> Check:
    """The build's instruction sets against what this CPU (default: the host's) calls for."""
    cpu = cpu or cpu_info()
    wanted = llama_build(cpu)
    want = {k for k, v in wanted.options.items() if v} & set(_SYSTEM_INFO_ISA.values())
    have = compiled_isa(system_info)
    names = lambda opts: " ".join(sorted(o.removeprefix("GGML_") for o in opts)) or "none"  # noqa: E731
    detail = f"llama-cpp-python {version}; build: {names(have)}; CPU variant {wanted.variant}"
    lacking = {o for o in have - want if not cpu_supports(cpu, o)}
    if lacking:
        return Check(
            "llama.cpp", "fail",
            f"{detail}; compiled with {names(lacking)}, which this CPU lacks (Illegal "
            "instruction ahead): rebuild with `make install` (it builds per CPU variant)",
        )  # fmt: skip
    if have - want:
        return Check(
            "llama.cpp", "warn",
            f"{detail}; compiled with {names(have - want)}, which judgelab's build leaves out "
            "(ggml's AMX path crashed on some hosts): `make install` builds the portable variant",
        )  # fmt: skip
    if want - have:
        return Check(
            "llama.cpp", "warn",
            f"{detail}; this CPU also has {names(want - have)}, which the build leaves out "
            "(slower): `make install` builds the variant for this CPU",
        )  # fmt: skip
    return Check("llama.cpp", "ok", detail)


def check_training(settings: Settings) -> Check:
    from judgelab.training.policy import resolve_device  # the training stage's own rule

    train = settings.train
    cpu = cpu_info()
    try:
        device = resolve_device(train.device)
    except JudgelabError as err:  # cuda asked for, none seen: the stage would stop there
        return Check("training", "fail", str(err))
    dtype = training_dtype(train.dtype, device, cpu)
    detail = f"train.dtype {train.dtype} -> {dtype} on {device}"
    if device == "cpu" and dtype == "bfloat16" and not cpu.native_bf16:
        return Check(
            "training", "warn",
            f"{detail}: this CPU has no native bfloat16, so training runs emulated (a LoRA "
            "backward took > 8x the float32 time on an AVX2-only CPU); use train.dtype: auto",
        )  # fmt: skip
    return Check("training", "ok", detail)


def check_endpoint(name: str, spec: EndpointModel, timeout_s: float = ENDPOINT_TIMEOUT_S) -> Check:
    label = f"endpoint:{name}"
    try:
        key = spec.api_key(name)
    except ConfigError as err:
        return Check(label, "fail", str(err))
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = spec.base_url.rstrip("/") + "/models"
    try:
        reply = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as err:
        return Check(label, "fail", f"{url} unreachable: {err.__class__.__name__}: {err}")
    if reply.status_code in (401, 403):
        return Check(label, "warn", f"{url} answered HTTP {reply.status_code}: key refused?")
    return Check(label, "ok", f"{url} answered HTTP {reply.status_code}")


def check_structured_output(name: str, spec: EndpointModel) -> Check:
    """The mode judge calls to this endpoint model send (probing it for `auto`)."""
    from judgelab.evaluators.transport.detect import resolve_sync
    from judgelab.models.server import remote_endpoint
    from judgelab.paths import cache_dir

    label = f"structured_output:{name}"
    try:
        detection = resolve_sync(remote_endpoint(name, spec), cache_dir())
    except JudgelabError as err:
        return Check(label, "fail", str(err))
    status: Status = "ok" if detection.source in ("setting", "trial") else "warn"
    detail = detection.describe()
    if status == "warn":
        detail += f"; set models.{name}.structured_output to skip the trial requests"
    return Check(label, status, detail)


def check_endpoints(settings: Settings) -> list[Check]:
    judges = {ev.judge_model for ev in settings.scores.evaluators if ev.judge_model is not None}
    checks = []
    for name, spec in settings.models.items():
        if not isinstance(spec, EndpointModel):
            continue
        reach = check_endpoint(name, spec)
        checks.append(reach)
        if name in judges and reach.status != "fail":
            checks.append(check_structured_output(name, spec))
    return checks


def check_sandbox() -> Check:
    from judgelab.sandbox import run_python

    result = run_python("print(6 * 7)", timeout_s=30)
    if result.status == "passed" and result.stdout_tail.strip() == "42":
        return Check("sandbox", "ok", "runs untrusted code (printed 42)")
    return Check("sandbox", "fail", f"{result.status}: {result.stderr_tail.strip()[-300:]}")


def check_disk(paths: list[Path], min_free_gb: float = MIN_FREE_GB) -> list[Check]:
    out = []
    for path in paths:
        existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        free_gb = shutil.disk_usage(existing).free / 1e9
        status: Status = "ok" if free_gb >= min_free_gb else "warn"
        out.append(Check(f"disk:{path}", status, f"{free_gb:.1f} GB free"))
    return out


def run_checks(params: Path, *, rehash: bool = False, sandbox: bool = True) -> list[Check]:
    config, settings = check_config(params)
    checks = [config, check_cpu()]
    if settings is not None:
        checks += check_models(settings, rehash=rehash)
        if any(isinstance(s, EmbeddedModel) for s in settings.models.values()):
            checks.append(check_llama_cpp())
        checks += check_endpoints(settings)
        if settings.train.rewards:
            checks.append(check_training(settings))
    if sandbox:
        checks.append(check_sandbox())
    checks += check_disk([project_root(), models_dir()])
    return checks
