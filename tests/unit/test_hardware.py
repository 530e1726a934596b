# ruff: noqa: E501 - /proc/cpuinfo lines quoted as the kernel writes them
"""CPU features -> the llama.cpp build flags and the training dtype, on real /proc/cpuinfo
text of both kinds of host (an AVX2-only AMD EPYC and an Intel Xeon with AVX-512 and AMX),
and `judgelab doctor`'s comparison of a build's instruction sets with the CPU's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from judgelab.config import load_settings
from judgelab.doctor import check_training, compare_build, compiled_isa
from judgelab.hardware import cpu_info, llama_build, parse_cpuinfo, training_dtype

ROOT = Path(__file__).resolve().parents[2]

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy svm cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext perfctr_core ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr wbnoinvd arat npt nrip_save umip pku ospke vaes vpclmulqdq rdpid fsrm arch_capabilities
processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu
"""
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c bmi1 avx2 bmi2 avx512f avx512dq adx avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl avx512vbmi umip pku avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq avx_vnni avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8
"""
OLD_AVX_ONLY = (
    "model name\t: Intel(R) Xeon(R) CPU E5-2670\nflags\t\t: sse sse2 ssse3 sse4_1 sse4_2 avx\n"
)


def test_cpuinfo_is_read_from_the_first_processor() -> None:
    cpu = parse_cpuinfo(EPYC)
    assert cpu.model == "AMD EPYC"
    assert {"avx2", "fma", "f16c", "bmi2"} <= cpu.flags and "avx512f" not in cpu.flags
    assert not cpu.native_bf16
    assert parse_cpuinfo(SAPPHIRE_RAPIDS).native_bf16
    assert cpu.summary() == "AMD EPYC [avx avx2 f16c fma]"


def test_avx2_only_cpu_builds_avx2_fma_f16c_and_nothing_it_lacks() -> None:
    build = llama_build(parse_cpuinfo(EPYC))
    on = {k for k, v in build.options.items() if v}
    assert on == {"GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"}
    assert build.variant.startswith("avx2-")
    assert "-DGGML_NATIVE=OFF" in build.cmake_args and "-DGGML_AVX512=OFF" in build.cmake_args
    assert "-DGGML_AVX2=ON" in build.cmake_args and "-DGGML_AMX_INT8=OFF" in build.cmake_args


def test_avx512_cpu_adds_avx512_but_never_amx() -> None:
    build = llama_build(parse_cpuinfo(SAPPHIRE_RAPIDS))
    on = {k for k, v in build.options.items() if v}
    assert {"GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AVX512_VBMI"} <= on
    assert not any(k.startswith("GGML_AMX") for k in on) and "GGML_NATIVE" not in on
    assert build.variant.startswith("avx512-")
    assert build.variant != llama_build(parse_cpuinfo(EPYC)).variant  # separate cached wheels


def test_cpu_without_avx2_gets_no_avx2() -> None:
    build = llama_build(parse_cpuinfo(OLD_AVX_ONLY))
    on = {k for k, v in build.options.items() if v}
    assert on == {"GGML_SSE42", "GGML_AVX"} and build.variant.startswith("avx-")


def test_auto_dtype_is_bfloat16_only_with_native_support() -> None:
    assert training_dtype("auto", "cpu", parse_cpuinfo(EPYC)) == "float32"
    assert training_dtype("auto", "cpu", parse_cpuinfo(SAPPHIRE_RAPIDS)) == "bfloat16"
    assert training_dtype("auto", "cuda", parse_cpuinfo(EPYC)) == "bfloat16"
    assert training_dtype("bfloat16", "cpu", parse_cpuinfo(EPYC)) == "bfloat16"  # explicit wins
    assert training_dtype("float32", "cuda", parse_cpuinfo(SAPPHIRE_RAPIDS)) == "float32"


def test_doctor_compares_the_build_with_the_cpu() -> None:
    info = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
        "AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
    )
    assert "GGML_AVX512" in compiled_isa(info) and "GGML_SSE42" not in compiled_isa(info)
    crash = compare_build(info, "0.3.36", parse_cpuinfo(EPYC))
    assert crash.status == "fail" and "AVX512" in crash.detail and "lacks" in crash.detail
    avx2 = info.replace("AVX512 = 1", "AVX512 = 0").replace("AVX512_VNNI = 1", "AVX512_VNNI = 0")
    slower = compare_build(avx2, "0.3.36", parse_cpuinfo(SAPPHIRE_RAPIDS))
    assert slower.status == "warn" and "AVX512" in slower.detail and "leaves out" in slower.detail
    exact = compare_build(avx2, "0.3.36", parse_cpuinfo(EPYC))  # SSE 4.2 is not reported
    assert exact.status == "ok" and "variant avx2-" in exact.detail
    amx = compare_build(info + " AMX_INT8 = 1 |", "0.3.36", parse_cpuinfo(SAPPHIRE_RAPIDS))
    assert amx.status == "warn" and "AMX_INT8" in amx.detail  # the CPU has it: no crash ahead


def test_doctor_reports_the_training_dtype_for_this_host() -> None:
    settings = load_settings(ROOT / "params.yaml")
    check = check_training(settings)
    expected = "bfloat16" if cpu_info().native_bf16 else "float32"
    assert check.status == "ok" and f"-> {expected} on" in check.detail
    forced = settings.model_copy(
        update={"train": settings.train.model_copy(update={"dtype": "bfloat16"})}
    )
    warned = check_training(forced)
    assert warned.status == ("ok" if cpu_info().native_bf16 else "warn")
    import torch

    if not torch.cuda.is_available():  # the training stage's own rule: it would stop there
        cuda = settings.model_copy(
            update={"train": settings.train.model_copy(update={"device": "cuda"})}
        )
        refused = check_training(cuda)
        assert refused.status == "fail" and "no CUDA device" in refused.detail


def test_makefile_and_hardware_script_agree() -> None:
    """The Makefile runs hardware.py with the system python before the venv exists."""
    out = subprocess.run(
        [sys.executable, "-I", str(ROOT / "src/judgelab/hardware.py"), "llama-variant"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip() == llama_build(cpu_info()).variant
    make = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-pn", "help"], capture_output=True, text=True
    )
    assert f"LLAMA_VARIANT := {out.stdout.strip()}" in make.stdout or (
        f"LLAMA_VARIANT = {out.stdout.strip()}" in make.stdout
    )
