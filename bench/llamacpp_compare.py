#!/usr/bin/env python3
"""llamacpp_compare.py — zigzag beside llama.cpp on this machine, in one run.

One LLaMA-shaped model truncated to a few layers (--shape: 7b, hidden 4096,
32 heads, 32 K/V heads, intermediate 11008, the default; or 13b, hidden 5120,
40 heads, 40 K/V heads, intermediate 13824; vocabulary 32000 by default;
--layers of the model's 32 or 40; SHAPES below is the one table, which
bench/bigger_than_ram.py imports), random weights, the same shapes for both
engines:

  zigzag     a directory with only config.json, run with `zigzag bench --dummy`
             (deterministic random weights on the CPU device): f32, bf16
             (--cpu-dtype bf16), 4-bit (--compress-weight: groups of 64) and
             8-bit (--policy ... cw=8/64); the 4- and 8-bit rows twice, exact and
             with --cpu-act int8 (x in int8, as llama.cpp's Q8_0
             activations: "4bit-int8", "8bit-int8"; --paths default keeps only
             zigzag's default of each format: f32, bf16, 4bit-int8, 8bit-int8);
  llama.cpp  a GGUF written here with the `gguf` package (random f32 weights, a
             synthetic SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte
             tokens, then "▁tN"), converted to f16, Q4_0 and Q8_0 by llama.cpp's own
             llama_model_quantize; run through llama-cpp-python's low-level API
             as llama-batched-bench does it: B sequences of the same prompt
             length prefilled in n_batch chunks (logits for the last token of
             each), then gen-1 steps of B tokens (logits for all).

Both report FlexGen's definitions, which `zigzag bench` uses: prefill tok/s =
B * prompt / prefill time, decode tok/s = B * (gen - 1) / decode time, warm-up
excluded. Threads: --threads for both (zigzag --threads and
OPENBLAS_NUM_THREADS, llama.cpp n_threads and n_threads_batch).

The rows compared (issue #27): f32 / f32, bf16 / f16 (zigzag's CPU device holds
bf16, not f16, weights), 4-bit / Q4_0, 8-bit / Q8_0, each at every batch; the
CPU model heads the output. A zigzag configuration the binary refuses is
reported as such and the run goes on.

  /work/venv-lcpp/bin/python bench/llamacpp_compare.py --zigzag build/zigzag

On an AMX Xeon, llama-cpp-python 0.3.36 (built with AMX) repacks Q4_0/Q8_0 for
its AMX kernels, which die of SIGILL there (tilezero before any tile config,
even with the tile state granted): --plain-quant loads those two without the
extra buffer types (no AMX, no repacked layout), which leaves llama.cpp slower
than its non-AMX build with the repacked layout.

Prints one CSV row per (engine, dtype, batch), then the ratios zigzag / llama.cpp.
--runs N repeats the whole measurement N times, one run after another (issue #48
asks for two); --markdown FILE writes the table for docs/results.md: the CPU, its
ceilings (bench/peak_probe beside --zigzag, measured before the runs), and each
cell's ratio from every run, bold where all are at or above 1. A default row
(--paths default) runs zigzag's defaults, --cpu-dtype auto --cpu-act auto, except
the f32 row's --cpu-dtype f32 (auto is bf16 under --dummy):

  python3 bench/llamacpp_compare.py --paths default --runs 2 --markdown t.md
Not a test. Exit 0 with a "skip:" line when llama-cpp-python or gguf is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default="build/zigzag")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "zz-lcpp-compare"))
    p.add_argument("--shape", choices=sorted(SHAPES), default="7b", help="the LLaMA whose layer shapes are used")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=16)
    p.add_argument("--batches", default="1,16,64")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtypes", default="f32,f16,q4_0,q8_0",
                   help="llama.cpp weight types; zigzag runs f32, bf16 beside f16, 4bit beside q4_0, 8bit beside q8_0")
    p.add_argument("--paths", choices=["all", "default"], default="all",
                   help="zigzag rows: every path beside each llama.cpp type, or only zigzag's default for that "
                        "weight format (f32, bf16, 4bit-int8, 8bit-int8: issue #48's table)")
    p.add_argument("--plain-quant", action="store_true",
                   help="llama.cpp's Q4_0/Q8_0 without its extra buffer types (use_extra_bufts off: no AMX, no "
                        "repacked layout); where its AMX kernels die of SIGILL (tilezero before a tile config, "
                        "llama-cpp-python 0.3.36 on an AMX Xeon)")
    p.add_argument("--lcpp-passive", action="store_true",
                   help="llama.cpp's OpenMP threads sleep at a barrier (OMP_WAIT_POLICY=passive) rather than spin: "
                        "on a host with more runnable threads than cores its spinning threads wait on descheduled "
                        "ones (batch-1 decode of Q4_0 at load 22 on 2 cores: 3.1 tok/s spinning, 44 passive)")
    p.add_argument("--repeat", type=int, default=1,
                   help="within a run, measure each (engine, type, batch) this many times, the engines in turn, and "
                        "keep each engine's best prefill and best decode: on a host loaded by other jobs")
    p.add_argument("--runs", type=int, default=1, help="measure everything this many times, one run after another")
    p.add_argument("--markdown", metavar="FILE",
                   help="write a markdown table there: the CPU, its ceilings (bench/peak_probe), the ratios of every run")
    p.add_argument("--peak-probe", metavar="PATH", help="bench/peak_probe (default: bench/peak_probe beside --zigzag)")
    p.add_argument("--one", nargs=3, metavar=("GGUF", "KVTYPE", "BATCH"), help=argparse.SUPPRESS)
    return p.parse_args()


# LLaMA's layer shapes (the published configs), the one table for this script and
# bench/bigger_than_ram.py; "layers" is the full model's depth (--layers takes a part)
SHAPES = {
    "7b": dict(name="LLaMA-7B", hidden=4096, heads=32, kv_heads=32, inter=11008, layers=32),
    "13b": dict(name="LLaMA-13B", hidden=5120, heads=40, kv_heads=40, inter=13824, layers=40),
}


# the model's shapes: --shape's layer, truncated depth; one dict for both engines
def shapes(a):
    t = SHAPES[getattr(a, "shape", "7b")]
    return dict(name=t["name"], hidden=t["hidden"], heads=t["heads"], kv_heads=t["kv_heads"], inter=t["inter"],
                layers=a.layers, vocab=a.vocab, ctx=2048, eps=1e-6, theta=10000.0)


def write_config(d, s):
    os.makedirs(d, exist_ok=True)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": s["hidden"],
           "intermediate_size": s["inter"], "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
           "num_hidden_layers": s["layers"], "vocab_size": s["vocab"], "max_position_embeddings": s["ctx"],
           "rms_norm_eps": s["eps"], "rope_theta": s["theta"], "hidden_act": "silu", "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


POOL = 1 << 24  # values in write_gguf's pool


def write_vocab(w, v):
    """A LLaMA-style vocabulary of v tokens (unk, bos, eos, 256 bytes, then
    made-up pieces) into GGUF writer w: llama.cpp loads no model without one."""
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    toks += ["\u2581t%d" % i for i in range(v - len(toks))]
    types += [1] * (v - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([-float(i) for i in range(v)])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def write_gguf(path, s, dtype="f32", pool=False):
    """A random LLaMA GGUF with llama.cpp's tensor names, matrices in dtype
    ("f32" or "f16"; norms f32). Streamed one tensor at a time: a 13B model is
    52 GB in f32, more than this machine's memory. Each value drawn on its own
    (the default: ~20 M values/s here, 13B's 13 G values in 12 minutes), or with
    pool, matrices cut in pieces of POOL/2 from POOL values drawn once, at offsets
    that move from piece to piece: llama.cpp's speed does not depend on the
    values, and the file is written at the disk's rate."""
    import gguf
    import numpy as np
    rng = np.random.default_rng(0)
    h, f, v, L = s["hidden"], s["inter"], s["vocab"], s["layers"]
    kvd = s["kv_heads"] * (h // s["heads"])
    mdt = {"f32": np.float32, "f16": np.float16}[dtype]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("%s-shaped-%dL-random" % (s.get("name", "llama-7b").lower(), L))
    w.add_context_length(s["ctx"])
    w.add_embedding_length(h)
    w.add_block_count(L)
    w.add_feed_forward_length(f)
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_dimension_count(h // s["heads"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_rope_freq_base(s["theta"])
    w.add_file_type({"f32": 0, "f16": 1}[dtype])  # LLAMA_FTYPE_ALL_F32, _MOSTLY_F16
    write_vocab(w, v)

    # (name, rows, cols, matrix?) in file order; matrices drawn in this order
    plan = [("token_embd.weight", v, h, True)]
    for i in range(L):
        b = "blk.%d." % i
        plan += [(b + "attn_norm.weight", 1, h, False), (b + "attn_q.weight", h, h, True),
                 (b + "attn_k.weight", kvd, h, True), (b + "attn_v.weight", kvd, h, True),
                 (b + "attn_output.weight", h, h, True), (b + "ffn_norm.weight", 1, h, False),
                 (b + "ffn_gate.weight", f, h, True), (b + "ffn_up.weight", f, h, True),
                 (b + "ffn_down.weight", h, f, True)]
    plan += [("output_norm.weight", 1, h, False), ("output.weight", v, h, True)]
    for name, r, c, m in plan:
        dt = np.dtype(mdt if m else np.float32)
        w.add_tensor_info(name, (r, c) if m else (c,), dt, r * c * dt.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    ones = np.ones(h, dtype=np.float32)
    src = (rng.standard_normal(POOL, dtype=np.float32) * 0.02).astype(mdt) if pool else None
    piece, at = POOL // 2, 0

    def matrix(r, c):
        nonlocal at
        if src is None:
            return (rng.standard_normal((r, c), dtype=np.float32) * 0.02).astype(mdt)
        out = np.empty(r * c, dtype=mdt)
        for i in range(0, r * c, piece):
            k = min(piece, r * c - i)
            at = (at + 7919 * 64) % (POOL - piece)
            out[i:i + k] = src[at:at + k]
        return out.reshape(r, c)

    for name, r, c, m in plan:
        w.write_tensor_data(matrix(r, c) if m else ones)
    w.close()


def lcpp_fn(lc, *names):
    for n in names:
        if hasattr(lc, n):
            return getattr(lc, n)
    raise RuntimeError("llama_cpp has none of %s" % (names,))


FTYPES = {"f16": 1, "q4_0": 2, "q8_0": 7}  # LLAMA_FTYPE_MOSTLY_F16, _Q4_0, _Q8_0
# zigzag's configurations beside each llama.cpp weight type (the exact one first)
ZZ_PEER = {"f32": ["f32"], "f16": ["bf16"], "q4_0": ["4bit", "4bit-int8"], "q8_0": ["8bit", "8bit-int8"]}
# zigzag's default path of each weight format (--cpu-dtype auto, --cpu-act auto)
ZZ_DEFAULT = {"f32", "bf16", "4bit-int8", "8bit-int8"}
GGML_TYPE = {"f32": 0, "f16": 1}


def quantize(src, dst, dtype, threads):
    import llama_cpp as lc
    qp = lc.llama_model_quantize_default_params()
    qp.ftype = FTYPES[dtype]
    qp.nthread = threads
    rc = lc.llama_model_quantize(src.encode(), dst.encode(), qp)
    if rc != 0:
        raise RuntimeError("llama_model_quantize %s -> %s (%s) returned %d" % (src, dst, dtype, rc))


def amx_permit():
    """Ask Linux for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM,
    XFEATURE_XTILEDATA), as bench/peak.c does: a llama.cpp built with AMX
    repacks Q4_0/Q8_0 for its AMX kernels and, without the permission, dies of
    SIGILL on the first tile instruction (an AMX Xeon, llama-cpp-python 0.3.36).
    Nothing happens where the CPU or the kernel lacks it."""
    import ctypes
    import platform
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(158, 0x1023, 18)  # SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    except OSError:
        pass


def lcpp_one(a, gguf_path, kv_type, B, model_params=None, context_params=None):
    """One batch size on one GGUF, in its own process (memory goes back after).
    model_params, context_params: llama_model_params / llama_context_params
    fields to set (bench/bigger_than_ram.py asks for plain mmap and one KV cache
    for all sequences). Returns the printed dict."""
    import llama_cpp as lc
    P, G, T = a.prompt_len, a.gen_len, a.threads
    amx_permit()
    lc.llama_backend_init()
    mp = lc.llama_model_default_params()
    if getattr(a, "plain_quant", False):
        mp.use_extra_bufts = False
    for k, v in (model_params or {}).items():
        setattr(mp, k, v)
    model = lcpp_fn(lc, "llama_model_load_from_file", "llama_load_model_from_file")(gguf_path.encode(), mp)
    if not model:
        raise RuntimeError("llama.cpp could not load %s" % gguf_path)
    cp = lc.llama_context_default_params()
    cp.n_ctx = ((B * (P + G) + 255) // 256) * 256
    cp.n_batch = min(2048, max(B * P, B))
    cp.n_ubatch = min(512, cp.n_batch)
    cp.n_seq_max = B
    cp.n_threads = T
    cp.n_threads_batch = T
    cp.type_k = GGML_TYPE[kv_type]
    cp.type_v = GGML_TYPE[kv_type]
    for k, v in (context_params or {}).items():
        setattr(cp, k, v)
    ctx = lcpp_fn(lc, "llama_init_from_model", "llama_new_context_with_model")(model, cp)
    if not ctx:
        raise RuntimeError("llama.cpp could not make a context (n_ctx %d, %d sequences)" % (cp.n_ctx, B))
    nv = a.vocab
    batch = lc.llama_batch_init(cp.n_batch, 0, 1)

    def run(tokens):  # tokens: list of (id, pos, seq, want_logits); decoded in n_batch chunks
        for c in range(0, len(tokens), cp.n_batch):
            chunk = tokens[c:c + cp.n_batch]
            for i, (t, p, sq, lg) in enumerate(chunk):
                batch.token[i] = t
                batch.pos[i] = p
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = sq
                batch.logits[i] = lg
            batch.n_tokens = len(chunk)
            rc = lc.llama_decode(ctx, batch)
            if rc != 0:
                raise RuntimeError("llama_decode returned %d (batch %d)" % (rc, B))

    def tok(sq, p):  # deterministic ids outside the special and byte tokens
        return 259 + (sq * 7919 + p * 104729) % (nv - 259)

    clear = None
    for n in ("llama_kv_self_clear", "llama_kv_cache_clear"):
        if hasattr(lc, n):
            clear = getattr(lc, n)
            break
    if clear is None and hasattr(lc, "llama_get_memory"):
        def clear(c):
            lc.llama_memory_clear(lc.llama_get_memory(c), True)
    # warm-up as zigzag bench's: one sequence, one token, then one step
    run([(tok(0, 0), 0, 0, 1)])
    run([(tok(0, 1), 1, 0, 1)])
    clear(ctx)
    t0 = time.perf_counter()
    run([(tok(sq, p), p, sq, 1 if p == P - 1 else 0) for sq in range(B) for p in range(P)])
    t1 = time.perf_counter()
    for g in range(1, G):
        run([(tok(sq, P + g), P + g - 1, sq, 1) for sq in range(B)])
    t2 = time.perf_counter()
    lc.llama_batch_free(batch)
    lc.llama_free(ctx)
    lcpp_fn(lc, "llama_model_free", "llama_free_model")(model)
    got = {"prefill_s": t1 - t0, "decode_s": t2 - t1,
           "prefill_tok_s": B * P / (t1 - t0), "decode_tok_s": B * (G - 1) / (t2 - t1)}
    print(json.dumps(got))
    return got


def zigzag_path_flags(dtype):
    """The flags of one zigzag row. A default row (ZZ_DEFAULT) runs zigzag's
    defaults, --cpu-dtype auto and --cpu-act auto, said aloud: auto gives bf16 under
    --dummy and f32 beside 4/8-bit weights, int8 activations for 4/8-bit weights.
    Only the f32 row names its dtype (f32, the dtype of an f32 checkpoint, which auto
    keeps; --dummy has no checkpoint). The exact 4/8-bit rows name --cpu-act exact."""
    dt = "f32" if dtype == "f32" else "auto"
    act = "auto" if dtype in ZZ_DEFAULT else "exact"
    return ["--cpu-dtype", dt, "--cpu-act", act]


def zigzag_one(a, mdir, B, dtype):
    cmd = [a.zigzag, "bench", "--model", mdir, "--dummy", "--prompt-len", str(a.prompt_len), "--gen-len",
           str(a.gen_len), "--threads", str(a.threads), "--attn-threads", str(a.threads), "--device", "cpu", "--json"]
    if dtype.startswith("8bit"):  # another group format: the policy line names it
        cmd += ["--policy", "gbs=%d num_gb=1 w=100,0 c=100,0 a=100,0 cw=8/64" % B]
    else:
        cmd += ["--gpu-batch-size", str(B), "--num-gpu-batches", "1"]
    if dtype.startswith("4bit"):
        cmd.append("--compress-weight")
    cmd += zigzag_path_flags(dtype)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return None, msg
    return json.loads(r.stdout.strip().splitlines()[-1]), " ".join(cmd)


def measure(a, mdir, paths, dtypes):
    """One run: every batch size, each llama.cpp dtype then zigzag's peer rows.
    Prints the CSV rows and the ratios; returns {(engine, dtype, batch): rates}."""
    print("engine,dtype,batch,prefill_tok_s,decode_tok_s,prefill_s,decode_s")
    rows = {}
    for B in [int(x) for x in a.batches.split(",")]:
        # each llama.cpp dtype, then zigzag's peer configuration, within the batch size
        plan = []
        for d in dtypes:
            plan += [("llama.cpp", d)] + [("zigzag", z) for z in ZZ_PEER[d] if a.paths == "all" or z in ZZ_DEFAULT]
        got_best = {}
        for _ in range(a.repeat):
            for eng, d in plan:
                got = one_row(a, mdir, paths, eng, d, B)
                b = got_best.get((eng, d))
                if b is None:
                    got_best[(eng, d)] = got
                elif got:  # best of the repeats, prefill and decode each
                    for ph in ("prefill", "decode"):
                        if got[ph + "_tok_s"] > b[ph + "_tok_s"]:
                            b[ph + "_tok_s"], b[ph + "_s"] = got[ph + "_tok_s"], got[ph + "_s"]
        for eng, d in plan:
            got = got_best.get((eng, d))
            if got is None:
                continue
            rows[(eng, d, B)] = got
            print_row(eng, d, B, got)
    print_ratios(rows, lambda d: [k for k, v in ZZ_PEER.items() if d in v])
    return rows


def print_row(eng, d, B, got):
    """One engine's rates for one weight type and batch, as a CSV row."""
    print("%s,%s,%d,%.3f,%.3f,%.3f,%.3f" % (eng, d, B, got["prefill_tok_s"], got["decode_tok_s"],
                                           got["prefill_s"], got["decode_s"]), flush=True)


def print_ratios(rows, peers):
    """zigzag / llama.cpp, prefill and decode, for every zigzag row of rows[(engine,
    dtype, batch)]; peers(dtype) names the llama.cpp types it is set beside."""
    print("ratio,zigzag_dtype/llama.cpp_dtype,batch,prefill,decode")
    for (eng, d, B), z in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][1])):
        if eng != "zigzag":
            continue
        for p in peers(d):
            l = rows.get(("llama.cpp", p, B))
            if l:
                print("ratio,%s/%s,%d,%.3f,%.3f" % (d, p, B, z["prefill_tok_s"] / l["prefill_tok_s"],
                                                   z["decode_tok_s"] / l["decode_tok_s"]), flush=True)


def one_row(a, mdir, paths, eng, d, B):
    """One engine, one weight type, one batch size: its rates, or None (said why)."""
    if eng == "zigzag":
        got, info = zigzag_one(a, mdir, B, d)
        if got is None:
            print("# zigzag %s batch %d refused: %s" % (d, B, info))
        return got
    kv = "f32" if d == "f32" else "f16"
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--prompt-len", str(a.prompt_len), "--gen-len",
                        str(a.gen_len), "--threads", str(a.threads), "--vocab", str(a.vocab)] +
                       (["--plain-quant"] if a.plain_quant and d.startswith("q") else []) +
                       ["--one", paths[d], kv, str(B)], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="passive") if a.lcpp_passive else None)
    if r.returncode != 0:
        print("# llama.cpp %s batch %d failed: %s" % (d, B, r.stderr.strip()[-400:]))
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def openblas_core():
    """The core OpenBLAS picks in this environment (zigzag links the same library),
    or "?" where none loads."""
    import ctypes
    try:
        f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
    except (OSError, AttributeError):
        return "?"
    f.restype = ctypes.c_char_p
    return f().decode()


