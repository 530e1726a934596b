"""RULER and rubric judges against a real embedded model served by llama-cpp-python's server.

Tiny judges are bad judges: these tests assert only what must hold for any model. Every
candidate gets a verdict; scored ones are in [0, 1]; unscored ones say why; the raw replies
are kept; the permutation is a permutation; a second run is answered from the cache.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config.evaluators import JudgeCallSettings, RubricSettings, RulerSettings  # noqa: E402
from judgelab.evaluators.rubric import RubricJudge  # noqa: E402
from judgelab.evaluators.ruler import RulerJudge  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from judgelab.verdicts import Candidate, Task, Verdict  # noqa: E402

pytestmark = pytest.mark.integration

TASK = Task(
    task_id="it-add",
    source="autorl",
    prompt="Write a Python function add(a, b) that returns the sum of a and b.",
)
COMPLETIONS = [
    "<request>add</request>\n<language>Python</language>\n<code>\ndef add(a, b):\n"
    "    return a + b\n</code>",
    "<request>add</request>\n<language>Python</language>\n<code>\ndef add(a, b):\n"
    "    return a - b\n</code>",
    "I cannot help with that.",
]
# max_tokens unset: the longest reply the bounded schema allows (reply_token_budget), so a
# sampled reply is never cut off on a CPU where the model happens to write longer.
CALL = JudgeCallSettings(retries=1, backoff_s=0.0, explanation_max_chars=60)


def candidates() -> list[Candidate]:
    prompt = [
        {"role": "system", "content": "You are a programmer. Answer with Python code."},
        {"role": "user", "content": TASK.prompt},
    ]
    return [
        Candidate(TASK.task_id, f"{TASK.task_id}-c{i}", i, text, prompt)
        for i, text in enumerate(COMPLETIONS)
    ]


def assert_well_formed(verdict: Verdict) -> None:
    if verdict.status == "scored":
        assert verdict.score is not None and 0.0 <= verdict.score <= 1.0
    else:
        assert verdict.score is None and verdict.reason
    assert verdict.latency_s >= 0.0


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma-270m"])
def test_ruler_on_an_embedded_judge(
    embedded_endpoint: Callable[[str], Endpoint], tmp_path: Path, model: str
) -> None:
    ep = embedded_endpoint(model)
    spec = RulerSettings(name=f"ruler-{model}", judge=model, shuffle=True, call=CALL)
    cands = candidates()
    result = RulerJudge(spec, ep, JsonCache(tmp_path, "judge")).judge_group(TASK, cands)

    assert len(result.verdicts) == len(cands)
    for v in result.verdicts:
        assert_well_formed(v)
        assert v.permutation is not None
        assert sorted(v.permutation.split(",")) == sorted(str(c.sample_index) for c in cands)
        assert v.slot is not None and 0 <= v.slot < len(cands)
    assert len({v.permutation for v in result.verdicts}) == 1
    assert sorted(v.slot for v in result.verdicts) == list(range(len(cands)))
    assert result.records, "no judge call was recorded"
    assert all(c.raw is not None for c in result.records if c.error is None)
    assert any(c.raw for c in result.records), "the raw replies must be kept"

    again = RulerJudge(spec, ep, JsonCache(tmp_path, "judge")).judge_group(TASK, cands)
    assert all(c.cached and c.http_requests == 0 for c in again.records)
    assert [(v.status, v.score, v.reason) for v in again.verdicts] == [
        (v.status, v.score, v.reason) for v in result.verdicts
    ]


def test_rubric_on_an_embedded_judge(
    embedded_endpoint: Callable[[str], Endpoint], tmp_path: Path
) -> None:
    ep = embedded_endpoint("smollm2-135m")
    spec = RubricSettings(name="rubric-smollm2", judge="smollm2-135m", call=CALL)
    judge = RubricJudge(spec, ep, JsonCache(tmp_path, "judge"))
    for cand in candidates():
        result = judge.judge_group(TASK, [cand])
        assert len(result.verdicts) == 1
        assert_well_formed(result.verdicts[0])
        assert result.verdicts[0].slot is None and result.verdicts[0].permutation is None
        assert any(c.raw for c in result.records), "the raw replies must be kept"
