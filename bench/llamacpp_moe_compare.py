#!/usr/bin/env python3
"""llamacpp_moe_compare.py — zigzag beside llama.cpp on a mixture of experts, in one run.

A Mixtral-8x7B- or Qwen3-30B-A3B-shaped model (--shape; SHAPES below, the
published configs) truncated to --layers, random weights, the same shapes for
both engines (issue #45):

  zigzag     a directory with only config.json (model_type mixtral or
             qwen3_moe), run with `zigzag bench --dummy` on the CPU device:
             "4bit-int8" (--compress-weight) and "8bit-int8" (cw=8/64), int8
             activations, zigzag's defaults for those formats (--cpu-act auto);
             the exact-activation rows too with --exact;
  llama.cpp  a GGUF written here in Q4_0 or Q8_0 directly (the blocks' bytes
             random, their scales small and fixed: llama.cpp's speed does not
             depend on the values, and a file is written at the disk's rate, so
             no f16 file and no quantize step), with llama.cpp's MoE tensors:
             blk.N.ffn_gate_inp (f32, as llama.cpp's quantizer keeps it),
             ffn_gate_exps, ffn_up_exps, ffn_down_exps ([experts, rows, cols]),
             and for qwen3moe attn_q_norm / attn_k_norm; run as
             bench/llamacpp_compare.py runs it (its lcpp_one, imported), with
             its repacked CPU GEMMs but not its AMX buffer (repack_not_amx) and
             OMP_WAIT_POLICY=passive (LCPP_ENV).

Rows and ratios as bench/llamacpp_compare.py prints them (4bit-int8 / q4_0,
8bit-int8 / q8_0). bench/bigger_than_ram.py takes SHAPES, write_config and
write_gguf from here for --shape qwen3-30b-a3b.

  /work/venv-hf/bin/python bench/llamacpp_moe_compare.py --zigzag build/zigzag --shape qwen3-30b-a3b

Not a test. Exit 0 with a "skip:" line when llama-cpp-python or gguf is missing.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llamacpp_compare as lcc  # noqa: E402  (lcpp_one, zigzag_one, quantize's names)

# the published configs; "layers" is the full depth (--layers takes a part)
SHAPES = {
    "mixtral-8x7b": dict(name="Mixtral-8x7B", arch="llama", model_type="mixtral", hidden=4096, heads=32, kv_heads=8,
                         head_dim=128, inter=14336, expert_ffn=14336, experts=8, used=2, layers=32, vocab=32000,
                         eps=1e-5, theta=1e6, norm_topk=True),
    "qwen3-30b-a3b": dict(name="Qwen3-30B-A3B", arch="qwen3moe", model_type="qwen3_moe", hidden=2048, heads=32,
                          kv_heads=4, head_dim=128, inter=6144, expert_ffn=768, experts=128, used=8, layers=48,
                          vocab=151936, eps=1e-6, theta=1e6, norm_topk=True),
}

# GGML block formats written directly: (type id, values a block, bytes a block, the f16 scale)
QTYPES = {"q4_0": (2, 32, 18, 0.002), "q8_0": (8, 32, 34, 0.0003)}
# zigzag's configuration beside each llama.cpp type (--exact adds the exact-activation one)
ZZ_PEER = {"q4_0": ["4bit-int8"], "q8_0": ["8bit-int8"]}
ZZ_EXACT = {"4bit-int8": "4bit", "8bit-int8": "8bit"}


# llama.cpp's OpenMP threads sleep when they wait (OMP_WAIT_POLICY=passive unless
# set): on a shared 2-core machine its spinning threads ran it 3-4x slower
LCPP_ENV = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default="build/zigzag")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "zz-lcpp-moe"))
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-30b-a3b")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, help="default: the shape's own")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=16)
    p.add_argument("--batches", default="1,16,64")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtypes", default="q4_0,q8_0", help="llama.cpp weight types (q4_0, q8_0)")
    p.add_argument("--exact", action="store_true", help="zigzag's exact-activation rows too (--cpu-act exact)")
    p.add_argument("--one", nargs=3, metavar=("GGUF", "KVTYPE", "BATCH"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for d in a.dtypes.split(","):
        if d not in QTYPES:
            p.error("--dtypes: '%s' is not one of %s" % (d, ", ".join(sorted(QTYPES))))
    return a


def shapes(a):
    """The model's shapes: --shape's layer, --layers deep, --vocab (or the shape's)."""
    s = dict(SHAPES[a.shape])
    s["layers"] = a.layers
    s["vocab"] = getattr(a, "vocab", None) or s["vocab"]
    s["ctx"] = 4096
    return s


def write_config(d, s):
    os.makedirs(d, exist_ok=True)
    cfg = {"model_type": s["model_type"], "hidden_size": s["hidden"], "intermediate_size": s["inter"],
           "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"],
           "num_hidden_layers": s["layers"], "vocab_size": s["vocab"], "max_position_embeddings": s["ctx"],
           "rms_norm_eps": s["eps"], "rope_theta": s["theta"], "hidden_act": "silu", "tie_word_embeddings": False,
           "num_experts_per_tok": s["used"], "bos_token_id": 1, "eos_token_id": 2}
    if s["model_type"] == "mixtral":
        cfg.update(architectures=["MixtralForCausalLM"], num_local_experts=s["experts"])
    else:
        cfg.update(architectures=["Qwen3MoeForCausalLM"], num_experts=s["experts"],
                   moe_intermediate_size=s["expert_ffn"], norm_topk_prob=s["norm_topk"], decoder_sparse_step=1,
                   mlp_only_layers=[])
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def tensor_plan(s):
    """(name, shape as numpy writes it, quantized?) in file order."""
    h, v, hd, E, f = s["hidden"], s["vocab"], s["head_dim"], s["experts"], s["expert_ffn"]
    qd, kvd = s["heads"] * hd, s["kv_heads"] * hd
    plan = [("token_embd.weight", (v, h), True)]
    for i in range(s["layers"]):
        b = "blk.%d." % i
        plan += [(b + "attn_norm.weight", (h,), False), (b + "attn_q.weight", (qd, h), True),
                 (b + "attn_k.weight", (kvd, h), True), (b + "attn_v.weight", (kvd, h), True),
                 (b + "attn_output.weight", (h, qd), True)]
        if s["arch"] == "qwen3moe":
            plan += [(b + "attn_q_norm.weight", (hd,), False), (b + "attn_k_norm.weight", (hd,), False)]
        plan += [(b + "ffn_norm.weight", (h,), False), (b + "ffn_gate_inp.weight", (E, h), False),
                 (b + "ffn_gate_exps.weight", (E, f, h), True), (b + "ffn_up_exps.weight", (E, f, h), True),
                 (b + "ffn_down_exps.weight", (E, h, f), True)]
    plan += [("output_norm.weight", (h,), False), ("output.weight", (v, h), True)]
    return plan


