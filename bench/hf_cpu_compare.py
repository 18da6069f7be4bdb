#!/usr/bin/env python3
"""hf_cpu_compare.py — zigzag's CPU device beside Hugging Face transformers, one run.

The same OPT preset shape for both (OPT-1.3B by default; its numbers are read from
zigzag's own preset table in runtime/arch_opt.c, or given with --hidden/--layers/
--heads/--ffn/--vocab), random weights (zigzag --dummy; transformers' own init,
nothing downloaded), prompts of --prompt-len tokens, --gen-len new tokens, greedy,
KV cache on, weights in RAM, --threads threads for both:

  zigzag        `zigzag bench --model PRESET --dummy --device cpu --threads T
                --gpu-batch-size B --num-gpu-batches 1 --json` (one block of B
                sequences, everything on the CPU device), f32; `--cpu-dtype bf16`
                as an extra row when `zigzag --help` lists that option;
  transformers  OPTForCausalLM from an OPTConfig of the same numbers,
                torch.set_num_threads(T), f32 (and bf16 as an extra row): one
                forward over the prompts (the prefill, which also picks the first
                token), then gen-1 forwards of one token each with past_key_values
                and argmax (what generate() does for greedy search, without its
                Python bookkeeping, so transformers is if anything favoured).

Both report FlexGen's definitions, the ones launch/bench.c uses: prefill tok/s =
B * prompt / prefill time, decode tok/s = B * (gen - 1) / decode time, total tok/s
= B * gen / (prefill + decode time); weights are built and a short warm-up run
before the clock starts.

Runs alternate (zigzag, transformers, zigzag, transformers, ...) --rounds times
per batch, each a fresh process, so drift and neighbours hit both alike; the
table gives medians and the ratios zigzag / transformers of the same run.

  bench/hf_cpu_compare.sh build/zigzag -- --batches 16,64 --rounds 1
  /work/venv-hf/bin/python bench/hf_cpu_compare.py --zigzag build/zigzag --batches 64

Not a test. Exits 0 with a "skip:" line when torch or transformers cannot be
imported (the .sh picks the python: HF_PYTHON, else /work/venv-hf, else python3).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default="build/zigzag")
    p.add_argument("--model", default="opt-1.3b", help="an OPT preset of zigzag (runtime/arch_opt.c)")
    p.add_argument("--batches", default="16,64")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=32)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--hf-dtypes", default="f32,bf16", help="transformers weight dtypes (f32 is the one compared)")
    p.add_argument("--zz-dtypes", default="f32,bf16", help="zigzag --cpu-dtype values, each passed as given")
    p.add_argument("--zz-args", default="", help="more zigzag bench options, one string (e.g. a policy)")
    p.add_argument("--csv", help="also write every run as CSV here")
    for k in ("hidden", "layers", "heads", "ffn", "vocab"):
        p.add_argument("--" + k, type=int, help="override the preset's " + k)
    p.add_argument("--one-hf", nargs=2, metavar=("DTYPE", "BATCH"), help=argparse.SUPPRESS)
    p.add_argument("--shape-json", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------- the shape


def preset_shape(a):
    """The preset's numbers from zigzag's own table, so the two cannot drift apart."""
    src = open(os.path.join(HERE, "..", "runtime", "arch_opt.c")).read()
    m = re.search(r'\{"%s",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(true|false)\}' % re.escape(a.model), src)
    if not m:
        sys.exit("hf_cpu_compare: preset '%s' not found in runtime/arch_opt.c (give --hidden --layers --heads --ffn --vocab)"
                 % a.model)
    voc = re.search(r"c->vocab_size\s*=\s*(\d+);", src)
    pos = re.search(r"c->max_pos\s*=\s*(\d+);", src)
    s = dict(hidden=int(m.group(1)), layers=int(m.group(2)), heads=int(m.group(3)), ffn=int(m.group(4)),
             embed=int(m.group(5)), pre_ln=m.group(6) == "true", vocab=int(voc.group(1)), max_pos=int(pos.group(1)))
    for k in ("hidden", "layers", "heads", "ffn", "vocab"):
        if getattr(a, k) is not None:
            s[k] = getattr(a, k)
            if k == "hidden":
                s["embed"] = s["hidden"]
    return s


def rates(b, s, n, prefill_s, decode_s):
    """launch/bench.c's zz_bench_rates."""
    return dict(prefill_tok_s=b * s / prefill_s, decode_tok_s=b * (n - 1) / decode_s,
                total_tok_s=b * n / (prefill_s + decode_s), prefill_s=prefill_s, decode_s=decode_s)


# ---------------------------------------------------------------- transformers side (a process of its own)


def hf_one(a, shape, dtype, b):
    import torch
    from transformers import OPTConfig, OPTForCausalLM

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = OPTConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                    ffn_dim=shape["ffn"], num_attention_heads=shape["heads"], max_position_embeddings=shape["max_pos"],
                    word_embed_proj_dim=shape["embed"], do_layer_norm_before=shape["pre_ln"], enable_bias=True,
                    activation_function="relu", pad_token_id=1, bos_token_id=2, eos_token_id=2,
                    torch_dtype="float32")
    t0 = time.time()
    model = OPTForCausalLM(cfg).eval()
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    load_s = time.time() - t0
    s, n = a.prompt_len, a.gen_len
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, shape["vocab"], (b, s), generator=g)

    def run(ids, n):
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model(input_ids=ids, attention_mask=mask, use_cache=True)
            tok = out.logits[:, -1, :].argmax(-1, keepdim=True)
            past = out.past_key_values
            t1 = time.perf_counter()
            for _ in range(n - 1):
                mask = torch.cat([mask, torch.ones_like(tok)], dim=1)
                out = model(input_ids=tok, attention_mask=mask, past_key_values=past, use_cache=True)
                tok = out.logits[:, -1, :].argmax(-1, keepdim=True)
                past = out.past_key_values
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1

    run(ids[:1, :1], 2)  # warm-up, as zigzag bench's: one sequence, one token, one step
    pre, dec = run(ids, n)
    r = rates(b, s, n, pre, dec)
    r.update(engine="transformers", dtype=dtype, batch=b, load_s=load_s, torch=torch.__version__)
    return r


