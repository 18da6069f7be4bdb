#!/usr/bin/env python3
"""hf_cpu_compare.py — zigzag's CPU device beside Hugging Face transformers, one run.

One checkpoint for both: transformers builds an OPT model of a zigzag preset's
shape (OPT-350M by default; its numbers are read from zigzag's own preset table
in runtime/arch_opt.c, or given with --hidden/--layers/--heads/--ffn/--vocab)
with its own random init (seed 0, nothing downloaded) and saves it in
--ckpt-dtype (bf16 by default: what checkpoints ship in) to --ckpt-dir
(write_checkpoint; kept and reused while its config matches). Both tools then
load that directory: prompts of --prompt-len random tokens, --gen-len new
tokens, greedy, KV cache on, weights in RAM, --threads threads for both.

--dtypes names the rows, each one dtype for both tools (issue #48 item 4):

  auto  each tool's default: zigzag `--cpu-dtype auto` (a bf16 checkpoint stays
        bf16), transformers' from_pretrained without a dtype (transformers 5
        loads dtype="auto": the checkpoint's, bf16; 4.x loaded f32); the dtype
        each ran is printed (transformers' model.dtype, zigzag's option);
  f32   zigzag `--cpu-dtype f32`, transformers dtype=torch.float32;
  bf16  zigzag `--cpu-dtype bf16`, transformers dtype=torch.bfloat16.

  zigzag        `zigzag bench --model CKPT_DIR --device cpu --threads T
                --gpu-batch-size B --num-gpu-batches 1 --cpu-dtype D --json`
                (one block of B sequences, everything on the CPU device);
  transformers  OPTForCausalLM.from_pretrained(CKPT_DIR), torch.set_num_threads(T):
                one forward over the prompts (the prefill, which also picks the
                first token), then gen-1 forwards of one token each with
                past_key_values and argmax (what generate() does for greedy
                search, without its Python bookkeeping, so transformers is if
                anything favoured).

Both report FlexGen's definitions, the ones launch/bench.c uses: prefill tok/s =
B * prompt / prefill time, decode tok/s = B * (gen - 1) / decode time, total tok/s
= B * gen / (prefill + decode time); weights are loaded and a short warm-up run
before the clock starts.

Runs alternate (zigzag, transformers, zigzag, transformers, ...) --rounds times
per batch, each a fresh process, so drift and neighbours hit both alike; the
table gives medians and the ratios zigzag / transformers of the same row (the
same --dtypes entry) and run.

  bench/hf_cpu_compare.sh build/zigzag -- --batches 64 --rounds 1
  /work/venv-tf/bin/python bench/hf_cpu_compare.py --zigzag build/zigzag --batches 64

Not a test. Exits 0 with a "skip:" line when torch or transformers cannot be
imported (the .sh picks the python: HF_PYTHON, else /work/venv-tf or /work/venv-hf,
else python3).
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
    p.add_argument("--model", default="opt-350m", help="an OPT preset of zigzag (runtime/arch_opt.c): the shape")
    p.add_argument("--batches", default="64")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=32)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--dtypes", default="auto,f32", help="rows, each one dtype for both tools: auto (each one's default), f32, bf16")
    p.add_argument("--ckpt-dtype", default="bf16", choices=("bf16", "f32"), help="dtype the checkpoint is saved in")
    p.add_argument("--ckpt-dir", help="where the checkpoint is written (default $TMPDIR/zz-hf-cmp-MODEL-DTYPE)")
    p.add_argument("--zz-args", default="", help="more zigzag bench options, one string (e.g. a policy)")
    p.add_argument("--csv", help="also write every run as CSV here")
    for k in ("hidden", "layers", "heads", "ffn", "vocab"):
        p.add_argument("--" + k, type=int, help="override the preset's " + k)
    p.add_argument("--one-hf", nargs=2, metavar=("DTYPE", "BATCH"), help=argparse.SUPPRESS)
    p.add_argument("--write-ckpt", action="store_true", help=argparse.SUPPRESS)
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


TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16"}


def opt_config(shape, dtype):
    from transformers import OPTConfig

    return OPTConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                     ffn_dim=shape["ffn"], num_attention_heads=shape["heads"], max_position_embeddings=shape["max_pos"],
                     word_embed_proj_dim=shape["embed"], do_layer_norm_before=shape["pre_ln"], enable_bias=True,
                     activation_function="relu", pad_token_id=1, bos_token_id=2, eos_token_id=2,
                     dtype=TORCH_DTYPE[dtype])


def write_checkpoint(a, shape):
    """transformers' random init (seed 0) of the shape, saved in --ckpt-dtype to --ckpt-dir."""
    import torch
    from transformers import OPTForCausalLM

    torch.manual_seed(0)
    model = OPTForCausalLM(opt_config(shape, "f32")).eval()
    model = model.to(getattr(torch, TORCH_DTYPE[a.ckpt_dtype]))
    model.config.zz_shape = shape  # what ckpt_ready compares
    model.save_pretrained(a.ckpt_dir)


