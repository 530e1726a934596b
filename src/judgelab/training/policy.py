"""The trainable policy: an embedded GGUF model in transformers with a LoRA adapter.

transformers dequantises the GGUF to fp32 (≈20 s plus a slow tokenizer build for the
0.5B model), so the first load converts it once into a safetensors copy under
``~/.cache/judgelab/hf/<file>-<sha12>/``, made from the sha256-verified file; later loads
read that copy in seconds. The weights are those of the GGUF, dequantised: no hub, no
download.

Sampling returns the token ids it drew and their log-probabilities under the distribution
drawn from (the logits at the sampling temperature), so the GRPO step trains on exactly what
was sampled — tokenising the text again can give other ids (llama.cpp and transformers
disagree at times).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgelab.config import LoraSettings
from judgelab.errors import ModelError
from judgelab.extras import require
from judgelab.io import atomic_dir
from judgelab.models.zoo import ensure_model, model_sha256
from judgelab.paths import models_dir

log = logging.getLogger(__name__)

ADAPTER_FILE = "adapter_model.safetensors"
DEFAULT = "default"
# Positions per vocabulary projection in a training forward (`chunked_logprobs`): 64 x 4 rows
# x Qwen2.5's 151,936 tokens is 156 MB of float32 logits, against 622 MB a copy for a group of
# 4 x 256 completion tokens in one piece (bench/training_memory.py).
LOGPROB_CHUNK = 64


@dataclass(frozen=True)
class Sample:
    token_ids: list[int]  # completion only
    # one per completion token, under the distribution drawn from: softmax(logits / T) at the
    # sampling temperature T (greedy rows, T = 0: the T = 1 log-probability)
    logprobs: list[float]
    text: str
    finish_reason: str  # "stop" or "length"


def saved_lora(directory: Path) -> LoraSettings | None:
    """The LoRA settings a checkpoint's adapter was built with (PEFT's adapter_config.json),
    or None where the file is missing: a checkpoint is loaded with its own shape and scale,
    not with whatever `train.lora` says now (a changed alpha would load without an error
    and silently rescale the adapter)."""
    file = directory / "adapter_config.json"
    if not file.exists():
        return None
    body = json.loads(file.read_text())
    targets = body["target_modules"]
    return LoraSettings(
        r=body["r"],
        alpha=body["lora_alpha"],
        dropout=body.get("lora_dropout", 0.0),
        target_modules=sorted(targets) if isinstance(targets, list | set) else [targets],
    )


def _torch() -> Any:
    require("train", "training (the LoRA policy)")
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


def resolve_dtype(dtype: str, device: str) -> str:
    """`train.dtype` made concrete for this device; `auto`'s choice is logged with its reason."""
    from judgelab.hardware import cpu_info, training_dtype

    cpu = cpu_info()
    chosen = training_dtype(dtype, device, cpu)
    if dtype == "auto":
        where = "CUDA" if device.startswith("cuda") else cpu.summary()
        log.info("train.dtype auto -> %s on %s", chosen, where)
    return chosen


def converted_dir(zoo_name: str) -> Path:
    """The safetensors copy of a zoo model's GGUF (made on first use, in a child process:
    dequantising holds the whole model twice, and a process's freed heap is not handed back,
    so converting in the training process would add its peak to the training's)."""
    import multiprocessing

    from judgelab.models.zoo import ZOO

    gguf = ensure_model(zoo_name)
    target = models_dir().parent / "hf" / f"{ZOO[zoo_name].filename}-{model_sha256(zoo_name)[:12]}"
    if (target / "config.json").exists() and (target / ".complete").exists():
        return target
    require("train", "training (the LoRA policy)")
    log.info("converting %s to safetensors once (dequantising the GGUF)", gguf.name)
    child = multiprocessing.get_context("spawn").Process(
        target=_convert, args=(gguf, target, model_sha256(zoo_name)), name="judgelab-convert"
    )
    child.start()
    child.join()
    if child.exitcode != 0 or not (target / ".complete").exists():
        raise ModelError(
            f"converting {gguf.name} to safetensors failed (exit code {child.exitcode}); "
            "its log is above"
        )
    return target


