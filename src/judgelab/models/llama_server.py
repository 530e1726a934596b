"""`llama_cpp.server`, with grammar-constrained sampling done the way llama.cpp's server does it.

Run as ``python -m judgelab.models.llama_server --config_file ...`` (`EmbeddedServer` does).

llama-cpp-python puts the grammar into its sampler chain, so at every generated token the
grammar is matched against the whole vocabulary (49k to 262k tokens for the zoo models) before
top-k sees it. llama.cpp's own sampler (``common/sampling.cpp``) samples without the grammar
first and checks only the sampled token; only when the grammar rejects it does it apply the
grammar to the whole vocabulary and sample again. Greedy decoding gives the same tokens either
way (the best token the grammar allows is the best token when the grammar allows it); at a
temperature above 0 the distribution is llama.cpp's, as users of its server get.
Judge replies are 3-4x faster per token here (`bench/grammar_sampling.py`).
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals
from llama_cpp.llama import Llama

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
assert _TOKEN_DATA.itemsize == ctypes.sizeof(llama_cpp.llama_token_data)


class GrammarCheckedSampler:
    """A sampler chain without the grammar; its choice is checked against the grammar.

    Duck-types `llama_cpp._internals.LlamaSampler` where `Llama.sample` uses it (`sample`)."""

    def __init__(self, chain: _internals.LlamaSampler, grammar: Any, n_vocab: int) -> None:
        self.chain = chain
        self.grammar = grammar  # a llama_sampler* owned by this object
        self.n_vocab = n_vocab
        self._buf = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self.rejections = 0  # samples the grammar rejected (then drawn from the grammar's set)

    def _candidates(
        self, ctx: _internals.LlamaContext, idx: int
    ) -> llama_cpp.llama_token_data_array:
        logits = llama_cpp.llama_get_logits_ith(ctx.ctx, idx)
        self._buf["id"] = self._ids
        self._buf["logit"] = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
        self._buf["p"] = 0.0
        data = self._buf.ctypes.data_as(llama_cpp.llama_token_data_p)
        return llama_cpp.llama_token_data_array(
            data=data, size=self.n_vocab, selected=-1, sorted=False
        )

    def _allowed(self, token: int) -> bool:
        one = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 1.0, 0.0))
        single = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(single))
        return not (math.isinf(one[0].logit) and one[0].logit < 0)

    def _draw(self, cur: llama_cpp.llama_token_data_array) -> int:
        llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur))
        if not 0 <= cur.selected < cur.size:
            raise RuntimeError(f"sampler chain selected {cur.selected} of {cur.size} candidates")
        return int(cur.data[cur.selected].id)

    def sample(self, ctx: _internals.LlamaContext, idx: int = -1) -> int:
        token = self._draw(self._candidates(ctx, idx))
        if not self._allowed(token):
            self.rejections += 1
            cur = self._candidates(ctx, idx)
            llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(cur))
            token = self._draw(cur)
        llama_cpp.llama_sampler_accept(self.grammar, token)
        llama_cpp.llama_sampler_accept(self.chain.sampler, token)
        return token

    def close(self) -> None:
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None
        self.chain.close()

    def __del__(self) -> None:
        self.close()


_chain_sampler = Llama._init_sampler


def _init_sampler(self: Llama, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
    chain = _chain_sampler(self, *args, grammar=None, **kwargs)
    if grammar is None:
        return chain
    checker = llama_cpp.llama_sampler_init_grammar(
        self._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
    )
    if not checker:
        chain.close()
        raise ValueError("llama.cpp rejected the grammar built from the request's schema")
    return GrammarCheckedSampler(chain, checker, self._n_vocab)


def install() -> None:
    """Make every `Llama` in this process check grammars after sampling (idempotent)."""
    Llama._init_sampler = _init_sampler  # type: ignore[method-assign]


def main() -> None:
    install()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
