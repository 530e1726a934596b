"""What this CPU does well, and the choices that follow from it.

Contract: `cpu_info()` reads the host's CPU model and x86 feature flags (Linux `/proc/cpuinfo`;
elsewhere an empty flag set). From them follow two choices that must be right on every host:

- `llama_build(cpu)`: the llama.cpp (ggml) CMake flags, each instruction set switched on only
  where the CPU has it. ggml's native build dies with "Illegal instruction" on some hosts
  (AMX path), so judgelab builds portable and names every ISA explicitly; AMX stays off.
- `training_dtype(setting, device, cpu)`: `auto` gives bfloat16 where the hardware computes
  it natively (CUDA; a CPU with AVX-512 BF16 or AMX-BF16) and float32 elsewhere. On an
  AVX2-only EPYC a LoRA forward+backward took 38 s in float32 and > 300 s in bfloat16.

Standard library only: the Makefile runs this file with the system python before the venv
exists (`python3 src/judgelab/hardware.py llama-variant|llama-cmake`).
"""

from __future__ import annotations

import hashlib
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")

# ggml option -> the /proc/cpuinfo flags it needs (all of them). GGML_AVX512 compiles with
# -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw, so it needs all five.
_GGML_ISA: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_BMI2": ("bmi2",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512f", "avx512vbmi"),
    "GGML_AVX512_VNNI": ("avx512f", "avx512_vnni"),
    "GGML_AVX512_BF16": ("avx512f", "avx512_bf16"),
}
# Never on: the native build's AMX path is what crashed; AMX gains nothing for Q4 decoding here.
_GGML_AMX = {"GGML_AMX_TILE": ("amx_tile",), "GGML_AMX_INT8": ("amx_int8",),
             "GGML_AMX_BF16": ("amx_bf16",)}  # fmt: skip
_GGML_OFF = ("GGML_NATIVE", *_GGML_AMX)
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class CpuInfo:
    model: str
    flags: frozenset[str]

    @property
    def native_bf16(self) -> bool:
        """True where the CPU has bfloat16 arithmetic in hardware (AVX-512 BF16 or AMX-BF16)."""
        return any(f in self.flags for f in NATIVE_BF16_FLAGS)

    def summary(self) -> str:
        wanted = ("avx", "amx", "fma", "f16c")
        shown = sorted(f for f in self.flags if f.startswith(wanted))
        return f"{self.model} [{' '.join(shown) or 'no AVX'}]"


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's model name and flags from /proc/cpuinfo text."""
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        if model and flags:
            break
    return CpuInfo(model or platform.processor() or platform.machine(), flags)


def cpu_info(path: Path = CPUINFO) -> CpuInfo:
    try:
        return parse_cpuinfo(path.read_text())
    except OSError:
        return CpuInfo(platform.processor() or platform.machine(), frozenset())


def cpu_supports(cpu: CpuInfo, option: str) -> bool:
    """Whether this CPU has every instruction set a ggml ISA option compiles in."""
    need = _GGML_ISA.get(option) or _GGML_AMX.get(option)
    return need is not None and all(f in cpu.flags for f in need)


@dataclass(frozen=True)
class LlamaBuild:
    variant: str
    options: dict[str, bool]

    @property
    def cmake_args(self) -> str:
        return " ".join(f"-D{k}={'ON' if v else 'OFF'}" for k, v in self.options.items())


def llama_build(cpu: CpuInfo) -> LlamaBuild:
    """ggml's CMake options for this CPU and a variant name that keys the cached wheel."""
    options = {k: False for k in _GGML_OFF}
    options.update({k: all(f in cpu.flags for f in need) for k, need in _GGML_ISA.items()})
    if not (options["GGML_AVX2"] and options["GGML_FMA"] and options["GGML_F16C"]):
        # ggml compiles AVX2 together with FMA and F16C; without all three, stay at AVX/SSE.
        options["GGML_AVX2"] = False
    if options["GGML_AVX512"]:
        tier = "avx512"
    elif options["GGML_AVX2"]:
        tier = "avx2"
    elif options["GGML_AVX"]:
        tier = "avx"
    else:
        tier = "generic"
    on = ",".join(k for k, v in options.items() if v)
    return LlamaBuild(f"{tier}-{hashlib.sha256(on.encode()).hexdigest()[:8]}", options)


def training_dtype(setting: str, device: str, cpu: CpuInfo | None = None) -> str:
    """The torch dtype name for the base weights: an explicit setting, or `auto`'s choice."""
    if setting != "auto":
        return setting
    if device.startswith("cuda"):
        return "bfloat16"
    return "bfloat16" if (cpu or cpu_info()).native_bf16 else "float32"


def _main(argv: list[str]) -> int:
    cpu = cpu_info()
    build = llama_build(cpu)
    commands = {
        "llama-variant": build.variant,
        "llama-cmake": build.cmake_args,
        "cpu": cpu.summary(),
        "training-dtype": training_dtype("auto", "cpu", cpu),
    }
    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: hardware.py {{{'|'.join(commands)}}}", file=sys.stderr)
        return 2
    print(commands[argv[0]])
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
