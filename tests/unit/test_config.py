from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from judgelab.config import load_settings, parse_settings
from judgelab.errors import ConfigError
from judgelab.models.server import remote_endpoint

ROOT = Path(__file__).resolve().parents[2]


def params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_shipped_params_are_valid() -> None:
    s = load_settings(ROOT / "params.yaml")
    assert s.rollouts.policy == "qwen-0.5b"
    kinds = {ev.kind for ev in s.scores.evaluators}
    assert {"format", "execution", "ruler"} <= kinds
    judges = {ev.judge for ev in s.scores.evaluators if ev.kind == "ruler"}
    assert judges == {"qwen-1.5b", "qwen-0.5b", "smollm2-135m", "gemma-270m"}
    # Training on the default: execution as the reward, one epoch (a GRPO step per reward and
    # the final policy measured: what fits make run's 20 minutes, the llama wheel's build
    # included, on an AVX2-only CPU), held-out tasks where the base policy is mixed.
    assert "execution" in s.train.rewards
    assert s.train.epochs >= 1 and s.train.dtype == "auto"
    assert s.train.heldout.select == "mixed"


def test_unknown_key_is_named() -> None:
    d = params()
    d["rollouts"]["temprature"] = 0.5
    with pytest.raises(ConfigError, match=r"rollouts\.temprature: unknown key"):
        parse_settings(d)


def test_bad_choice_lists_valid_choices() -> None:
    d = params()
    d["scores"]["evaluators"][0]["kind"] = "vibes"
    with pytest.raises(
        ConfigError,
        match=r"scores\.evaluators\.0.*'format', 'syntax', 'execution', 'ruler', 'rubric'",
    ):
        parse_settings(d)


def test_bad_value_names_key() -> None:
    d = params()
    d["rollouts"]["k"] = 0
    with pytest.raises(
        ConfigError, match=r"rollouts\.k: Input should be greater than or equal to 1"
    ):
        parse_settings(d)


def test_unknown_judge_model_lists_known() -> None:
    d = params()
    d["scores"]["evaluators"][3]["judge"] = "gpt-9"
    with pytest.raises(ConfigError, match=r"unknown model 'gpt-9'; known models: \['gemma-270m'"):
        parse_settings(d)


def test_duplicate_evaluator_name() -> None:
    d = params()
    d["scores"]["evaluators"].append(dict(d["scores"]["evaluators"][0]))
    with pytest.raises(ConfigError, match="used twice"):
        parse_settings(d)


def test_not_yaml_and_not_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("models: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_settings(bad)


def test_endpoint_key_comes_from_named_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    d = params()
    d["models"]["remote"] = {
        "kind": "endpoint",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "api_key_env": "JL_TEST_KEY",
    }
    s = parse_settings(d)
    monkeypatch.delenv("JL_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="models.remote.api_key_env: .* JL_TEST_KEY is not set"):
        remote_endpoint("remote", s.models["remote"])
    monkeypatch.setenv("JL_TEST_KEY", "sk-secret-value")
    ep = remote_endpoint("remote", s.models["remote"])
    assert ep.api_key == "sk-secret-value"
    assert "sk-secret" not in repr(ep)


def test_inline_secret_is_rejected() -> None:
    d = params()
    d["models"]["remote"] = {
        "kind": "endpoint",
        "base_url": "http://x/v1",
        "model": "m",
        "api_key_env": "sk-abc123 def",
    }
    with pytest.raises(ConfigError, match="api_key_env must be the NAME"):
        parse_settings(d)


def test_judges_without_an_execution_truth_are_a_judge_only_audit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Judging tasks without tests is allowed (AutoRL requests, a team's own prompts), with a
    warning that says nothing is ranked against the tests."""
    d = params()
    d["scores"]["evaluators"] = [
        ev for ev in d["scores"]["evaluators"] if ev["kind"] != "execution"
    ]
    d["train"]["rewards"] = []
    with caplog.at_level("WARNING", logger="judgelab.config"):
        settings = parse_settings(d)
    assert not any(ev.kind == "execution" for ev in settings.scores.evaluators)
    (warning,) = [r.getMessage() for r in caplog.records if r.name.startswith("judgelab.config")]
    assert "judge-only audit" in warning and "nothing is ranked against the tests" in warning


def test_structured_output_defaults_to_auto_and_names_its_field_when_unknown() -> None:
    d = params()
    d["models"]["remote"] = {"kind": "endpoint", "base_url": "http://x/v1", "model": "m"}
    assert parse_settings(d).models["remote"].structured_output == "auto"
    for unknown in ("grammar", "none"):  # "none": text's old name, not an alias any more
        d["models"]["remote"]["structured_output"] = unknown
        with pytest.raises(ConfigError, match=r"models\.remote\.endpoint\.structured_output"):
            parse_settings(d)


def test_the_truth_is_named_among_the_execution_evaluators() -> None:
    d = params()
    d["scores"]["evaluators"].append(
        {"name": "execution-extended", "kind": "execution", "tests": "extended"}
    )
    d.setdefault("analysis", {})["truth"] = "execution-extended"
    assert parse_settings(d).analysis.truth == "execution-extended"
    d["analysis"]["truth"] = "format"
    with pytest.raises(ConfigError, match=r"analysis.truth: 'format' is not an execution"):
        parse_settings(d)


def test_an_old_key_names_its_new_name() -> None:
    """train.judges was renamed train.rewards: a params.yaml with the old key fails naming the
    new one, and is never read as if it were the new."""
    d = params()
    d["train"]["judges"] = d["train"].pop("rewards")
    with pytest.raises(ConfigError, match=r"train\.judges: renamed to 'rewards': rename the key"):
        parse_settings(d)


def test_a_removed_key_says_what_replaced_it() -> None:
    """train.min_ci_groups is gone (one minimum for every CI): a params.yaml that still sets
    it fails naming analysis.min_ci_groups, and is not read as if the key were absent."""
    d = params()
    d["train"]["min_ci_groups"] = 5
    with pytest.raises(
        ConfigError,
        match=r"train\.min_ci_groups: removed; the training stage uses analysis\.min_ci_groups",
    ):
        parse_settings(d)
    del d["train"]["min_ci_groups"]
    assert parse_settings(d).analysis.min_ci_groups == 15