def _convert(gguf: Path, target: Path, sha256: str) -> None:
    """Dequantise `gguf` to float32 safetensors at `target` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet_transformers()
    torch = _torch()
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
        (tmp / ".complete").write_text(json.dumps({"gguf_sha256": sha256}))


def seeded_lora_init(params: Mapping[str, Any], seed: int) -> None:
    """Initialise one adapter's LoRA weights in place from `seed` alone, as PEFT's default
    does (A: kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)); B: 0,
    so the policy is still the base model). `params` maps names without the adapter's name
    to its tensors; they are drawn in name order from one generator, so equal seeds give
    equal adapters, and the global torch RNG is neither read nor advanced."""
    import math

    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(params.items()):
            if ".lora_A." in name:
                draw = torch.empty(p.shape, dtype=torch.float32)
                torch.nn.init.kaiming_uniform_(draw, a=math.sqrt(5), generator=gen)
                p.copy_(draw.to(device=p.device, dtype=p.dtype))
            elif ".lora_B." in name:
                p.zero_()
            else:
                raise ModelError(f"{name}: neither a lora_A nor a lora_B weight")


def _contiguous_input(module: Any, args: tuple) -> tuple:
    """Forward pre-hook for the vocabulary projection. With `logits_to_keep`, transformers
    hands it a strided slice of the hidden states; torch's matmul then broadcasts the whole
    [hidden, vocab] weight per row and copies it (docs/BENCHMARKS.md). A contiguous input
    takes the plain matrix product."""
    return (args[0].contiguous(), *args[1:])


@dataclass
class _Rows:
    """The rows of one batched decode (`Policy.sample`): each row's temperature, token
    budget and generator, and what it has drawn so far."""

    temps: Any  # [N]
    limits: Any  # [N]
    gens: list[Any]
    tokens: list[list[int]]
    logprobs: list[list[float]]

    def draw(self, live: Any, logits: Any) -> Any:
        """One token for each live row from its logits [L, V]: exact inverse-CDF sampling
        from softmax(logits / T) with the row's own generator (greedy at T = 0), kept with
        its log-probability under the distribution drawn from. Returns the tokens [L] (on
        the CPU). The logits stay on their device (on CUDA, moving [L, V] logits to the CPU
        every step cost more than the forward); only the uniforms and the picks travel."""
        torch = _torch()
        temp = self.temps[live].to(logits.device)
        warm = torch.where(temp > 0, temp, torch.ones_like(temp))[:, None]
        logp = torch.log_softmax(logits / warm, dim=-1)
        cdf = torch.softmax(logits / warm, dim=-1).double().cumsum(-1)
        u = torch.cat([torch.rand(1, generator=self.gens[r], dtype=torch.float64)
                       for r in live.tolist()]).to(logits.device)  # fmt: skip
        sampled = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None])[:, 0]
        sampled = sampled.clamp(max=logits.shape[-1] - 1)
        nxt = torch.where(temp > 0, sampled, logits.argmax(-1))
        picked = logp.gather(-1, nxt[:, None])[:, 0].cpu()
        nxt = nxt.cpu()
        for r, t, lp in zip(live.tolist(), nxt.tolist(), picked.tolist(), strict=True):
            self.tokens[r].append(t)
            self.logprobs[r].append(lp)
        return nxt


def chunked_logprobs(head: Any, hidden: Any, targets: Any, temperature: float, chunk: int) -> Any:
    """log softmax(head(hidden) / temperature) at `targets`, [B, n] from hidden [B, n, H],
    `chunk` positions at a time, each chunk's logits recomputed in the backward (activation
    checkpointing) rather than kept: the memory of one chunk's [B, chunk, vocabulary] logits
    instead of the whole sequence's three or four copies (logits, scaled, log-softmax, its
    gradient)."""
    torch = _torch()
    from torch.utils.checkpoint import checkpoint

    def part(h: Any, t: Any) -> Any:
        logits = head(h).float() / temperature
        return logits.gather(-1, t[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)

    pieces = []
    for s in range(0, hidden.shape[1], chunk):
        h, t = hidden[:, s : s + chunk], targets[:, s : s + chunk]
        grad = torch.is_grad_enabled() and h.requires_grad
        pieces.append(checkpoint(part, h, t, use_reentrant=False) if grad else part(h, t))
    return torch.cat(pieces, dim=1)


class Policy:
    """Base weights frozen; one or more LoRA adapters (one per judge), each trainable.

    `adapter` loads a single saved adapter (a checkpoint) under the name "default";
    `adapters` names several, each a saved adapter or None for a fresh one. Fresh adapters
    start identical (LoRA's random A, B = 0), so every judge's policy_0 is the same base
    model and its rollouts are shared. `use(name)` selects the adapter a training forward
    runs and makes only its parameters trainable; `sample` takes an adapter per row, so one
    batched decode serves every judge's policy.
    """

    def __init__(
        self,
        zoo_name: str,
        lora: LoraSettings,
        device: str = "auto",
        adapter: Path | None = None,
        dtype: str = "float32",
        *,
        adapters: Mapping[str, Path | None] | None = None,
        gradient_checkpointing: bool = False,
    ) -> None:
        require("train", "training (the LoRA policy)")
        from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
        from transformers import AutoModelForCausalLM, AutoTokenizer

        _quiet_transformers()
        torch = _torch()
        self.zoo_name = zoo_name
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        sources = dict(adapters) if adapters is not None else {DEFAULT: adapter}
        if not sources:
            raise ModelError("Policy needs at least one adapter name")
        source = converted_dir(zoo_name)
        self.tokenizer = AutoTokenizer.from_pretrained(source)
        base = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, self.dtype))
        base.to(self.device)
        base.get_output_embeddings().register_forward_pre_hook(_contiguous_input)
        config = LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules),
            task_type="CAUSAL_LM",
        )
        names = list(sources)
        self.model = get_peft_model(base, config, adapter_name=names[0])
        fresh = self.adapter_state(names[0])
        for name in names[1:]:
            self.model.add_adapter(name, config)
            set_peft_model_state_dict(self.model, fresh, adapter_name=name)
        self.model.to(self.device)
        if gradient_checkpointing:  # active in train mode only (HF): steps, not sampling
            base.gradient_checkpointing_enable({"use_reentrant": False})
        for p in self.lora_parameters().values():  # PEFT keeps these float32; make sure
            p.data = p.data.float()
        for name, path in sources.items():
            if path is not None:
                self.load_adapter_weights(path, name)
        self.use(names[0])
        self.stop_ids = self._stop_ids()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.stop_ids[0]

    def use(self, name: str) -> None:
        """Run and train adapter `name` (the others are frozen and inactive)."""
        self.model.set_adapter(name)
        self.active = name

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
    def lora_parameters(self, name: str | None = None) -> dict[str, Any]:
        """LoRA parameters of adapter `name` (default: all adapters)."""
        tag = None if name is None else f".{name}."
        return {
            n: p
            for n, p in self.model.named_parameters()
            if "lora_" in n and (tag is None or tag in n)
        }

    def init_adapter(self, name: str, seed: int) -> None:
        """Re-initialise adapter `name` from `seed` (`seeded_lora_init`): a training seed's
        starting adapter. It is not the adapter a single-seed run with `train.seed` = seed
        starts from (that one comes from PEFT's draws on the global RNG)."""
        tag = f".{name}."
        seeded_lora_init(
            {n.replace(tag, "."): p for n, p in self.lora_parameters(name).items()}, seed
        )

    def trainable(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def adapter_state(self, name: str | None = None) -> dict[str, Any]:
        """Adapter `name`'s weights under PEFT's saved names (no adapter name in the keys)."""
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(self.model, adapter_name=name or self.active)

    def adapter_hash(self, name: str | None = None) -> str:
        """Content hash of an adapter's weights: the identity of a checkpoint. Independent
        of the adapter's name, so judges whose adapters are equal share rollouts."""
        h = hashlib.sha256(self.zoo_name.encode())
        for key, p in sorted(self.adapter_state(name).items()):
            h.update(key.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()[:16]

    def save_adapter(self, path: Path, name: str | None = None) -> None:
        """Write adapter `name` as PEFT does for a single adapter (loadable by PEFT too)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_dir(path) as tmp:
            self.write_adapter(tmp, name)

    def write_adapter(self, directory: Path, name: str | None = None) -> None:
        from safetensors.torch import save_file

        name = name or self.active
        state = {k: v.detach().contiguous().cpu() for k, v in self.adapter_state(name).items()}
        save_file(state, str(directory / ADAPTER_FILE), metadata={"format": "pt"})
        self.model.peft_config[name].save_pretrained(str(directory))

    def load_adapter_weights(self, path: Path, name: str) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        file = path / ADAPTER_FILE
        if not file.exists():
            raise ModelError(f"{path}: no {ADAPTER_FILE} (not a saved adapter)")
        state = load_file(str(file), device=self.device)
        expected = self.adapter_state(name)
        if set(state) != set(expected):
            extra = sorted(set(state) - set(expected))[:3]
            missing = sorted(set(expected) - set(state))[:3]
            raise ModelError(
                f"{path}: adapter does not fit {self.zoo_name} with train.lora "
                f"(unexpected {extra}, missing {missing})"
            )
        for key, value in state.items():
            if tuple(value.shape) != tuple(expected[key].shape):
                raise ModelError(
                    f"{path}: {key} has shape {tuple(value.shape)}, expected "
                    f"{tuple(expected[key].shape)} (train.lora.r differs?)"
                )
        set_peft_model_state_dict(self.model, state, adapter_name=name)

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
        seeds: Sequence[int],
        adapters: Sequence[str] | None = None,
    ) -> list[Sample]:
        """One completion per row, all rows in one batched decode. Row i continues
        `prompts[i]` with adapter `adapters[i]` (default: the active one) at temperature
        `temperatures[i]` (0 = greedy), drawing with its own generator seeded `seeds[i]`, so
        a row's draws do not depend on which other rows share the batch.

        Decoding is memory-bound on CPU, so every judge's training groups and held-out
        prompts share one batch (docs/TRAINING.md). The prompts' common prefix is prefilled
        once per adapter, each distinct (adapter, prompt) tail once, and the KV cache copied
        to the rows; a row leaves the batch when it stops. A draw is exact inverse-CDF
        sampling from softmax(logits / T), and the log-probability kept is that of the
        distribution drawn from, at T (the behaviour policy GRPO's importance ratio divides
        by; training forwards take `sequence_logprobs(..., temperature=T)`). Greedy rows
        (T = 0) keep the T = 1 log-probability; they are held-out rows, never trained on.
        """
        torch = _torch()
        names = list(adapters) if adapters is not None else [self.active] * len(prompts)
        for name in set(names):
            if name not in self.model.peft_config:
                have = list(self.model.peft_config)
                raise ModelError(f"sample: no adapter named {name!r} (have {have})")
        keys = [(a, tuple(p)) for a, p in zip(names, prompts, strict=True)]
        rows = _Rows(
            temps=torch.tensor([float(t) for t in temperatures]),
            limits=torch.tensor([int(m) for m in max_new_tokens]),
            gens=[torch.Generator().manual_seed(int(s)) for s in seeds],
            tokens=[[] for _ in keys],
            logprobs=[[] for _ in keys],
        )
        self.model.eval()
        try:
            with torch.no_grad():
                self._decode(list(dict.fromkeys(keys)), keys, rows)
        finally:
            self.use(self.active)
        samples = []
        for toks, lps in zip(rows.tokens, rows.logprobs, strict=True):
            finish = "stop" if toks and toks[-1] in self.stop_ids else "length"
            text = self.tokenizer.decode([t for t in toks if t not in self.stop_ids])
            samples.append(Sample(toks, lps, text, finish))
        return samples

    def _decode(
        self,
        distinct: list[tuple[str, tuple[int, ...]]],
        keys: Sequence[tuple[str, tuple[int, ...]]],
        rows: _Rows,
    ) -> None:
        """The batched decode of `sample`: prefill each distinct (adapter, prompt), copy its
        KV cache to its rows, then one token per live row per step into `rows`."""
        torch = _torch()
        source = torch.tensor([distinct.index(k) for k in keys])
        stop = torch.tensor(self.stop_ids)
        live = torch.arange(len(keys))  # the rows still decoding, in batch order
        cache, logits, mask, position = self._prefill(distinct)
        cache.reorder_cache(source.to(self.device))  # distinct prompts -> rows
        logits, mask, position = logits[source.to(logits.device)], mask[source], position[source]
        for step in range(int(rows.limits.max())):
            nxt = rows.draw(live, logits)
            going = ~(torch.isin(nxt, stop) | (rows.limits[live] <= step + 1))
            if not bool(going.any()):
                break
            if not bool(going.all()):
                keep = going.nonzero()[:, 0]
                cache.reorder_cache(keep.to(self.device))
                live, nxt = live[keep], nxt[keep]
                mask, position = mask[keep], position[keep]
            mask = torch.cat([mask, torch.ones((len(live), 1), dtype=torch.long)], dim=-1)
            position = position + 1
            out = self._forward(
                [distinct[i][0] for i in source[live].tolist()],
                input_ids=nxt[:, None].to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=position.to(self.device),
                past_key_values=cache,
            )
            logits = out.logits[:, -1].float()

    def _forward(self, adapters: Sequence[str], **kwargs: Any) -> Any:
        """A forward pass in which row i runs adapter `adapters[i]`."""
        if len(set(adapters)) > 1:
            kwargs["adapter_names"] = list(adapters)
        else:
            self.model.set_adapter(adapters[0])
        return self.model(use_cache=True, **kwargs)

    def _prefill(self, distinct: Sequence[tuple[str, tuple[int, ...]]]) -> tuple[Any, ...]:
        """KV cache, last-position logits [D, V], attention mask and last position [D, 1] of
        each distinct (adapter, prompt). The prompts' common prefix (the system prompt, most
        of a prompt here) is computed once per adapter and copied, not once per prompt."""
        torch = _torch()
        prompts = [p for _, p in distinct]
        shared = min(len(os.path.commonprefix(prompts)), min(len(p) for p in prompts) - 1)
        cache = None
        if shared >= 16:  # below that, a second forward costs more than it saves
            heads = list(dict.fromkeys(a for a, _ in distinct))
            out = self._forward(
                heads,
                input_ids=torch.tensor([list(prompts[0][:shared])] * len(heads)).to(self.device),
                logits_to_keep=1,
            )
            cache = out.past_key_values
            cache.reorder_cache(torch.tensor([heads.index(a) for a, _ in distinct]).to(self.device))
        else:
            shared = 0
        tails = [p[shared:] for p in prompts]
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(tails), shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        for i, t in enumerate(tails):  # left-padded between the shared prefix and the tail
            ids[i, width - len(t) :] = torch.tensor(t)
            mask[i, shared + width - len(t) :] = 1
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self._forward(
            [a for a, _ in distinct],
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=position[:, shared:].to(self.device),
            past_key_values=cache,
            logits_to_keep=1,
        )
        return out.past_key_values, out.logits[:, -1].float(), mask, position[:, -1:]

    def sequence_logprobs(
        self,
        tokens: Any,
        attention_mask: Any,
        start: int = 0,
        temperature: float = 1.0,
        chunk: int = LOGPROB_CHUNK,
    ) -> Any:
        """log p_T(tokens[t+1] | tokens[..t]) under softmax(logits / temperature) at every
        position t >= start, shape [B, T] (0 before `start` and at the last position). The
        vocabulary projection runs only from `start` on (a GRPO batch needs the completion
        positions, not the prompt's), `chunk` positions at a time (`chunked_logprobs`): the
        [B, T, vocabulary] logits are never held whole, in the forward or for the backward."""
        torch = _torch()
        peft = hasattr(self.model, "get_base_model")
        base = self.model.get_base_model() if peft else self.model
        hidden = base.model(input_ids=tokens, attention_mask=attention_mask)[0]
        picked = chunked_logprobs(
            base.get_output_embeddings(), hidden[:, start:-1], tokens[:, start + 1 :],
            temperature, chunk,
        )  # fmt: skip
        return torch.nn.functional.pad(picked, (start, 1), value=0.0)
