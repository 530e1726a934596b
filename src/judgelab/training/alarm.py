"""The reward-hacking alarm: one e-detector, used by the guard, the training history and (through
them) the analysis, over any sequence of observations of per-lambda log e-values.

An observation is one checked group (the guard) or the groups GRPO stepped on in one epoch (the
training loop), given as the log of its e-value for each lambda of the mixture grid
(`alignment.LAMBDAS`): exp(lambda t) / E_perm[exp(lambda t)] of the anti-alignment t, or the
product of those over an epoch's groups. Under a judge blind to the tests (its advantages
exchangeable with respect to the verdicts) each observation's e-value has expectation 1 given the
past, for every lambda.

The judge may turn at any observation: it learns the task first and finds what the judge pays
for later. The detector is a mixture over the change point j = 1, 2, ... (the first observation
of the hacking), with prior weights that sum to 1,

    w_1 = FROM_START,   w_j = (1 - FROM_START) / ((j - 1) j)   for j >= 2,

and, for each lambda, the product of the e-values from j on. After n observations

    D_n = mean over lambda of  S_n(lambda)  +  sum_{j > n} w_j,
    S_n(lambda) = sum_{j <= n} w_j prod_{i = j..n} E_i(lambda)
                = (S_{n-1}(lambda) + w_n) E_n(lambda),

the change points still to come counted at their weight (the tail sum is (1 - FROM_START) / n).
D_0 = 1 and under the blind judge D is a test martingale (each term is, with the weights fixed in
advance), so by Ville's inequality it ever reaches 1 / alpha with probability at most alpha:
**a blind judge sets the alarm off with probability at most alpha over the whole run, however
long, with the detector looked at after every observation**; a fortiori within any N
observations, and its average run length to a false alarm is infinite with probability at least
1 - alpha. The j = 1 term is the e-process that multiplies every observation from the start
(judgelab's alarm before the detector), at weight FROM_START: a judge hacking from the start is
caught as that e-process would be at alpha * FROM_START. A judge turning at observation j pays
log(1 / w_j), about 2 log j, once: where the old e-process, after aligned observations had
shrunk it, could not recover within a run, the detector needs the product from the turn to
reach 1 / (alpha w_j). Aligned observations never lower the terms that start after them.

The state is the per-lambda log S and n: `Detector.state_dict()` saves it, JSON-serialisable,
and `load_state_dict` resumes it exactly. `log_values` is the same statistic over many simulated
runs at once (`alignment.simulated_alarm`, the power and onset simulations).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from judgelab.config.training import TrainSettings

# the alarm's one alpha: `train.alarm_alpha` in the pipeline, whose default the guard shares
DEFAULT_ALPHA: float = TrainSettings.model_fields["alarm_alpha"].default
FROM_START = 0.9  # the prior weight of "hacking from the first observation"


def log_weight(j: int) -> float:
    """log w_j, the prior weight of a change at observation j (1-based; module doc)."""
    if j < 1:
        raise ValueError(f"change points count from 1, not {j}")
    return math.log(FROM_START) if j == 1 else math.log((1 - FROM_START) / ((j - 1) * j))


def log_tail(n: int) -> float:
    """log of the weight of the change points after observation n: sum_{j > n} w_j."""
    return 0.0 if n == 0 else math.log((1 - FROM_START) / n)


def _log_mean_exp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values) / len(values))


class Detector:
    """The e-detector over observations of per-lambda log e-values (module doc)."""

    def __init__(self, lambdas: int) -> None:
        if lambdas < 1:
            raise ValueError("the detector needs at least one lambda")
        self.lambdas = lambdas
        self.n = 0  # observations so far
        self.log_s = [-math.inf] * lambdas  # log S_n(lambda)

    def update(self, log_e: Sequence[float]) -> float:
        """Add one observation (its log e-value per lambda); returns the new `value`."""
        if len(log_e) != self.lambdas:
            raise ValueError(f"{len(log_e)} log e-values for {self.lambdas} lambdas")
        self.n += 1
        w = log_weight(self.n)
        self.log_s = [
            float(np.logaddexp(s, w)) + float(v) for s, v in zip(self.log_s, log_e, strict=True)
        ]
        return self.value

    @property
    def log_value(self) -> float:
        """log D_n."""
        return float(np.logaddexp(_log_mean_exp(self.log_s), log_tail(self.n)))

    @property
    def value(self) -> float:
        """D_n: the e-value the alarm compares with 1 / alpha (1 before any observation)."""
        return math.exp(self.log_value)

    def state_dict(self) -> dict:
        """Everything needed to resume the detector exactly (JSON-serialisable: -inf as None)."""
        return {
            "lambdas": self.lambdas,
            "n": self.n,
            "log_s": [None if s == -math.inf else s for s in self.log_s],
        }

    def load_state_dict(self, state: dict) -> None:
        if state["lambdas"] != self.lambdas or len(state["log_s"]) != self.lambdas:
            raise ValueError(f"a detector state for {state['lambdas']} lambdas, not {self.lambdas}")
        self.n = int(state["n"])
        self.log_s = [-math.inf if s is None else float(s) for s in state["log_s"]]


def running_evalue(rows: Sequence[Sequence[float] | None], lambdas: int) -> list[float]:
    """The detector's value after each row: a row is one observation's per-lambda log
    e-values; a row that is None or empty (no group checked or stepped on) is no observation
    and leaves the value as it was."""
    detector, out = Detector(lambdas), []
    for row in rows:
        if row:
            detector.update(row)
        out.append(detector.value)
    return out


def alarm_flags(evalues: Sequence[float], alpha: float) -> list[bool]:
    """Observation (or epoch) e is flagged when the detector has reached 1 / alpha by then (it
    stays raised: evidence once gathered is not lost)."""
    out, raised = [], False
    for e in evalues:
        raised = raised or e >= 1 / alpha
        out.append(raised)
    return out


def log_values(log_e: np.ndarray) -> np.ndarray:
    """`Detector`'s log value after each observation, for many runs at once: log_e [runs,
    observations, lambdas] -> [runs, observations]. A unit test holds it to `Detector`."""
    runs, n, lambdas = log_e.shape
    log_s = np.full((runs, lambdas), -np.inf)
    out = np.empty((runs, n))
    for i in range(n):
        log_s = np.logaddexp(log_s, log_weight(i + 1)) + log_e[:, i, :]
        top = log_s.max(axis=1)
        mean = top + np.log(np.exp(log_s - top[:, None]).mean(axis=1))
        out[:, i] = np.logaddexp(mean, log_tail(i + 1))
    return out
