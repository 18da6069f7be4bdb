#!/usr/bin/env python3
"""flexgen_compare.py — zigzag against FlexGen on the same GPU, same policy, same
lengths, in one run: prefill, decode and total tokens/s of each and the ratio
zigzag / FlexGen (FlexGen's own throughput definitions, which zigzag bench uses).

Needs a GPU, a Python with torch (CUDA) and the `flexgen` package, and a built
zigzag. FlexGen asks the model hub for OPT's tokenizer at start; with dummy
weights the tokenizer only turns its fixed test prompt into ids, so this script
hands it a local GPT-2 style tokenizer instead (default: the one in
tests/fixtures/tiny-opt), which needs no network.

  python3 bench/flexgen_compare.py --zigzag build/zigzag --model opt-30b \
      --percent 20 80 0 100 100 0 --gpu-batch-size 8 --num-gpu-batches 2 --cpu-cache-compute

Writes CSV to stdout: system,model,policy,prefill_tok_s,decode_tok_s,total_tok_s,
and one row "ratio" with zigzag / FlexGen for each figure. Not a test.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_flexgen(a, log):
    """FlexGen in this process, its tokenizer pointed at a local directory."""
    import transformers
    from flexgen import flex_opt

    local = a.tokenizer_dir
    real = transformers.AutoTokenizer.from_pretrained

    def local_tokenizer(name, *args, **kw):
        kw.pop("use_fast", None)
        # OPT's special tokens: FlexGen pads its prompt to max_length
        for k, v in (("pad_token", "<pad>"), ("bos_token", "</s>"), ("eos_token", "</s>"), ("unk_token", "<unk>")):
            kw.setdefault(k, v)
        return transformers.GPT2Tokenizer.from_pretrained(local, *args, **kw)

    transformers.AutoTokenizer.from_pretrained = local_tokenizer
    flex_opt.AutoTokenizer.from_pretrained = local_tokenizer
    parser = argparse.ArgumentParser()
    flex_opt.add_parser_arguments(parser)
    argv = ["--model", "facebook/" + a.model, "--path", "_DUMMY_", "--offload-dir", a.offload_dir,
            "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len),
            "--gpu-batch-size", str(a.gpu_batch_size), "--num-gpu-batches", str(a.num_gpu_batches),
            "--percent", *[str(p) for p in a.percent], "--log-file", log]
    if a.cpu_cache_compute:
        argv.append("--cpu-cache-compute")
    try:
        flex_opt.run_flexgen(parser.parse_args(argv))
    finally:
        transformers.AutoTokenizer.from_pretrained = real
    text = open(log).read()
    got = {k: float(v) for k, v in re.findall(r"(prefill|decode|total) throughput: ([0-9.eE+-]+)", text)}
    if len(got) != 3:
        sys.exit(f"flexgen_compare: cannot read throughputs from FlexGen's log {log}:\n{text}")
    return got


def run_zigzag(a):
    cmd = [a.zigzag, "bench", "--model", a.model, "--dummy", "--prompt-len", str(a.prompt_len),
           "--gen-len", str(a.gen_len), "--gpu-batch-size", str(a.gpu_batch_size),
           "--num-gpu-batches", str(a.num_gpu_batches), "--percent", *[str(p) for p in a.percent],
           "--gpu-mem", a.gpu_mem, "--offload-dir", a.offload_dir, "--device", "cuda", "--json"]
    if a.cpu_cache_compute:
        cmd.append("--cpu-cache-compute")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"flexgen_compare: zigzag bench failed (exit {run.returncode}): {' '.join(cmd)}\n{run.stderr}")
    line = run.stdout.strip().splitlines()[-1]
    # the whole record (lane busy fractions, peak bytes per tier) on stderr, for the log
    print(f"zigzag bench --json: {line}", file=sys.stderr)
    j = json.loads(line)
    return {"prefill": j["prefill_tok_s"], "decode": j["decode_tok_s"], "total": j["total_tok_s"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default=os.path.join(HERE, "..", "build", "zigzag"))
    p.add_argument("--model", default="opt-6.7b")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--gen-len", type=int, default=32)
    p.add_argument("--gpu-batch-size", type=int, default=4)
    p.add_argument("--num-gpu-batches", type=int, default=1)
    p.add_argument("--percent", type=int, nargs=6, default=[100, 0, 100, 0, 100, 0])
    p.add_argument("--cpu-cache-compute", action="store_true")
    p.add_argument("--gpu-mem", default="16G", help="zigzag's device budget (a T4 has 16 GB)")
    p.add_argument("--offload-dir", default=tempfile.gettempdir())
    p.add_argument("--tokenizer-dir", default=os.path.join(HERE, "..", "tests", "fixtures", "tiny-opt"))
    a = p.parse_args()
    policy = f"gbs={a.gpu_batch_size} num_gb={a.num_gpu_batches} percent={'-'.join(map(str, a.percent))}" + \
             (" cpu_attn" if a.cpu_cache_compute else "")
    # zigzag first: its figures are kept even when FlexGen then fails in this
    # environment (it is an external package on whatever torch the machine has)
    zz = run_zigzag(a)
    print("system,model,policy,prefill_tok_s,decode_tok_s,total_tok_s")
    print(f"zigzag,{a.model},{policy},{zz['prefill']:.3f},{zz['decode']:.3f},{zz['total']:.3f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        fg = run_flexgen(a, os.path.join(tmp, "flexgen.log"))
    print(f"flexgen,{a.model},{policy},{fg['prefill']:.3f},{fg['decode']:.3f},{fg['total']:.3f}")
    print(f"ratio,{a.model},{policy},{zz['prefill'] / fg['prefill']:.3f},{zz['decode'] / fg['decode']:.3f},"
          f"{zz['total'] / fg['total']:.3f}")


if __name__ == "__main__":
    main()
