"""A trained LoRA adapter as a llama.cpp GGUF adapter, for serving a checkpoint with llama.cpp.

llama.cpp applies `scale * B @ A` to a base tensor when its adapter file holds
`<gguf tensor name>.lora_a` (PEFT's lora_A, shape [r, in]) and `.lora_b` (lora_B, [out, r]),
with `general.type = adapter`, `adapter.type = lora` and `adapter.lora.alpha`. Tensor names
come from gguf-py's own HF-to-GGUF map.

Llama-family GGUFs store the q/k projections' output rows permuted: llama.cpp's converter
(`convert_hf_to_gguf.py`, `LlamaModel.permute`, `undo_permute = True`) turns HF's rotary
layout (each head's rotated pairs in two halves) into GGML's (pairs adjacent), with the KV
head count for k_proj. `convert_lora_to_gguf.py` runs the same `modify_tensors` on a LoRA
pair, where a row permutation of W = B @ A permutes B's rows and leaves A as it is; so does
`rope_permute` here. Qwen2 is stored unpermuted. Any other architecture is refused rather
than exported wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from judgelab.errors import ModelError
from judgelab.extras import require
from judgelab.io import atomic_path

# HF `model_type` -> gguf-py's MODEL_ARCH member
SUPPORTED = {"qwen2": "QWEN2", "llama": "LLAMA"}
# those whose q/k rows the converter permutes (its LlamaModel, undo_permute = True)
ROPE_PERMUTED = frozenset({"llama"})
_PEFT = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<ab>[AB])\.weight$")


def rope_permute(rows: np.ndarray, n_head: int) -> np.ndarray:
    """`LlamaModel.permute` of llama.cpp's converter on a tensor's first axis (output rows):
    within each of `n_head` heads, row i of the first half and row i of the second half
    become rows 2i and 2i + 1."""
    if rows.shape[0] % (2 * n_head):
        raise ModelError(f"{rows.shape[0]} rows do not split into {n_head} heads of pairs")
    split = rows.reshape(n_head, 2, rows.shape[0] // n_head // 2, *rows.shape[1:])
    return split.swapaxes(1, 2).reshape(rows.shape)


def _gguf_tensor(module: str, ab: str, tensor: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    """PEFT's `module.lora_<ab>` as llama.cpp's base model stores its rows."""
    if config["model_type"] not in ROPE_PERMUTED or ab != "B":
        return tensor
    n_head = int(config["num_attention_heads"])
    if module.endswith(".q_proj"):
        return rope_permute(tensor, n_head)
    if module.endswith(".k_proj"):
        return rope_permute(tensor, int(config.get("num_key_value_heads") or n_head))
    return tensor


def _gguf_arch(config: Mapping[str, Any]) -> str:
    architecture = str(config.get("model_type"))
    arch = SUPPORTED.get(architecture)
    if arch is None:
        raise ModelError(
            f"GGUF adapter export supports model_type {sorted(SUPPORTED)}, not "
            f"{architecture!r} (how llama.cpp's converter lays out its weights is not known "
            "here, so the adapter could be applied to the wrong rows)"
        )
    return arch


def export_gguf_adapter(adapter_dir: Path, out: Path, config: Mapping[str, Any]) -> Path:
    """Write `adapter_dir` (PEFT save_pretrained) as a llama.cpp LoRA GGUF at `out`; `config`
    is the base model's HF config (config.json: model_type, num_hidden_layers, head counts)."""
    require("train", "exporting a checkpoint as a GGUF adapter")
    import gguf
    from safetensors.numpy import load_file

    arch = _gguf_arch(config)
    lora = json.loads((adapter_dir / "adapter_config.json").read_text())
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch), config["num_hidden_layers"])
    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(str(tmp), config["model_type"])
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", float(lora["lora_alpha"]))
        for key in sorted(tensors):
            m = _PEFT.match(key)
            if m is None:
                raise ModelError(f"{adapter_dir}: unexpected adapter tensor {key!r}")
            base = names.get_name(m["module"] + ".weight", try_suffixes=(".weight",))
            if base is None:
                raise ModelError(f"{adapter_dir}: no GGUF name for {m['module']!r}")
            data = _gguf_tensor(m["module"], m["ab"], tensors[key], config)
            writer.add_tensor(f"{base}.lora_{m['ab'].lower()}", data.astype("float32"))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out
