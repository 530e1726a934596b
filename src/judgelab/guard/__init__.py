"""judgelab.guard: a reward guard for a live GRPO run (docs/GUARD.md).

`Guard.observe(prompts, completions, rewards, verdicts)` for any trainer (verl, a loop of your
own); `judgelab.guard.trl` for TRL's `GRPOTrainer` (a reward-function wrapper and a
`TrainerCallback`), `judgelab.guard.art` for ART's training loop; `judgelab.guard.truth` gives
verdicts from judgelab tasks' tests, run in the sandbox. Importing this package imports neither
torch, transformers nor TRL.
"""

from judgelab.guard.core import Guard, GuardSettings, GuardStatus, Verdict, Verdicts
from judgelab.guard.power import Power, design_power

__all__ = [
    "Guard",
    "GuardSettings",
    "GuardStatus",
    "Power",
    "Verdict",
    "Verdicts",
    "design_power",
]
