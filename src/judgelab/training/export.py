"""A trained LoRA adapter as a llama.cpp GGUF adapter, for serving a checkpoint with llama.cpp.

llama.cpp applies `scale * B @ A` to a base tensor when its adapter file holds
`<gguf tensor name>.lora_a` (PEFT's lora_A, shape [r, in]) and `.lora_b` (lora_B, [out, r]),
with `general.type = adapter`, `adapter.type = lora` and `adapter.lora.alpha`. Tensor names
come from gguf-py's own HF-to-GGUF map. Only architectures whose attention weights llama.cpp
stores unpermuted (Qwen2) are exported; Llama-family q/k rows are permuted by the converter
and would need the same permutation here, so they are refused rather than exported wrong.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from judgelab.errors import ModelError
from judgelab.extras import require
from judgelab.io import atomic_path

SUPPORTED = {"qwen2": "QWEN2"}
_PEFT = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<ab>[AB])\.weight$")


def export_gguf_adapter(adapter_dir: Path, out: Path, architecture: str, n_layers: int) -> Path:
    """Write `adapter_dir` (PEFT save_pretrained) as a llama.cpp LoRA GGUF at `out`."""
    require("train", "exporting a checkpoint as a GGUF adapter")
    import gguf
    from safetensors.numpy import load_file

    arch = SUPPORTED.get(architecture)
    if arch is None:
        raise ModelError(
            f"GGUF adapter export supports {sorted(SUPPORTED)}, not {architecture!r} "
            "(its attention rows are permuted in GGUF)"
        )
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    tensors = load_file(str(adapter_dir / "adapter_model.safetensors"))
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch), n_layers)
    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(str(tmp), architecture)
        writer.add_string("general.type", "adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", float(config["lora_alpha"]))
        for key in sorted(tensors):
            m = _PEFT.match(key)
            if m is None:
                raise ModelError(f"{adapter_dir}: unexpected adapter tensor {key!r}")
            base = names.get_name(m["module"] + ".weight", try_suffixes=(".weight",))
            if base is None:
                raise ModelError(f"{adapter_dir}: no GGUF name for {m['module']!r}")
            suffix = "lora_a" if m["ab"] == "A" else "lora_b"
            writer.add_tensor(f"{base}.{suffix}", tensors[key].astype("float32"))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return out
