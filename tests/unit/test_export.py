"""LoRA adapter -> llama.cpp GGUF adapter: names, shapes and metadata llama.cpp reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from judgelab.errors import ModelError
from judgelab.training.export import export_gguf_adapter


def _adapter(tmp_path: Path, r: int = 2, hidden: int = 8, kv: int = 4) -> Path:
    d = tmp_path / "adapter"
    d.mkdir()
    prefix = "base_model.model.model.layers.{i}.self_attn.{m}.lora_{ab}.weight"
    tensors = {}
    for i in range(2):
        for m, out in (("q_proj", hidden), ("k_proj", kv)):
            tensors[prefix.format(i=i, m=m, ab="A")] = np.full((r, hidden), i + 1, np.float32)
            tensors[prefix.format(i=i, m=m, ab="B")] = np.full((out, r), -i, np.float32)
    save_file(tensors, str(d / "adapter_model.safetensors"))
    (d / "adapter_config.json").write_text(json.dumps({"lora_alpha": 16, "r": r}))
    return d


def test_export_writes_llama_cpp_lora_names_shapes_and_alpha(tmp_path: Path) -> None:
    import gguf

    out = export_gguf_adapter(_adapter(tmp_path), tmp_path / "a.gguf", "qwen2", n_layers=2)
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


def test_export_refuses_architectures_with_permuted_attention(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="llama"):
        export_gguf_adapter(_adapter(tmp_path), tmp_path / "a.gguf", "llama", n_layers=2)
    assert not (tmp_path / "a.gguf").exists()