def ckpt_ready(a, shape):
    try:
        cfg = json.load(open(os.path.join(a.ckpt_dir, "config.json")))
    except (OSError, ValueError):
        return False
    have = cfg.get("dtype", cfg.get("torch_dtype"))
    return cfg.get("zz_shape") == shape and have == TORCH_DTYPE[a.ckpt_dtype] and any(
        f.endswith(".safetensors") for f in os.listdir(a.ckpt_dir))


def hf_one(a, dtype, b):
    import torch
    from transformers import OPTForCausalLM

    torch.set_num_threads(a.threads)
    t0 = time.time()
    kw = {} if dtype == "auto" else {"dtype": getattr(torch, TORCH_DTYPE[dtype])}
    model = OPTForCausalLM.from_pretrained(a.ckpt_dir, **kw).eval()
    load_s = time.time() - t0
    vocab = model.config.vocab_size
    s, n = a.prompt_len, a.gen_len
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, vocab, (b, s), generator=g)

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
    r.update(engine="transformers", dtype=dtype, ran=str(model.dtype).replace("torch.", ""), batch=b, load_s=load_s,
             torch=torch.__version__)
    return r


# ---------------------------------------------------------------- zigzag side


def zz_one(a, dtype, b):
    cmd = [a.zigzag, "bench", "--model", a.ckpt_dir, "--device", "cpu", "--threads", str(a.threads),
           "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len), "--gpu-batch-size", str(b),
           "--num-gpu-batches", "1", "--cpu-dtype", dtype, "--json"] + a.zz_args.split()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return dict(engine="zigzag", dtype=dtype, batch=b, error=(p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1],
                    cmd=" ".join(cmd))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r.update(engine="zigzag", dtype=dtype, batch=b, cmd=" ".join(cmd))
    return r


def hf_proc(a, dtype, b):
    cmd = [sys.executable, os.path.abspath(__file__), "--one-hf", dtype, str(b), "--ckpt-dir", a.ckpt_dir,
           "--threads", str(a.threads), "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return dict(engine="transformers", dtype=dtype, batch=b, error=(p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- main


def main():
    a = parse()
    if a.one_hf:
        print(json.dumps(hf_one(a, a.one_hf[0], int(a.one_hf[1]))))
        return 0
    if a.write_ckpt:
        write_checkpoint(a, json.loads(a.shape_json))
        return 0
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except Exception as e:  # any import failure means: not installed usably
        print("skip: torch or transformers cannot be imported by %s (%s); use a venv with both, e.g. HF_PYTHON=/work/venv-tf/bin/python"
              % (sys.executable, e))
        return 0
    if not os.access(a.zigzag, os.X_OK):
        sys.exit("hf_cpu_compare: zigzag binary '%s' not found or not executable (build it first)" % a.zigzag)
    shape = preset_shape(a)
    if not a.ckpt_dir:
        a.ckpt_dir = os.path.join(os.environ.get("TMPDIR", "/tmp"), "zz-hf-cmp-%s-%s" % (a.model, a.ckpt_dtype))
    if not ckpt_ready(a, shape):
        # its own process, as the measured ones: the writer's memory leaves with it
        subprocess.run([sys.executable, os.path.abspath(__file__), "--write-ckpt", "--ckpt-dir", a.ckpt_dir,
                        "--ckpt-dtype", a.ckpt_dtype, "--shape-json", json.dumps(shape)], check=True)
    batches = [int(x) for x in a.batches.split(",") if x]
    dtypes = [d for d in a.dtypes.split(",") if d]
    for d in dtypes:
        if d not in ("auto",) + tuple(TORCH_DTYPE):
            sys.exit("hf_cpu_compare: --dtypes: '%s' is none of auto, %s" % (d, ", ".join(TORCH_DTYPE)))
    print("# %s shape %s, checkpoint %s in %s, prompt %d, gen %d, threads %d, %d round(s), alternating; %s"
          % (a.model, json.dumps(shape), a.ckpt_dir, a.ckpt_dtype, a.prompt_len, a.gen_len, a.threads, a.rounds,
             time.strftime("%Y-%m-%d %H:%M")), flush=True)
    runs = []
    for b in batches:
        for r in range(a.rounds):
            for d in dtypes:  # zigzag and transformers of one row back to back
                for eng in ("zigzag", "transformers"):
                    x = zz_one(a, d, b) if eng == "zigzag" else hf_proc(a, d, b)
                    x["round"] = r
                    runs.append(x)
                    if "error" in x:
                        print("# %s %s batch %d round %d: failed: %s" % (eng, d, b, r + 1, x["error"]), flush=True)
                    else:
                        print("# %s %s%s batch %d round %d: prefill %.1f decode %.1f total %.1f tok/s"
                              % (eng, d, " (ran %s)" % x["ran"] if "ran" in x else "", b, r + 1, x["prefill_tok_s"],
                                 x["decode_tok_s"], x["total_tok_s"]), flush=True)
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
    print("engine,dtype,batch,prefill_tok_s,decode_tok_s,total_tok_s,prefill_ratio_zz_over_hf_same_dtype,decode_ratio,total_ratio")
    for b in batches:
        for d in dtypes:
            base = med.get(("transformers", d, b))
            for eng in ("zigzag", "transformers"):
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
