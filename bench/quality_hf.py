#!/usr/bin/env python3
"""Quality rows zigzag does not run itself, by simulation with Hugging Face (run by hand, never in CI).

On tests/fixtures/trained-opt and its held-out text, teacher forced in windows of
127 tokens from BOS (what `zigzag perplexity` and bench/quality_bench do), token
by token with a KV cache so that cache compression is simulated exactly where
it happens (every key and value is read back from the cache as stored):

  fp32                         the reference (checks against zigzag's number)
  w4 in-dim                    weights grouped along the input dim (zigzag's cw=1; cross-check)
  w4 out-channel               weights grouped along the output channel (FlexGen's code)
  kv4 per-token                K and V grouped along the head dim (zigzag's cc=1; cross-check)
  kivi k4 / k2                 KIVI: keys grouped per channel (32 tokens of one channel), values
                               per token; the 32 most recent tokens kept in full precision
  per-token k2                 the same 2 bits with per-token key groups (what KIVI says breaks)

Quantization is FlexGen's asymmetric min/max with f16 min (rounded down) and step
(rounded up), as kernels/cpu/quant.c does. Prints a Markdown table: held-out
perplexity and the share of tokens whose top-1 equals the fp32 run's.

  /work/venv-hf/bin/python bench/quality_hf.py [tests/fixtures/trained-opt]
"""
import math
import os
import sys

import torch
from transformers import GPT2TokenizerFast, OPTForCausalLM

torch.set_num_threads(1)


def f16_down(x):
    h = x.to(torch.float16).to(torch.float32)
    bad = h > x
    h[bad] = torch.nextafter(h[bad].to(torch.float16), torch.tensor(-math.inf, dtype=torch.float16)).to(torch.float32)
    return h


def f16_up(x):
    h = x.to(torch.float16).to(torch.float32)
    bad = h < x
    h[bad] = torch.nextafter(h[bad].to(torch.float16), torch.tensor(math.inf, dtype=torch.float16)).to(torch.float32)
    return h


def fake_quant(x, bits, group, dim):
    """Quantize-dequantize x in groups of `group` along `dim` (ragged last group)."""
    x = x.transpose(dim, -1)
    shape = x.shape
    n = shape[-1]
    flat = x.reshape(-1, n)
    out = torch.empty_like(flat)
    levels = (1 << bits) - 1
    for s in range(0, n, group):
        g = flat[:, s:s + group]
        lo = f16_down(g.min(dim=1, keepdim=True).values)
        mx = g.max(dim=1, keepdim=True).values
        step = torch.where(mx > lo, f16_up((mx - lo) / levels), torch.zeros_like(mx))
        inv = torch.where(step > 0, 1.0 / step, torch.zeros_like(step))
        q = torch.clamp(torch.round((g - lo) * inv), 0, levels)
        out[:, s:s + group] = lo + q * step
    return out.reshape(shape).transpose(dim, -1)


def quant_weights(model, dim):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.copy_(fake_quant(p.data, 4, 64, dim))


class CacheQuant:
    """How K and V are read back from the cache: list of [layer] -> functions of the full history."""

    def __init__(self, mode):
        self.mode = mode

    def apply(self, k, v):
        # k, v: [1, heads, t, hd] full precision history; returns what attention reads
        m = self.mode
        if m is None:
            return k, v
        if m == "kv4":
            return fake_quant(k, 4, 64, 3), fake_quant(v, 4, 64, 3)
        if m == "tok2":
            return fake_quant(k, 2, 64, 3), fake_quant(v, 2, 64, 3)
        bits = 4 if m == "kivi4" else 2
        t = k.shape[2]
        old = max(0, (t - 32) // 32 * 32)  # whole blocks of 32 tokens older than the 32 most recent
        k2, v2 = k.clone(), v.clone()
        if old > 0:
            k2[:, :, :old] = fake_quant(k[:, :, :old], bits, 32, 2)  # per channel: groups along tokens
            v2[:, :, :old] = fake_quant(v[:, :, :old], bits, 64, 3)  # per token: along the head dim
        return k2, v2


def run(model, ids, window, cq):
    """Teacher-forced NLL and argmax: for each prefix, a full forward pass whose
    attention reads K and V through cq (the last position's logits are used)."""
    nll, argmax = 0.0, []
    for s in range(0, len(ids), window):
        chunk = [2] + ids[s:s + window]
        for t in range(len(chunk) - 1):
            x = torch.tensor([chunk[:t + 1]])
            with torch.no_grad():
                lg = forward_with_cache(model, x, cq)[0, -1]
            nll += (torch.logsumexp(lg, 0) - lg[chunk[t + 1]]).item()
            argmax.append(int(lg.argmax()))
    return nll, argmax


class Proj(torch.nn.Module):
    """A K or V projection whose output is what the simulated cache gives back."""

    def __init__(self, lin, which, heads, hd, cq):
        super().__init__()
        self.lin, self.which, self.heads, self.hd, self.cq = lin, which, heads, hd, cq

    def forward(self, h):
        y = self.lin(h)  # [1, t, heads*hd]
        t = y.shape[1]
        y4 = y.view(1, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.cq.apply(y4, y4)
        q = k if self.which == "k" else v
        return q.transpose(1, 2).reshape(1, t, self.heads * self.hd)


def forward_with_cache(model, x, cq):
    """Every attention of the model reads K, V through cq. For per-token schemes this
    is exactly a quantized cache; for KIVI the earlier positions' hidden states are
    recomputed under the current step's quantization state (an approximation)."""
    saved = []
    for layer in model.model.decoder.layers:
        a = layer.self_attn
        saved.append((a, a.k_proj, a.v_proj))
        a.k_proj = Proj(a.k_proj, "k", a.num_heads, a.head_dim, cq)
        a.v_proj = Proj(a.v_proj, "v", a.num_heads, a.head_dim, cq)
    try:
        return model(x).logits
    finally:
        for a, k, v in saved:
            a.k_proj, a.v_proj = k, v


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/trained-opt"
    tok = GPT2TokenizerFast(vocab_file=os.path.join(d, "vocab.json"), merges_file=os.path.join(d, "merges.txt"))
    ids = tok(open(os.path.join(d, "heldout.txt"), encoding="utf-8").read())["input_ids"]
    rows = [("fp32", None, None), ("w4 g64 in-dim (zigzag cw=1)", 1, None), ("w4 g64 out-channel (FlexGen's code)", 0, None),
            ("kv4 g64 per-token (zigzag cc=1)", None, "kv4"), ("KIVI k4 per-channel, v4, recent 32 fp", None, "kivi4"),
            ("KIVI k2 per-channel, v2, recent 32 fp", None, "kivi2"), ("k2 v2 per-token (no recent window)", None, "tok2")]
    ref = None
    print("| variant | held-out ppl | top-1 = fp32 |")
    print("|---|---|---|")
    for name, wdim, cmode in rows:
        model = OPTForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
        if wdim is not None:
            quant_weights(model, wdim)
        nll, am = run(model, ids, 127, CacheQuant(cmode))
        if ref is None:
            ref = am
        agree = sum(a == b for a, b in zip(am, ref)) / len(am)
        print("| %s | %.2f | %.4f |" % (name, math.exp(nll / len(am)), agree), flush=True)


if __name__ == "__main__":
    main()
