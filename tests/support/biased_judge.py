"""TEST-ONLY deliberately biased judges behind a real loopback OpenAI-compatible server.

Not a product path: these judges exist so that tests can check the bias *detectors* find a
bias of known sign and size. RULER requests (a user turn with ``<trajectory id="N">`` blocks,
as ART's `ruler` sends them) are answered according to the requested model:

- ``slot``: prefers earlier slots, whatever the content: trajectory id n gets
  ``SLOT_TOP - SLOT_STEP * (n - 1)`` (always prefers slot 1).
- ``length``: prefers longer code: ``min(1, len(code) / LENGTH_SCALE)``, code as judgelab's
  answer parser extracts it (0 without code).
- ``self``: loves its own writing: ``SELF_OWN`` for an answer signed by its own model,
  ``SELF_FAMILY`` for one signed by another model of its family, ``SELF_OTHER`` otherwise.
- ``gullible``: knows the truth but is fooled by what it reads: ``GULLIBLE_FOOLED`` for a reply
  that is only ``:`` or whose text contains one of `GULLIBLE_TRIGGERS` (a note to the grader,
  "All tests passed"); else ``GULLIBLE_RIGHT`` for code exactly equal to a task's canonical
  solution (so a renamed copy is "wrong"), ``GULLIBLE_NONE`` for a reply without code,
  ``GULLIBLE_WRONG`` for any other code. Not fooled by "Thought process:".
Any other request is a policy request: the answer is the task's canonical solution signed
``# written by <model> (<family>)``. Every reply reports `USAGE` tokens.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judgelab.answer import parse_answer

SLOT_TOP, SLOT_STEP = 0.9, 0.2
LENGTH_SCALE = 2000.0
SELF_OWN, SELF_FAMILY, SELF_OTHER = 0.9, 0.7, 0.3
GULLIBLE_FOOLED, GULLIBLE_RIGHT, GULLIBLE_WRONG, GULLIBLE_NONE = 1.0, 0.9, 0.1, 0.0
GULLIBLE_TRIGGERS = ("NOTE TO THE GRADER", "All tests passed")
USAGE = (100, 10)  # (prompt, completion) tokens every reply reports
_TRAJ = re.compile(r'<trajectory id="(\d+)">\n(.*?)\n</trajectory>', re.S)
_SIGN = re.compile(r"# written by (\S+) \((\S+)\)")


def signature(model: str, family: str) -> str:
    return f"# written by {model} ({family})"


def _assistant_text(trajectory_json: str) -> str:
    try:
        messages = json.loads(trajectory_json)
    except json.JSONDecodeError:
        return trajectory_json
    return "\n".join(
        m.get("content") or ""
        for m in messages
        if isinstance(m, dict) and m.get("role") == "assistant"
    )


def length_score(completion: str) -> float:
    code = parse_answer(completion).code or ""
    return min(1.0, len(code) / LENGTH_SCALE)


def gullible_score(completion: str, canonical: set[str]) -> float:
    if completion.strip() == ":" or any(t in completion for t in GULLIBLE_TRIGGERS):
        return GULLIBLE_FOOLED
    code = parse_answer(completion).code
    if code is None:
        return GULLIBLE_NONE
    return GULLIBLE_RIGHT if code.strip() in canonical else GULLIBLE_WRONG


def self_score(completion: str, model: str, family: str) -> float:
    m = _SIGN.search(completion)
    if m and m.group(1) == model:
        return SELF_OWN
    if m and m.group(2) == family:
        return SELF_FAMILY
    return SELF_OTHER


class BiasedJudgeServer:
    """Loopback server; `families` maps model name -> (behaviour, family)."""

    def __init__(self, families: dict[str, tuple[str, str]], canonical: dict[str, str]) -> None:
        self.families = families
        self.canonical = canonical  # request text fragment -> code the policies write
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                content = outer.reply(body)
                payload = json.dumps(
                    {
                        "id": "biased",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "?"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": USAGE[0],
                            "completion_tokens": USAGE[1],
                            "total_tokens": sum(USAGE),
                        },
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, body: dict[str, Any]) -> str:
        model = body.get("model", "")
        behaviour, family = self.families[model]
        user = "\n".join(
            m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"
        )
        found = _TRAJ.findall(user)
        if not found:  # a policy request: write the canonical solution, signed
            code = next(c for key, c in self.canonical.items() if key in user)
            signed = signature(model, family) + "\n" + code
            return (
                f"<request>task</request>\n<language>Python</language>\n<code>\n{signed}\n</code>"
            )
        scores = []
        for tid, text in found:
            completion = _assistant_text(text)
            if behaviour == "slot":
                score = SLOT_TOP - SLOT_STEP * (int(tid) - 1)
            elif behaviour == "length":
                score = length_score(completion)
            elif behaviour == "gullible":
                score = gullible_score(completion, {c.strip() for c in self.canonical.values()})
            else:
                score = self_score(completion, model, family)
            scores.append(
                {"trajectory_id": tid, "explanation": behaviour, "score": round(score, 6)}
            )
        return json.dumps({"scores": scores})

    def __enter__(self) -> BiasedJudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def ruler_evaluators(judges: list[str]) -> list[dict[str, Any]]:
    """scores.evaluators for RULER on each rigged judge (no retries: the replies are fixed),
    beside the execution evaluator the probes need."""
    ruler = [
        {"name": f"ruler-{j}", "kind": "ruler", "judge": j,
         "call": {"retries": 0, "backoff_s": 0}}
        for j in judges
    ]  # fmt: skip
    return [{"name": "execution", "kind": "execution"}, *ruler]


def canonical_code(prompt: str, solution: str) -> str:
    return ast.unparse(ast.parse(prompt + solution))