# ---------------------------------------------------------------- zigzag side


def zz_has_bf16(a):
    h = subprocess.run([a.zigzag, "--help"], capture_output=True, text=True)
    return "--cpu-dtype" in (h.stdout + h.stderr)


def zz_one(a, dtype, b):
    cmd = [a.zigzag, "bench", "--model", a.model, "--dummy", "--device", "cpu", "--threads", str(a.threads),
           "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len), "--gpu-batch-size", str(b),
           "--num-gpu-batches", "1", "--json"] + a.zz_args.split()
    cmd += ["--cpu-dtype", dtype]  # named: the default (auto) runs --dummy weights in bf16
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return dict(engine="zigzag", dtype=dtype, batch=b, error=(p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1],
                    cmd=" ".join(cmd))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r.update(engine="zigzag", dtype=dtype, batch=b, cmd=" ".join(cmd))
    return r


def hf_proc(a, dtype, b, shape):
    cmd = [sys.executable, os.path.abspath(__file__), "--one-hf", dtype, str(b), "--shape-json", json.dumps(shape),
           "--threads", str(a.threads), "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return dict(engine="transformers", dtype=dtype, batch=b, error=(p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- main


def main():
    a = parse()
    if a.one_hf:
        print(json.dumps(hf_one(a, json.loads(a.shape_json), a.one_hf[0], int(a.one_hf[1]))))
        return 0
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as e:  # any import failure means: not installed usably
        print("skip: torch or transformers cannot be imported by %s (%s); use a venv with both, e.g. HF_PYTHON=/work/venv-hf/bin/python"
              % (sys.executable, e))
        return 0
    if not os.access(a.zigzag, os.X_OK):
        sys.exit("hf_cpu_compare: zigzag binary '%s' not found or not executable (build it first)" % a.zigzag)
    shape = preset_shape(a)
    batches = [int(x) for x in a.batches.split(",") if x]
    zz_dtypes = [d for d in a.zz_dtypes.split(",") if d]
    if any(d != "f32" for d in zz_dtypes) and not zz_has_bf16(a):
        for d in zz_dtypes:
            if d != "f32":
                print("skip: zigzag %s row: `%s --help` lists no --cpu-dtype (the bf16 weight path is not in this build)"
                      % (d, a.zigzag))
        zz_dtypes = [d for d in zz_dtypes if d == "f32"]
    hf_dtypes = [d for d in a.hf_dtypes.split(",") if d]
    print("# %s shape %s, prompt %d, gen %d, threads %d, %d round(s), alternating; %s"
          % (a.model, json.dumps(shape), a.prompt_len, a.gen_len, a.threads, a.rounds, time.strftime("%Y-%m-%d %H:%M")),
          flush=True)
    runs = []
    for b in batches:
        for r in range(a.rounds):
            order = [("zigzag", d) for d in zz_dtypes] + [("transformers", d) for d in hf_dtypes]
            # zigzag f32 and transformers f32 back to back, the extra rows after
            order.sort(key=lambda e: e[1] != "f32")
            for eng, d in order:
                x = zz_one(a, d, b) if eng == "zigzag" else hf_proc(a, d, b, shape)
                x["round"] = r
                runs.append(x)
                if "error" in x:
                    print("# %s %s batch %d round %d: failed: %s" % (eng, d, b, r + 1, x["error"]), flush=True)
                else:
                    print("# %s %s batch %d round %d: prefill %.1f decode %.1f total %.1f tok/s"
                          % (eng, d, b, r + 1, x["prefill_tok_s"], x["decode_tok_s"], x["total_tok_s"]), flush=True)
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("engine,dtype,batch,round,prefill_tok_s,decode_tok_s,total_tok_s,prefill_s,decode_s\n")
            for x in runs:
                if "error" not in x:
                    f.write("%s,%s,%d,%d,%.3f,%.3f,%.3f,%.4f,%.4f\n" % (x["engine"], x["dtype"], x["batch"], x["round"],
                            x["prefill_tok_s"], x["decode_tok_s"], x["total_tok_s"], x["prefill_s"], x["decode_s"]))
    metrics = ("prefill_tok_s", "decode_tok_s", "total_tok_s")
    med = {}
    for x in runs:
        if "error" not in x:
            med.setdefault((x["engine"], x["dtype"], x["batch"]), []).append(x)
    print("engine,dtype,batch,prefill_tok_s,decode_tok_s,total_tok_s,prefill_ratio_zz_over_hf_f32,decode_ratio,total_ratio")
    for b in batches:
        base = med.get(("transformers", "f32", b))
        for eng, d in [("zigzag", d) for d in zz_dtypes] + [("transformers", d) for d in hf_dtypes]:
            rows = med.get((eng, d, b))
            if not rows:
                continue
            v = [statistics.median(x[m] for x in rows) for m in metrics]
            if base:
                bv = [statistics.median(x[m] for x in base) for m in metrics]
                ratio = ",".join("%.2f" % (p / q) for p, q in zip(v, bv))
            else:
                ratio = ",,"
            print("%s,%s,%d,%.1f,%.1f,%.1f,%s" % (eng, d, b, v[0], v[1], v[2], ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
