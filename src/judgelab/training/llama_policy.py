"""The policy sampled through the embedded llama.cpp: its base GGUF with the current LoRA
adapter, converted from PEFT to a GGUF adapter (`training.export`) whenever it changed.

Decoding on the CPU is where torch is slow (a batched decode of the dequantised model) and
llama.cpp is fast (docs/BENCHMARKS.md), so `LlamaPolicySampler` draws the rows a training
round needs, one at a time, with the prompt token ids the torch policy trains on (its chat
template), and returns the token ids llama.cpp drew: the GRPO step trains on exactly those
ids. llama.cpp runs the quantised base (Q4_K_M) while torch trains on its dequantised
weights, so the sampling and the training distributions differ a little (their greedy
tokens agree on 94-99 % of positions); the behaviour log-probabilities GRPO's ratio divides
by are therefore the torch policy's, computed just before the step (`Sample.logprobs` is
empty here), which makes every step on-policy for the policy that is trained.

Each row is drawn at its temperature with its own seed (`Llama.set_seed`), with every other
sampler stage off (top-k, top-p, min-p, repeat penalty), so a row is a draw from
softmax(logits / T) of the adapted quantised policy; T = 0 is greedy.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgelab.errors import ConfigError
from judgelab.models.zoo import ensure_model, model_sha256
from judgelab.training.export import SUPPORTED, export_gguf_adapter
from judgelab.training.policy import Policy, Sample

log = logging.getLogger(__name__)


def _is_base(state: Mapping[str, Any]) -> bool:
    """Every B is zero: the adapter leaves the base model as it is (a fresh adapter)."""
    return all(not bool(t.abs().max() > 0) for k, t in state.items() if ".lora_B." in k)


class LlamaPolicySampler:
    """Draws a round's rows from llama.cpp, one model per adapter in the round (see the
    module docstring). `key` is the part of a sampling-cache key that says so."""

    VERSION = 1

    def __init__(self, policy: Policy, n_threads: int) -> None:
        from judgelab.extras import require

        require("embedded", "sampling the policy through llama.cpp (train.sampler)")
        self.policy = policy
        self.n_threads = n_threads
        self.gguf = ensure_model(policy.zoo_name)
        self.config = policy.model.config.to_dict()
        if self.config.get("model_type") not in SUPPORTED:
            raise ConfigError(
                f"train.sampler: llama.cpp needs the adapter as a GGUF LoRA, which is written "
                f"for model_type {sorted(SUPPORTED)} only, not "
                f"{self.config.get('model_type')!r}; use train.sampler: torch"
            )
        self.key = {"engine": "llama.cpp", "version": self.VERSION,
                    "gguf": model_sha256(policy.zoo_name)}  # fmt: skip
        self._dir = tempfile.TemporaryDirectory(prefix="judgelab-lora-")

    def adapter_file(self, name: str) -> Path | None:
        """Adapter `name` as a GGUF LoRA (None: it is still the base model)."""
        state = self.policy.adapter_state(name)
        if _is_base(state):
            return None
        folder = Path(self._dir.name) / self.policy.adapter_hash(name)
        path = folder.with_suffix(".gguf")
        if not path.exists():
            folder.mkdir()
            self.policy.write_adapter(folder, name)
            export_gguf_adapter(folder, path, self.config)
        return path

    def sample(
        self,
        prompts: Sequence[list[int]],
        *,
        temperatures: Sequence[float],
        max_new_tokens: Sequence[int],
        seeds: Sequence[int],
        adapters: Sequence[str],
    ) -> list[Sample]:
        """`Policy.sample`'s contract, drawn by llama.cpp; `logprobs` are left empty."""
        out: dict[int, Sample] = {}
        for name in dict.fromkeys(adapters):
            rows = [i for i, a in enumerate(adapters) if a == name]
            drawn = self.sample_with(
                self.adapter_file(name),
                [prompts[i] for i in rows],
                temperatures=[temperatures[i] for i in rows],
                max_new_tokens=[max_new_tokens[i] for i in rows],
                seeds=[seeds[i] for i in rows],
            )
            out |= dict(zip(rows, drawn, strict=True))
        return [out[i] for i in range(len(prompts))]

    def sample_with(
        self,
        lora: Path | None,
        prompts: Sequence[list[int]],
        *,
        temperatures: Sequence[float],
        max_new_tokens: Sequence[int],
        seeds: Sequence[int],
    ) -> list[Sample]:
        """Rows drawn from the base GGUF with the GGUF LoRA `lora` (None: none), one model
        loaded for all of them; a prompt shared with the row before is not evaluated again."""
        width = max(len(p) + int(m) for p, m in zip(prompts, max_new_tokens, strict=True))
        llm = self._load(lora, width)
        try:
            return [
                self._draw(llm, p, t, m, s)
                for p, t, m, s in zip(prompts, temperatures, max_new_tokens, seeds, strict=True)
            ]
        finally:
            llm.close()

    def _load(self, lora: Path | None, width: int) -> Any:
        from llama_cpp import Llama

        return Llama(
            model_path=str(self.gguf),
            lora_path=str(lora) if lora else None,
            n_ctx=max(512, width + 8),
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,  # its default is every core, whatever n_threads
            logits_all=False,
            verbose=False,
        )

    def _draw(
        self, llm: Any, prompt: list[int], temperature: float, max_new: int, seed: int
    ) -> Sample:
        stop = set(self.policy.stop_ids)
        llm.set_seed(int(seed))
        tokens: list[int] = []
        for token in llm.generate(
            list(prompt), temp=float(temperature), top_k=0, top_p=1.0, min_p=0.0,
            typical_p=1.0, repeat_penalty=1.0, reset=True,
        ):  # fmt: skip
            tokens.append(int(token))
            if token in stop or len(tokens) >= max_new:
                break
        finish = "stop" if tokens and tokens[-1] in stop else "length"
        text = self.policy.tokenizer.decode([t for t in tokens if t not in stop])
        return Sample(tokens, [], text, finish)
