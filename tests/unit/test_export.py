"""LoRA adapter -> llama.cpp GGUF adapter: names, shapes and metadata llama.cpp reads, and the
Llama family's q/k row permutation (llama.cpp's converter, `LlamaModel.permute`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from judgelab.errors import ModelError
from judgelab.training.export import export_gguf_adapter, rope_permute

# 2 query heads of 4 dims (hidden 8), 1 KV head (k_proj and v_proj: 4 rows), as in GQA
CONFIG = {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}
KEY = "base_model.model.model.layers.{i}.self_attn.{m}.lora_{ab}.weight"


def _adapter(tmp_path: Path, r: int = 2, hidden: int = 8, kv: int = 4) -> Path:
    d = tmp_path / "adapter"
    d.mkdir()
    tensors = {}
    for i in range(2):
        for m, out in (("q_proj", hidden), ("k_proj", kv)):
            tensors[KEY.format(i=i, m=m, ab="A")] = np.full((r, hidden), i + 1, np.float32)
            tensors[KEY.format(i=i, m=m, ab="B")] = np.full((out, r), -i, np.float32)
    save_file(tensors, str(d / "adapter_model.safetensors"))
    (d / "adapter_config.json").write_text(json.dumps({"lora_alpha": 16, "r": r}))
    return d


def _random_adapter(tmp_path: Path, r: int = 3) -> tuple[Path, dict[str, np.ndarray]]:
    d = tmp_path / "random"
    d.mkdir()
    rng = np.random.default_rng(7)
    outs = {"q_proj": 8, "k_proj": 4, "v_proj": 4, "o_proj": 8}
    tensors = {
        KEY.format(i=i, m=m, ab=ab): rng.normal(size=(r, 8) if ab == "A" else (out, r))
        .astype(np.float32)
        for i in range(2) for m, out in outs.items() for ab in "AB"
    }  # fmt: skip
    save_file(tensors, str(d / "adapter_model.safetensors"))
    (d / "adapter_config.json").write_text(json.dumps({"lora_alpha": 6, "r": r}))
    return d, tensors


def _gguf_tensors(path: Path) -> dict[str, np.ndarray]:
    import gguf

    # GGUFReader's data is numpy-shaped: lora_a [r, in], lora_b [out, r]
    return {t.name: np.array(t.data) for t in gguf.GGUFReader(str(path)).tensors}


def _interleave_by_index(w: np.ndarray, n_head: int) -> np.ndarray:
    """The converter's permutation written out row by row: in head h of d rows, HF's row
    h*d + i (first half) goes to h*d + 2i and h*d + d/2 + i (second half) to h*d + 2i + 1."""
    d = w.shape[0] // n_head
    out = np.empty_like(w)
    for h in range(n_head):
        for i in range(d // 2):
            out[h * d + 2 * i] = w[h * d + i]
            out[h * d + 2 * i + 1] = w[h * d + d // 2 + i]
    return out


def test_rope_permute_is_the_converters_row_interleave() -> None:
    # one head of 4 rows: halves [0, 1] and [2, 3] interleave (hand-computed)
    assert rope_permute(np.arange(4), 1).tolist() == [0, 2, 1, 3]
    # two heads of 6 rows
    assert rope_permute(np.arange(12), 2).tolist() == [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11]
    w = np.random.default_rng(0).normal(size=(24, 5))
    for n_head in (1, 2, 3, 6):
        assert np.array_equal(rope_permute(w, n_head), _interleave_by_index(w, n_head))
    with pytest.raises(ModelError, match="5 heads"):
        rope_permute(w, 5)


def test_permuting_b_permutes_the_dense_delta_as_the_converter_permutes_w() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 16)), rng.normal(size=(24, 3))
    for n_head in (2, 3):
        np.testing.assert_allclose(
            rope_permute(b, n_head) @ a, _interleave_by_index(b @ a, n_head), rtol=1e-12
        )


def test_export_writes_llama_cpp_lora_names_shapes_and_alpha(tmp_path: Path) -> None:
    import gguf

    config = CONFIG | {"model_type": "qwen2"}
    out = export_gguf_adapter(_adapter(tmp_path), tmp_path / "a.gguf", config)
    reader = gguf.GGUFReader(str(out))
    fields = {
        k: bytes(f.parts[f.data[0]]).decode() if f.types[0] == gguf.GGUFValueType.STRING else None
        for k, f in reader.fields.items()
    }
    assert fields["general.type"] == "adapter" and fields["adapter.type"] == "lora"
    assert fields["general.architecture"] == "qwen2"
    alpha = reader.fields["adapter.lora.alpha"]
    assert float(alpha.parts[alpha.data[0]][0]) == 16.0
    tensors = {t.name: t for t in reader.tensors}
    assert set(tensors) == {
        f"blk.{i}.attn_{m}.weight.lora_{ab}" for i in range(2) for m in "qk" for ab in "ab"
    }
    # ggml shapes are numpy's reversed: lora_a [r, in] -> (in, r); lora_b [out, r] -> (r, out).
    assert tuple(tensors["blk.0.attn_q.weight.lora_a"].shape) == (8, 2)
    assert tuple(tensors["blk.0.attn_k.weight.lora_b"].shape) == (2, 4)
    assert np.all(tensors["blk.1.attn_q.weight.lora_a"].data == 2)


@pytest.mark.parametrize("model_type", ["qwen2", "llama"])
def test_export_permutes_llama_q_and_k_deltas_and_nothing_else(
    tmp_path: Path, model_type: str
) -> None:
    adapter, peft = _random_adapter(tmp_path)
    out = export_gguf_adapter(adapter, tmp_path / "a.gguf", CONFIG | {"model_type": model_type})
    got = _gguf_tensors(out)
    gguf_name = {
        "q_proj": "attn_q",
        "k_proj": "attn_k",
        "v_proj": "attn_v",
        "o_proj": "attn_output",
    }
    heads = {"q_proj": 2, "k_proj": 1}  # k_proj: the KV head count
    for i in range(2):
        for m, g in gguf_name.items():
            a, b = (peft[KEY.format(i=i, m=m, ab=ab)] for ab in "AB")
            ga, gb = got[f"blk.{i}.{g}.weight.lora_a"], got[f"blk.{i}.{g}.weight.lora_b"]
            assert np.array_equal(ga, a)  # A is never permuted
            permuted = model_type == "llama" and m in heads
            want = _interleave_by_index(b @ a, heads[m]) if permuted else b @ a
            np.testing.assert_allclose(gb @ ga, want, rtol=1e-6, atol=1e-6)
            assert np.array_equal(gb, b) is not permuted


def test_export_refuses_an_unknown_architecture_by_name(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"model_type \['llama', 'qwen2'\], not 'gemma3'"):
        export_gguf_adapter(
            _adapter(tmp_path), tmp_path / "a.gguf", CONFIG | {"model_type": "gemma3"}
        )
    assert not (tmp_path / "a.gguf").exists()
