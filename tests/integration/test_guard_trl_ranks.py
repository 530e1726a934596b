"""One guard for a TRL run of two processes (`accelerate launch --num_processes 2`, gloo, CPU)
on a real GRPOTrainer with the embedded SmolLM2-135M (guard_ranks_run.py): groups straddle the
ranks, rank 0's guard sees the whole batch and watches the reward TRL trains on (two functions,
weighted), one alarm, the stop and the checkpoint on both ranks at the same step, the guard's
state in the checkpoint; a bad batch raises the same error on both ranks, naming the step, the
rank and the group. About 40 s of CPU (146 s of wall time on a loaded, shared 2-core host;
docs/GUARD.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
ZOO = "smollm2-135m-instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_guard_over_two_processes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    import judgelab
    from judgelab.training.policy import converted_dir

    model = converted_dir(ZOO)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(Path(judgelab.__file__).parents[1])}  # fmt: skip
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2",
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(free_port()),
               str(HERE / "guard_ranks_run.py"), str(model), str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["world"], r0["backend"], r1["rank"]) == (2, "gloo", 1)

    # a group straddles the ranks: prompt 1's four completions are rows 4..5 and 0..1
    assert r0["first_slice"][4:] == r1["first_slice"][:2]
    assert r0["first_slice"][0] != r0["first_slice"][4] != r1["first_slice"][2]
    # one e-process: rank 0's guard saw the whole batches (3 groups, 12 completions a step)
    steps = r0["record"]["fired_step"] + 1
    assert r0["guard"]["groups"] == 3 * steps and r0["guard"]["completions"] == 12 * steps
    assert r1["guard"]["groups"] == 0 and r0["guard"]["fired_at"] == r0["record"]["fired_step"]
    # one alarm, one record, the stop at the same step on both ranks, before max_steps (4)
    assert r0["record"] == r1["record"] and r0["record"]["fired_step"] is not None
    assert r0["stopped_at"] == r1["stopped_at"] == r0["global_step"] == r1["global_step"] < 4
    assert r0["record"]["reward"].startswith("the reward TRL trains on: 1*anti + 0.1*brevity")
    # the checkpoint saved at the alarm (save_strategy "no") holds the guard's state
    checkpoint = Path(r0["record"]["checkpoint"])
    assert checkpoint == tmp_path / "run" / f"checkpoint-{r0['stopped_at']}"
    saved = json.loads((checkpoint / "judgelab_guard.json").read_text())
    assert saved["record"] == r0["record"] and (checkpoint / "model.safetensors").exists()
    # the alarm's step in the trainer's log, averaged over ranks and steps yet exact
    assert r0["logged"][-1]["guard/fired_step"] == r0["record"]["fired_step"]
    assert "guard/fired" not in r0["logged"][-1]

    for rank in (r0, r1):
        assert "step 7, group " in rank["bad"]["missing_verdict"]
        assert "no verdict" in rank["bad"]["missing_verdict"]
        assert rank["bad"]["num_generations"] == (
            "ValueError: step 7: 12 completions (rank 0: 6, rank 1: 6) are not a whole number "
            "of groups of 5 (num_generations); group 2 (rows 10..14: rank 1 rows 4..5) is "
            "short of 3"
        )
    assert r0["bad"]["missing_verdict"].startswith("ValueError: step 7, group ")
    assert r1["bad"]["missing_verdict"].startswith(
        "RuntimeError: the reward guard failed on rank 0: ValueError: step 7, group "
    )