def load_avg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def peak_table(a):
    """bench/peak_probe's table (the machine's ceilings: f32 FMA, bf16 dot, int8 dot,
    AMX, streaming read, on 1 and --threads threads), measured here before the runs;
    its lines, or a line saying why none."""
    probe = a.peak_probe or os.path.join(os.path.dirname(os.path.abspath(a.zigzag)), "bench", "peak_probe")
    try:
        r = subprocess.run([probe, str(a.threads), "0.2"], capture_output=True, text=True)
    except OSError as e:
        return ["(no ceilings: %s: %s; build the peak_probe target)" % (probe, e)]
    if r.returncode != 0:
        return ["(no ceilings: %s exited %d)" % (probe, r.returncode)]
    lines = r.stdout.strip().splitlines()
    for l in lines:
        print("# " + l)
    return lines


PAIR_NAME = {"f32": "f32 / f32", "bf16": "bf16 / f16", "4bit": "4-bit exact / Q4_0",
             "4bit-int8": "4-bit int8 activations / Q4_0", "8bit": "8-bit exact / Q8_0",
             "8bit-int8": "8-bit int8 activations / Q8_0"}


def markdown(a, cpu, lcpp_version, s, peaks, runs):
    """A table for docs/results.md: the CPU and its ceilings, then zigzag / llama.cpp
    per row and batch, prefill and decode, each cell the runs' ratios in order, bold
    where every run is at or above 1."""
    batches = [int(x) for x in a.batches.split(",")]
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short",
                              "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        rev = "?"
    out = ["CPU: %s, %d threads; llama-cpp-python %s; zigzag %s; %s-shaped, %d layers, vocabulary %d, prompt %d, "
           "%d new tokens; %d run(s), %s UTC, load average %s at the end" %
           (cpu, a.threads, lcpp_version, rev, s["name"], s["layers"], s["vocab"], a.prompt_len, a.gen_len, len(runs),
            time.strftime("%Y-%m-%d %H:%M", time.gmtime()), load_avg()), ""]
    out += ["Ceilings (`bench/peak_probe %d`):" % a.threads, ""] + peaks + [""]
    out.append("    python3 bench/llamacpp_compare.py --zigzag %s --paths %s --layers %d --prompt-len %d --gen-len %d "
               "--batches %s --threads %d --runs %d --repeat %d%s" %
               (a.zigzag, a.paths, a.layers, a.prompt_len, a.gen_len, a.batches, a.threads, len(runs), a.repeat,
                " --lcpp-passive" if a.lcpp_passive else ""))
    out.append("")
    head = ["zigzag / llama.cpp"] + ["prefill B=%d" % b for b in batches] + ["decode B=%d" % b for b in batches]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    zrows = []
    for d in [d for d in a.dtypes.split(",") if d]:
        zrows += [(z, d) for z in ZZ_PEER[d] if a.paths == "all" or z in ZZ_DEFAULT]
    for z, d in zrows:
        name = PAIR_NAME[z] + (" (default)" if z in ZZ_DEFAULT else "")
        cells = []
        for phase in ("prefill_tok_s", "decode_tok_s"):
            for b in batches:
                rs = []
                for rows in runs:
                    zz, lc = rows.get(("zigzag", z, b)), rows.get(("llama.cpp", d, b))
                    rs.append(zz[phase] / lc[phase] if zz and lc else None)
                txt = ", ".join("—" if r is None else "%.2f" % r for r in rs)
                ok = all(r is not None and r >= 1.0 for r in rs)
                cells.append("**%s**" % txt if ok else txt)
        out.append("| %s | %s |" % (name, " | ".join(cells)))
    out.append("")
    out.append("tok/s, zigzag / llama.cpp, prefill; decode (run by run):")
    out.append("")
    for z, d in zrows:
        for i, rows in enumerate(runs):
            parts = []
            for b in batches:
                zz, lc = rows.get(("zigzag", z, b)), rows.get(("llama.cpp", d, b))
                if zz and lc:
                    parts.append("B=%d %.1f / %.1f; %.2f / %.2f" % (b, zz["prefill_tok_s"], lc["prefill_tok_s"],
                                                                  zz["decode_tok_s"], lc["decode_tok_s"]))
            out.append("- %s, run %d: %s" % (PAIR_NAME[z], i + 1, " · ".join(parts)))
    return "\n".join(out) + "\n"