def write_gguf(path, s, qtype):
    """A random MoE GGUF with llama.cpp's tensor names, the matrices in qtype's
    blocks written directly (see the header), norms and the router f32. Streamed a
    tensor at a time from one pool of blocks, at offsets that move."""
    import gguf
    import numpy as np
    tid, per, bb, scale = QTYPES[qtype]
    rng = np.random.default_rng(0)
    pool_blocks = 1 << 20
    pool = rng.integers(0, 256, size=(pool_blocks, bb), dtype=np.uint8)
    pool[:, 0:2] = np.frombuffer(np.float16(scale).tobytes(), dtype=np.uint8)
    pool = pool.reshape(-1)
    arch, h = s["arch"], s["hidden"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name("%s-shaped-%dL-random" % (s["name"].lower(), s["layers"]))
    w.add_context_length(s["ctx"])
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["inter"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_dimension_count(s["head_dim"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_rope_freq_base(s["theta"])
    w.add_expert_count(s["experts"])
    w.add_expert_used_count(s["used"])
    if arch == "qwen3moe":
        w.add_expert_feed_forward_length(s["expert_ffn"])
    w.add_file_type({"q4_0": 2, "q8_0": 7}[qtype])
    lcc.write_vocab(w, s["vocab"])
    plan = tensor_plan(s)
    for name, shp, q in plan:
        if q:
            byte_shape = shp[:-1] + (shp[-1] // per * bb,)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                              raw_dtype=gguf.GGMLQuantizationType(tid))
        else:
            w.add_tensor_info(name, shp, np.dtype(np.float32), int(np.prod(shp)) * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    at = 0
    for name, shp, q in plan:
        if not q:
            n = int(np.prod(shp))
            w.write_tensor_data((rng.standard_normal(n, dtype=np.float32) * (0.02 if "gate_inp" in name else 0.0)
                                 + (0.0 if "gate_inp" in name else 1.0)).reshape(shp))
            continue
        n = int(np.prod(shp[:-1])) * (shp[-1] // per) * bb
        out = np.empty(n, dtype=np.uint8)
        piece = pool.size // 2 // bb * bb
        for i in range(0, n, piece):
            k = min(piece, n - i)
            at = (at + 7919 * bb) % (pool.size - piece) // bb * bb
            out[i:i + k] = pool[at:at + k]
        w.write_tensor_data(out.reshape(shp[:-1] + (shp[-1] // per * bb,)))
    w.close()


def repack_not_amx():
    """llama_model_params fields that keep llama.cpp's repacked Q4_0/Q8_0 GEMMs
    but not its AMX buffer: on this machine (Sapphire Rapids class, 2 threads,
    llama-cpp-python 0.3.36) ggml_backend_amx_mul_mat dies with SIGILL at a
    one-row product (the warm-up and batch-1 decode). The dense matrices, which
    llama.cpp would put in the AMX buffer, go to CPU_REPACK by a tensor buffer
    override (the experts go there anyway: AMX has no MUL_MAT_ID). {} where
    there is no CPU_REPACK buffer type."""
    import ctypes
    import llama_cpp as lc
    lc.llama_backend_init()
    libdir = os.path.dirname(lc.llama_cpp._lib._name)
    g = ctypes.CDLL(os.path.join(libdir, "libggml.so"))
    gb = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
    g.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    g.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    for lib in (g, gb):
        if hasattr(lib, "ggml_backend_dev_backend_reg"):
            lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
            lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
            lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
            lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            lib.ggml_backend_buft_name.restype = ctypes.c_char_p
            lib.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
            base = lib
            break
    dev = g.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
    fn = base.ggml_backend_reg_get_proc_address(base.ggml_backend_dev_backend_reg(dev), b"ggml_backend_dev_get_extra_bufts")
    if not dev or not fn:
        return {}
    bufts = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(fn)(dev)
    repack = None
    for i in range(8):
        if not bufts[i]:
            break
        if base.ggml_backend_buft_name(bufts[i]) == b"CPU_REPACK":
            repack = bufts[i]
    if repack is None:
        return {}
    class Override(ctypes.Structure):  # struct llama_model_tensor_buft_override
        _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]

    global _OVERRIDES  # alive while the model loads
    _OVERRIDES = (Override * 2)()
    _OVERRIDES[0].pattern = rb"(attn_(q|k|v|output)|ffn_(gate|up|down)_exps|output)\.weight"
    _OVERRIDES[0].buft = repack
    return {"tensor_buft_overrides": ctypes.cast(_OVERRIDES, ctypes.c_void_p)}


def model_params(s):
    """Weights of the model s: its layers (every expert), the embedding and the output."""
    h, hd, E, f = s["hidden"], s["head_dim"], s["experts"], s["expert_ffn"]
    qd, kvd = s["heads"] * hd, s["kv_heads"] * hd
    return s["layers"] * (2 * h * qd + 2 * kvd * h + E * h + 3 * E * f * h) + 2 * s["vocab"] * h


def main():
    a = parse()
    if not lcc.have_llama_cpp():
        return 0
    s = shapes(a)
    a.vocab = s["vocab"]  # lcpp_one draws token ids below it
    if a.one:
        # Q8_0: the override crashes the repack buffer (a tensor it cannot
        # repack), so no extra buffers at all: ggml's own Q8_0 x Q8_0 dot
        mp = {"use_extra_bufts": False} if a.one[0].endswith("q8_0.gguf") else repack_not_amx()
        lcc.lcpp_one(a, a.one[0], a.one[1], int(a.one[2]), model_params=mp)
        return 0
    os.makedirs(a.workdir, exist_ok=True)
    mdir = os.path.join(a.workdir, "zz-model-%s-%dL" % (a.shape, a.layers))
    write_config(mdir, s)
    dtypes = [d for d in a.dtypes.split(",") if d]
    paths = {}
    for d in dtypes:
        paths[d] = os.path.join(a.workdir, "model-%s-%dL-v%d-%s.gguf" % (a.shape, a.layers, s["vocab"], d))
        if not os.path.exists(paths[d]):
            print("writing %s ..." % paths[d], file=sys.stderr)
            write_gguf(paths[d] + ".part", s, d)
            os.rename(paths[d] + ".part", paths[d])
    import llama_cpp
    print("# cpu: %s; llama-cpp-python %s; %s layers x %d (%.2f G weights), vocab %d; prompt %d, gen %d, threads %d" %
          (lcc_cpu(), getattr(llama_cpp, "__version__", "?"), s["name"], s["layers"], model_params(s) / 1e9,
           s["vocab"], a.prompt_len, a.gen_len, a.threads))
    print("engine,dtype,batch,prefill_tok_s,decode_tok_s,prefill_s,decode_s")
    rows = {}
    for B in [int(x) for x in a.batches.split(",")]:
        plan = []
        for d in dtypes:
            zz = ZZ_PEER[d] + ([ZZ_EXACT[z] for z in ZZ_PEER[d]] if a.exact else [])
            plan += [("llama.cpp", d)] + [("zigzag", z) for z in zz]
        for eng, d in plan:
            if eng == "zigzag":
                got, info = lcc.zigzag_one(a, mdir, B, d)
                if got is None:
                    print("# zigzag %s batch %d refused: %s" % (d, B, info), flush=True)
                    continue
            else:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--shape", a.shape, "--layers",
                                    str(a.layers), "--vocab", str(s["vocab"]), "--prompt-len", str(a.prompt_len),
                                    "--gen-len", str(a.gen_len), "--threads", str(a.threads), "--one", paths[d],
                                    "f16", str(B)], capture_output=True, text=True, env=LCPP_ENV)
                if r.returncode != 0:
                    print("# llama.cpp %s batch %d failed: %s" % (d, B, r.stderr.strip()[-600:]), flush=True)
                    continue
                got = json.loads(r.stdout.strip().splitlines()[-1])
            rows[(eng, d, B)] = got
            lcc.print_row(eng, d, B, got)
    lcc.print_ratios(rows, lambda d: [k for k, v in ZZ_PEER.items() if d in v or ZZ_EXACT.get(v[0]) == d])
    return 0


def lcc_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
