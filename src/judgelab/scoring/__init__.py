"""The scores stage: every evaluator scores every group (`score`), and the failure budget that
makes the stage fail loudly, naming the judge, when too many of its calls failed (`failures`).
"""

from judgelab.scoring.failures import JudgeCallsFailed, failure_message, loud_failures
from judgelab.scoring.score import (
    GroupCall,
    ScoredGroup,
    Scorer,
    run_id_for,
    score_group,
    score_serially,
    scores_frame,
    stage_calls,
)  # fmt: skip

__all__ = [
    "GroupCall", "JudgeCallsFailed", "ScoredGroup", "Scorer", "failure_message", "loud_failures",
    "run_id_for", "score_group", "score_serially", "scores_frame", "stage_calls",
]  # fmt: skip