def have_llama_cpp():
    """True when llama-cpp-python and gguf import; else says how to get them."""
    try:
        import llama_cpp  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as e:
        print("skip: llama-cpp-python and gguf are needed (%s); install them with pip into a venv and run "
              "this script with its python" % e)
        return False
    return True


def main():
    a = parse()
    if not have_llama_cpp():
        return 0
    if a.one:
        lcpp_one(a, a.one[0], a.one[1], int(a.one[2]))
        return 0
    s = shapes(a)
    os.makedirs(a.workdir, exist_ok=True)
    mdir = os.path.join(a.workdir, "zz-model")
    write_config(mdir, s)
    dtypes = [d for d in a.dtypes.split(",") if d]
    # the file names say the shape and depth: one --workdir serves several
    stem = os.path.join(a.workdir, "model-%s-%dL-" % (a.shape, a.layers))
    paths = {"f32": stem + "f32.gguf"}
    if not os.path.exists(paths["f32"]):
        print("writing %s ..." % paths["f32"], file=sys.stderr)
        write_gguf(paths["f32"] + ".part", s)
        os.rename(paths["f32"] + ".part", paths["f32"])
    for d in dtypes:
        if d != "f32":
            paths[d] = stem + "%s.gguf" % d
            if not os.path.exists(paths[d]):
                print("quantizing to %s ..." % d, file=sys.stderr)
                quantize(paths["f32"], paths[d] + ".part", d, a.threads)
                os.rename(paths[d] + ".part", paths[d])
    import llama_cpp
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print("# cpu: %s (%d online); llama-cpp-python %s; shapes %s; prompt %d, gen %d, threads %d" %
          (model, os.cpu_count() or 0, getattr(llama_cpp, "__version__", "?"), json.dumps(s), a.prompt_len,
           a.gen_len, a.threads))
    # zigzag's f32 linears from 128 rows are OpenBLAS sgemm tiles: which kernels it
    # picked (an OPENBLAS_CORETYPE in the environment overrides the CPU's own)
    blas = "OPENBLAS_CORETYPE=%s, core %s" % (os.environ.get("OPENBLAS_CORETYPE", "(unset)"), openblas_core())
    print("# zigzag's OpenBLAS: %s" % blas)
    peaks = peak_table(a) + ["", "zigzag's OpenBLAS (its f32 linears from 128 rows): %s" % blas]
    runs = []
    for r in range(a.runs):
        print("# run %d of %d, load average %s" % (r + 1, a.runs, load_avg()), flush=True)
        runs.append(measure(a, mdir, paths, dtypes))
    if a.markdown:
        md = markdown(a, model, getattr(llama_cpp, "__version__", "?"), s, peaks, runs)
        with open(a.markdown, "w") as f:
            f.write(md)
        print("# markdown table written to %s" % a.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
