"""RULER group judging through OpenPipe ART, with the failure handling ART leaves out.

`RulerJudge` sends all k candidates of a task to ART's ``art.rewards.ruler.ruler`` in one
call, prompt and rubric unchanged, and returns one `Verdict` per candidate in candidate
order. What judgelab adds (docs/JUDGES.md):

* with ``spec.shuffle`` the candidates are shown in a seeded random order, new per repeat
  and attempt; each verdict keeps its ``slot`` and the group's ``permutation``;
* ART's trajectory ids are matched back by id, never by list position; an unknown, duplicate
  or missing id is a reply error;
* the retries, call records, reward policy and unscored failures of every LLM judge
  (`judgelab.evaluators.llm_judge`).
"""

from __future__ import annotations

import hashlib
import logging
import random
from typing import TYPE_CHECKING, Any

from judgelab.config.evaluators import RulerSettings
from judgelab.errors import JudgeReplyError
from judgelab.evaluators.llm_judge import LLMJudge, ReplyShape, Score
from judgelab.evaluators.transport.provider import CallRecord
from judgelab.verdicts import Candidate, Task

if TYPE_CHECKING:
    from art.rewards.ruler import TrajectoryScore

log = logging.getLogger(__name__)


def _trajectories(shown: list[Candidate]) -> list[list[dict[str, Any]]]:
    """ART's message lists: each candidate's prompt and its completion as the reply."""
    return [[*c.messages, {"role": "assistant", "content": c.completion}] for c in shown]


class RulerJudge(LLMJudge):
    """Group judge: ART's RULER over all k candidates of a task in one call."""

    protocol = RulerSettings.protocol
    group = True
    spec: RulerSettings

    def order(self, task: Task, n: int, repeat: int, attempt: int) -> list[int]:
        """Candidate indices in the order shown to the judge on this attempt."""
        idx = list(range(n))
        if self.spec.shuffle and n > 1:
            material = f"ruler|{self.spec.call.seed}|{task.task_id}|{repeat}|{attempt}"
            seed = int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "big")
            random.Random(seed).shuffle(idx)
        return idx

    def _reply_shape(self, shown: list[Candidate]) -> ReplyShape:
        # ART sends identical trajectories once and copies the one score to every id.
        lists = _trajectories(shown)
        identical = len(lists) > 1 and all(m == lists[0] for m in lists)
        if identical:
            log.info(
                "ruler %s: all %d trajectories identical; ART scores one", self.name, len(shown)
            )
        items = 1 if identical else len(shown)
        return ReplyShape(items, array_items=items, ids=tuple(str(i) for i in range(1, items + 1)))

    async def _ask(
        self, task: Task, shown: list[Candidate], sampling: dict[str, Any], record: CallRecord
    ) -> list[Score]:
        # Imported on the first call: `import art` reads a .env file and imports transformers
        # where it is installed (the train extra), which an endpoint audit never needs.
        from art.rewards.ruler import ruler

        rubric = {"rubric": self.spec.rubric} if self.spec.rubric else {}  # unset: ART's own
        scores = await ruler(
            _trajectories(shown),
            judge_model=self.litellm_model,
            **rubric,
            extra_litellm_params=sampling,
        )
        by_slot = _match_ids(scores, len(shown), record.raw)
        return [Score(by_slot[s].score, by_slot[s].explanation) for s in range(len(shown))]


def _match_ids(
    scores: list[TrajectoryScore], k: int, raw: str | None
) -> dict[int, TrajectoryScore]:
    """Map ART's trajectory ids ("1".."k") to 0-based slots; any id problem is a reply error."""
    valid = {str(i): i - 1 for i in range(1, k + 1)}
    by_slot: dict[int, TrajectoryScore] = {}
    for s in scores:
        tid = s.trajectory_id.strip()
        if tid not in valid:
            raise JudgeReplyError(
                f"unknown trajectory_id {s.trajectory_id!r} (expected 1..{k})", raw
            )
        slot = valid[tid]
        if slot in by_slot:
            raise JudgeReplyError(f"duplicate trajectory_id {tid!r}", raw)
        by_slot[slot] = s
    missing = [str(i + 1) for i in range(k) if i not in by_slot]
    if missing:
        raise JudgeReplyError(f"missing trajectory_id(s) {', '.join(missing)}", raw)
    return by_slot
