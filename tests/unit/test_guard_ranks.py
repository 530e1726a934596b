"""The ranks' slices joined into one batch: groups formed after the gather (a group may straddle
two ranks), and a batch whose groups cannot be formed refused with an error naming the step,
the rank and the group. tests/integration/test_guard_trl_ranks.py runs the gather itself over
two gloo processes."""

from __future__ import annotations

import pytest

from judgelab.guard.ranks import Local, Slice, join, ranks


def piece(rank: int, prompts: list[str], step: int = 3, **rewards: list) -> Slice:
    texts = [f"{rank}:{i}" for i in range(len(prompts))]
    rewards = rewards or {"judge": [float(i) for i in range(len(prompts))]}
    return Slice(rank, step, prompts, list(prompts), texts, rewards)


def test_a_group_straddles_two_ranks() -> None:
    # two slices of 6 with groups of 4: group 1 is rank 0's rows 4..5 and rank 1's rows 0..1
    a = piece(0, ["p"] * 4 + ["q"] * 2)
    b = piece(1, ["q"] * 2 + ["r"] * 4)
    batch = join([a, b], 4)
    assert batch.step == 3 and batch.prompts == ["p"] * 4 + ["q"] * 4 + ["r"] * 4
    assert batch.texts[4:8] == ["0:4", "0:5", "1:0", "1:1"]
    assert batch.rewards["judge"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] * 2
    assert batch.origin[4:8] == [(0, 4), (0, 5), (1, 0), (1, 1)]
    assert batch.where(range(4, 8)) == "rows 4..7: rank 0 rows 4..5, rank 1 rows 0..1"


def test_wrong_num_generations_names_the_step_rank_and_group() -> None:
    a = piece(0, ["p"] * 4 + ["q"] * 2)
    b = piece(1, ["q"] * 2 + ["r"] * 4)
    # 12 rows in groups of 5: the third group (rows 10..14) has rows 10..11 only
    with pytest.raises(ValueError) as error:
        join([a, b], 5)
    assert str(error.value) == (
        "step 3: 12 completions (rank 0: 6, rank 1: 6) are not a whole number of groups of 5 "
        "(num_generations); group 2 (rows 10..14: rank 1 rows 4..5) is short of 3"
    )
    # groups of 3: whole, but group 1 (rows 3..5) mixes p and q
    with pytest.raises(ValueError, match=r"^step 3: group 1 \(rows 3\.\.5: rank 0 rows 3\.\.5\) "
                       "mixes prompts"):  # fmt: skip
        join([a, b], 3)
    with pytest.raises(ValueError, match=r"group 1 \(rows 2\.\.3: rank 0 rows 2\.\.3\)"):
        join([piece(0, ["p", "p", "p", "q"])], 2)


def test_a_slice_that_cannot_be_read_names_its_rank() -> None:
    good = piece(0, ["p"] * 4)
    short = piece(1, ["q"] * 4, judge=[1.0, 0.0, None])
    with pytest.raises(ValueError) as error:
        join([good, short], 4)
    want = "step 3, rank 1: reward function 'judge' gave 3 rewards for 4 completions"
    assert str(error.value) == want
    with pytest.raises(ValueError, match="ranks disagree on the step: rank 0 is at 3, rank 1 at 4"):
        join([good, piece(1, ["q"] * 4, step=4)], 4)
    broken = Slice(1, 3, ["q"] * 4, ["q"] * 4, [], {"judge": []}, error="no column 'task'")
    with pytest.raises(ValueError, match=r"^step 3, rank 1: no column 'task'$"):
        join([good, broken], 4)
    with pytest.raises(ValueError, match=r"rank 1: reward functions \['style'\]"):
        join([good, piece(1, ["q"] * 4, style=[0.0] * 4)], 4)


def test_one_process() -> None:
    here = ranks()  # no torch.distributed process group in a unit test
    assert isinstance(here, Local) and (here.rank, here.size) == (0, 1)
    assert here.gather("x") == ["x"] and here.broadcast({"a": 1}) == {"a": 1}
