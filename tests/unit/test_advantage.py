"""judgelab.advantage: GRPO's advantage by hand, against TRL's and ART's own formulas, one rule
for a flat group, and one home in the source tree."""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

from judgelab.advantage import (
    CONVENTIONS,
    FLAT,
    batch_advantages,
    group_advantages,
    grouped_advantages,
    has_spread,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "judgelab"
HOME = SRC / "advantage.py"
GROUPS = [[1.0, 0.0, 0.0, 1.0], [0.9, 0.1, 0.5, 0.5], [0.2, 0.2, 0.8, 0.3], [0.4, 0.4, 0.4, 0.4]]


@pytest.mark.parametrize("rewards", [[1.0, 0.0, 0.0, 1.0], [0.9, 0.1, 0.5], [0.2, 0.2, 0.8, 0.3]])
def test_std_advantages_are_zero_mean_and_unit_std_per_group(rewards: list[float]) -> None:
    adv = group_advantages(rewards)
    assert abs(sum(adv)) < 1e-12
    assert np.std(adv) == pytest.approx(1.0, abs=1e-12)  # population std, as ART
    assert int(np.argmax(adv)) == int(np.argmax(rewards))


def test_by_hand() -> None:
    # rewards 1, 0: mean 0.5, population std 0.5 -> +1, -1 exactly (no epsilon)
    assert group_advantages([1.0, 0.0]) == [1.0, -1.0]
    assert group_advantages([1.0, 0.0], "centred") == [0.5, -0.5]
    # sample std of (1, 0) is sqrt(0.5): TRL's +-0.5 / 0.7071
    assert group_advantages([1.0, 0.0], ddof=1) == pytest.approx([math.sqrt(0.5), -math.sqrt(0.5)])


@pytest.mark.parametrize("convention", ["std", "centred"])
def test_a_flat_group_is_zero_never_divided(convention: str) -> None:
    for flat in ([0.7, 0.7], [0.1 + 0.2, 0.3, 0.3], [0.5], [0.2, 0.2 + FLAT / 2]):
        assert group_advantages(flat, convention) == [0.0] * len(flat)  # type: ignore[arg-type]
        assert not has_spread(flat)
    assert has_spread([0.5, 0.6]) and not has_spread([1.0])
    assert group_advantages([], convention) == []  # type: ignore[arg-type]


def test_the_noise_charge_by_convention() -> None:
    """Under std a barely uneven group pushes as hard as [0, 1, 0, 1]; centred, 50 times
    less in advantage (2,500 times less in its squared push)."""
    small, large = [0.50, 0.50, 0.50, 0.51], [0.0, 1.0, 0.0, 1.0]
    push = {c: [np.mean(np.square(group_advantages(g, c))) for g in (small, large)]  # type: ignore[arg-type]
            for c in ("std", "centred")}  # fmt: skip
    assert push["std"] == pytest.approx([1.0, 1.0])
    assert push["centred"] == pytest.approx([0.0043301**2, 0.25], rel=1e-3)
    assert max(abs(a) for a in group_advantages(small, "centred")) == pytest.approx(0.0075)


def test_batch_and_ragged_forms_are_the_group_form() -> None:
    rewards = np.array(GROUPS)
    for convention in ("std", "centred"):
        got = batch_advantages(rewards, convention)  # type: ignore[arg-type]
        want = [group_advantages(g, convention) for g in GROUPS]  # type: ignore[arg-type]
        np.testing.assert_allclose(got, want, atol=1e-12)
    ragged = [0.3, 0.9, 1.0, 0.0, 0.0, 0.5]
    labels = ["b", "b", "a", "a", "a", "c"]
    got = grouped_advantages(np.array(ragged), np.array(labels))
    np.testing.assert_allclose(got[:2], group_advantages(ragged[:2]))
    np.testing.assert_allclose(got[2:5], group_advantages(ragged[2:5]))
    assert got[5] == 0.0  # a group of one is flat
    with pytest.raises(ValueError, match="valid"):
        group_advantages([1.0, 0.0], "whitened")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_advantages"):
        group_advantages([1.0, 0.0], "batch")
    assert set(CONVENTIONS) == {"std", "centred", "batch"}


# --------------------------------------------------------------- TRL's and ART's formulas


def _trl_advantages(rewards: np.ndarray, scale: str) -> np.ndarray:
    """TRL 1.16 GRPOTrainer._generate_and_score_completions, re-derived: reward minus the
    group's nanmean, over (TRL's own `nanstd`, Bessel-corrected, + 1e-4) unless 'none'."""
    import torch
    from trl.trainer.utils import nanstd

    r = torch.tensor(rewards, dtype=torch.float64)
    k = r.shape[-1]
    flat = r.reshape(-1)
    mean = torch.nanmean(flat.view(-1, k), dim=1).repeat_interleave(k)
    if scale == "batch":
        std = nanstd(flat).expand_as(flat)
    else:
        std = nanstd(flat.view(-1, k), dim=1).repeat_interleave(k)
    adv = flat - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    return adv.reshape(r.shape).numpy()


def test_trl_source_is_the_formula_rederived() -> None:
    """If TRL changes how it scales rewards, this fails before the comparison below lies."""
    from trl import GRPOTrainer

    src = inspect.getsource(GRPOTrainer)
    for line in (
        "std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)",
        "std_rewards = nanstd(rewards).expand_as(rewards)",
        "advantages = rewards - mean_grouped_rewards",
        "advantages = advantages / (std_rewards + 1e-4)",
        'if self.scale_rewards != "none":',
    ):
        assert line in src, line


@pytest.mark.parametrize(("scale", "convention"),
                         [("group", "std"), ("none", "centred"), ("batch", "batch")])  # fmt: skip
def test_trl_scale_rewards_is_our_convention_with_ddof_1(scale: str, convention: str) -> None:
    rewards = np.array(GROUPS)
    trl = _trl_advantages(rewards, scale)
    ours = batch_advantages(rewards, convention, ddof=1)  # type: ignore[arg-type]
    # TRL's 1e-4 in the denominator: a relative 1e-4 / std (std >= 0.29 here) apart
    np.testing.assert_allclose(ours, trl, rtol=5e-4, atol=1e-12)
    assert np.all(trl[3] == 0) and np.all(ours[3] == 0)  # the flat group, both
    if convention != "centred":  # the population std (ddof 0) is sqrt(k / (k - 1)) larger
        k = rewards.shape[-1] if convention == "std" else rewards.size
        ours0 = batch_advantages(rewards, convention)  # type: ignore[arg-type]
        np.testing.assert_allclose(ours0 * math.sqrt((k - 1) / k), ours, atol=1e-12)


def test_art_tokenize_is_our_std_convention() -> None:
    import importlib.util

    spec = importlib.util.find_spec("art.preprocessing.tokenize")
    if spec is None or spec.origin is None:
        pytest.skip("ART is not installed")
    src = Path(spec.origin).read_text()
    assert "/ len(group)" in src and "advantage /= reward_std + 1e-6" in src
    for g in GROUPS:
        mean = sum(g) / len(g)
        std = math.sqrt(sum((r - mean) ** 2 for r in g) / len(g))
        art = [(r - mean) / (std + 1e-6) for r in g]
        assert group_advantages(g) == pytest.approx(art, rel=1e-5, abs=1e-12)


# ------------------------------------------------------------------------ one home


def _normalises_by_std(tree: ast.AST) -> list[int]:
    """Lines dividing by something named or computed as a standard deviation."""

    def stdish(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and "std" in sub.id.lower():
                return True
            if isinstance(sub, ast.Attribute) and sub.attr in ("std", "stdev", "pstdev"):
                return True
            if isinstance(sub, ast.Name) and sub.id in ("stdev", "pstdev"):
                return True
        return False

    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp | ast.AugAssign)
        and isinstance(n.op, ast.Div)
        and stdish(n.right if isinstance(n, ast.BinOp) else n.value)
    ]


def test_the_detector_finds_the_old_copies() -> None:
    old = (
        "def group_advantages(rewards):\n"
        "    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))\n"
        "    return [(r - mean) / (std + 1e-6) for r in rewards]\n"
        "z = pl.when(s > 0).then((pl.col('score') - mean) / pl.col('score').std(ddof=0))\n"
    )
    assert sorted(_normalises_by_std(ast.parse(old))) == [3, 4]


def test_advantages_have_one_home() -> None:
    """No module but judgelab/advantage.py defines an advantage function or divides by a
    standard deviation (a new copy of the advantage, or of the z-score)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == HOME:
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(SRC)}:{line}" for line in _normalises_by_std(tree)]
        found += [
            f"{path.relative_to(SRC)}:{n.lineno} def {n.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name.endswith("advantages")
        ]
    assert not found, found
