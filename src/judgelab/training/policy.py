"""The trainable policy: an embedded GGUF model in transformers with a LoRA adapter.

transformers dequantises the GGUF to fp32 (≈20 s plus a slow tokenizer build for the
0.5B model), so the first load converts it once into a safetensors copy under
``~/.cache/judgelab/hf/<file>-<sha12>/``, made from the sha256-verified file; later loads
read that copy in seconds. The weights are those of the GGUF, dequantised: no hub, no
download.

Sampling returns the token ids it drew and their log-probabilities under the current
policy (temperature-1 logits), so the GRPO step trains on exactly what was sampled —
tokenising the text again can give other ids (llama.cpp and transformers disagree at times).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgelab.config import LoraSettings
from judgelab.errors import ModelError
from judgelab.io import atomic_dir
from judgelab.models.zoo import ensure_model, model_sha256
from judgelab.paths import models_dir

log = logging.getLogger(__name__)

ADAPTER_FILE = "adapter_model.safetensors"


@dataclass(frozen=True)
class Sample:
    token_ids: list[int]  # completion only
    logprobs: list[float]  # one per completion token, under the sampling policy at T=1
    text: str
    finish_reason: str  # "stop" or "length"


def _torch() -> Any:
    import torch

    return torch


def _quiet_transformers() -> None:
    """No per-tensor progress bars in logs (a load prints hundreds of lines otherwise)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def resolve_device(device: str) -> str:
    torch = _torch()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("train.device: cuda requested but torch sees no CUDA device")
    return device


def converted_dir(zoo_name: str) -> Path:
    """The safetensors copy of a zoo model's GGUF (made on first use)."""
    from judgelab.models.zoo import ZOO

    gguf = ensure_model(zoo_name)
    target = models_dir().parent / "hf" / f"{ZOO[zoo_name].filename}-{model_sha256(zoo_name)[:12]}"
    if (target / "config.json").exists() and (target / ".complete").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet_transformers()
    torch = _torch()
    log.info("converting %s to safetensors once (dequantising the GGUF)", gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # A GGUF-loaded model carries quantizer attributes that make save_pretrained refuse it.
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            setattr(model, attr, None)
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / ".complete").write_text(json.dumps({"gguf_sha256": model_sha256(zoo_name)}))
    return target


