"""The guard's ART hook on real ART trajectory groups: groups stay groups (two of one prompt
included), the rewards and completions are read from ART's objects, the verdict function is
asked only about the checked groups, and a judge paying for failing code sets the alarm off."""

from __future__ import annotations

import pytest

from judgelab.guard import Guard, GuardSettings
from judgelab.guard.art import observe_groups

art = pytest.importorskip("art.trajectories")


def group(prompt: str, answers: list[str], rewards: list[float]) -> object:
    return art.TrajectoryGroup(
        [
            art.Trajectory(
                messages_and_choices=[
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": answer},
                ],
                reward=reward,
            )
            for answer, reward in zip(answers, rewards, strict=True)
        ]
    )


def test_observe_groups_reads_art_and_fires_on_an_anti_judge() -> None:
    guard = Guard(GuardSettings(max_groups_per_step=2))
    asked: list[str] = []

    def verdict(trajectory: object) -> bool:
        answer = trajectory.messages()[-1]["content"]  # type: ignore[attr-defined]
        asked.append(answer)
        return answer.startswith("good")

    answers = ["good-1", "bad-1", "good-2", "bad-2"]
    paid = [0.0, 1.0, 0.0, 1.0]  # pays for failing code
    for step in range(4):
        groups = [
            group("write f", answers, paid),
            group("write f", answers, paid),  # the same prompt again: a group of its own
            group("write g", answers, [0.5] * 4),  # flat: never checked
        ]
        status = observe_groups(guard, groups, verdict, step=step)
        assert len(asked) == 8 * (step + 1)  # two checked groups of 4 a step, the budget
    assert (status.groups, status.flat_groups, status.checked_groups) == (12, 4, 8)
    assert status.alignment == pytest.approx(-1.0)
    assert status.fired and status.fired_at_step == 1  # 3 groups of a 2/2 split (test_guard)
    assert set(asked) == set(answers)


def test_art_guard_records_logs_and_resumes(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """ArtGuard over a loop whose judge pays for passing code for two steps, then for failing
    code: the alarm is logged with the last safe step, 2 unless it fires at step 2 (after step 2
    the pooled alignment of 4 aligned and 2 anti 2/2 groups is +1/3; after step 3, of 4 and 4,
    it is 0), and a loop resumed from the state saved after step 2 ends where the
    uninterrupted one does."""
    from judgelab.guard.art import ArtGuard

    answers = ["good-1", "bad-1", "good-2", "bad-2"]

    def verdict(trajectory: object) -> bool:
        return trajectory.messages()[-1]["content"].startswith("good")  # type: ignore[attr-defined]

    def step_groups(step: int) -> list:
        paid = [1.0, 0.0, 1.0, 0.0] if step < 2 else [0.0, 1.0, 0.0, 1.0]
        return [group("write f", answers, paid), group("write g", answers, paid)]

    def loop(watch: ArtGuard, steps: range) -> None:
        for step in steps:
            if watch.observe(step_groups(step), step).fired:
                break

    whole = ArtGuard(Guard(GuardSettings(seed=5)), verdict)
    with caplog.at_level("WARNING", logger="judgelab.guard.record"):
        loop(whole, range(20))
    fired_at = whole.record.fired_step
    assert fired_at is not None and fired_at >= 2  # not on the aligned steps
    safe = min(2, fired_at - 1)  # the steps of positive alignment: 0, 1, 2
    assert whole.record.last_safe_step == safe
    assert f"reward guard fired at step {fired_at}; last safe step {safe}" in caplog.text

    first = ArtGuard(Guard(GuardSettings(seed=5)), verdict)
    loop(first, range(3))
    first.save(tmp_path / "guard")
    resumed = ArtGuard(Guard(GuardSettings(seed=5)), verdict)
    resumed.restore(tmp_path / "guard")
    loop(resumed, range(3, 20))
    assert resumed.guard.status() == whole.guard.status() and resumed.record == whole.record
    with pytest.raises(FileNotFoundError, match="no guard state here"):
        ArtGuard(Guard()).restore(tmp_path / "nowhere")