class Policy:
    """Base weights frozen, a LoRA adapter trainable."""

    def __init__(
        self,
        zoo_name: str,
        lora: LoraSettings,
        device: str = "auto",
        adapter: Path | None = None,
        dtype: str = "float32",
    ) -> None:
        from peft import LoraConfig, PeftModel, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        _quiet_transformers()
        torch = _torch()
        self.zoo_name = zoo_name
        self.device = resolve_device(device)
        source = converted_dir(zoo_name)
        self.tokenizer = AutoTokenizer.from_pretrained(source)
        base = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype))
        base.to(self.device)
        if adapter is not None:
            self.model = PeftModel.from_pretrained(base, adapter, is_trainable=True)
        else:
            config = LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=list(lora.target_modules),
                task_type="CAUSAL_LM",
            )
            self.model = get_peft_model(base, config)
        self.model.to(self.device)
        for p in self.lora_parameters().values():  # PEFT keeps these float32; make sure
            p.data = p.data.float()
        self.stop_ids = self._stop_ids()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.stop_ids[0]

    def _stop_ids(self) -> list[int]:
        ids = []
        for token in ("<|im_end|>", "<|endoftext|>", "<end_of_turn>"):
            tid = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id and tid >= 0:
                ids.append(tid)
        if self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return list(dict.fromkeys(ids))

    # -- parameters -------------------------------------------------------------------
    def lora_parameters(self) -> dict[str, Any]:
        return {n: p for n, p in self.model.named_parameters() if "lora_" in n}

    def base_parameters(self) -> dict[str, Any]:
        return {n: p for n, p in self.model.named_parameters() if "lora_" not in n}

    def trainable(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def adapter_hash(self) -> str:
        """Content hash of the adapter weights: the identity of a checkpoint."""
        h = hashlib.sha256(self.zoo_name.encode())
        for name, p in sorted(self.lora_parameters().items()):
            h.update(name.encode())
            h.update(p.detach().cpu().numpy().tobytes())
        return h.hexdigest()[:16]

    def save_adapter(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_dir(path) as tmp:
            self.model.save_pretrained(tmp)

    def load_adapter_weights(self, path: Path) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        state = load_file(str(path / ADAPTER_FILE), device=self.device)
        result = set_peft_model_state_dict(self.model, state)
        if getattr(result, "unexpected_keys", None):
            raise ModelError(f"{path}: adapter does not fit {self.zoo_name}: unexpected keys")

    # -- prompts and sampling ---------------------------------------------------------
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        out = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True
        )
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return [int(t) for t in out]

    def sample(
        self,
        prompts: Sequence[list[int]],
        *,
        temperatures: Sequence[float],
        max_new_tokens: Sequence[int],
        seed: int,
    ) -> list[Sample]:
        """One completion per prompt, all in one batch (left-padded), each row at its own
        temperature (0 = greedy). Decoding is memory-bound on CPU, so a wider batch costs
        little more than a narrow one: training groups and held-out prompts share a batch.
        """
        torch = _torch()
        n = len(prompts)
        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        temps = torch.tensor([float(t) for t in temperatures])
        limits = torch.tensor([int(m) for m in max_new_tokens])
        gen = torch.Generator().manual_seed(seed)
        stop = torch.tensor(self.stop_ids)
        done = torch.zeros(n, dtype=torch.bool)
        tokens: list[Any] = []
        logps: list[Any] = []
        self.model.eval()
        with torch.no_grad():
            position = (mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=position.to(self.device),
                use_cache=True,
            )
            for step in range(int(limits.max())):
                logits = out.logits[:, -1].float().cpu()  # [B, V]
                logp = torch.log_softmax(logits, dim=-1)
                warm = torch.where(temps > 0, temps, torch.ones_like(temps))[:, None]
                probs = torch.softmax(logits / warm, dim=-1)
                drawn = torch.multinomial(probs, 1, generator=gen)[:, 0]
                nxt = torch.where(temps > 0, drawn, logits.argmax(-1))
                nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
                tokens.append(nxt)
                logps.append(logp.gather(-1, nxt[:, None])[:, 0])
                done |= torch.isin(nxt, stop) | (limits <= step + 1)
                if bool(done.all()):
                    break
                mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long)], dim=-1)
                position = position[:, -1:] + 1
                out = self.model(
                    input_ids=nxt[:, None].to(self.device),
                    attention_mask=mask.to(self.device),
                    position_ids=position.to(self.device),
                    past_key_values=out.past_key_values,
                    use_cache=True,
                )
        drawn_ids = torch.stack(tokens, dim=1)  # [B, T]
        drawn_logp = torch.stack(logps, dim=1)
        samples = []
        for i in range(n):
            toks = drawn_ids[i, : int(limits[i])].tolist()
            length, finish = len(toks), "length"
            for j, t in enumerate(toks):
                if t in self.stop_ids:
                    length, finish = j + 1, "stop"
                    break
            kept = toks[:length]
            text = self.tokenizer.decode([t for t in kept if t not in self.stop_ids])
            samples.append(Sample(kept, drawn_logp[i, :length].tolist(), text, finish))
        return samples

    def sequence_logprobs(self, tokens: Any, attention_mask: Any) -> Any:
        """log p(tokens[t+1] | tokens[..t]) at every position t, shape [B, T] (last = 0)."""
        torch = _torch()
        logits = self.model(input_ids=tokens, attention_mask=attention_mask).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        picked = logp.gather(-1, tokens[:, 1:, None])[..., 0]
        return torch.nn.functional.pad(picked, (0, 1), value=0.0)


def copy_adapter(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
