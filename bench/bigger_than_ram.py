#!/usr/bin/env python3
"""bigger_than_ram.py — zigzag beside llama.cpp on a model larger than the memory
it is given (issue #27 item 7), in one run, on the same disk, batch 64.

The model: LLaMA-7B's layer (bench/llamacpp_compare.py's shapes, GGUF writer and
llama.cpp runner, imported, not copied), --layers of the 32, random weights, in
4 bits: llama.cpp's Q4_0 beside zigzag's groups of 64 (--compress-weight).
The defaults (12 layers: a 1.5 GB Q4_0 file, under a 1 GiB limit, prompt 8, 4
new tokens) finish in a few minutes on a 2-core machine; LLaMA-13B in 4 bits
under 4 GiB is --layers/--limit away, with the same shapes per layer as 7B only.

Each engine runs in a fresh memory cgroup with the same limit (cgroup v1
memory.limit_in_bytes, or v2 memory.max; swap limited to it too where the file
exists), created under this process's own memory cgroup, after the page cache
is dropped (echo 3 > /proc/sys/vm/drop_caches); root is needed for both, and the
script refuses without them.

  llama.cpp  the GGUF mmapped as it is (load_mode MMAP, no repacking into
             anonymous buffers: with repacking the weights would be copied into
             the process's own memory and the cgroup would kill it); its page
             cache is charged to the cgroup, so every step faults the layers in
             again once the file is larger than the limit.
  zigzag     `zigzag bench --dummy`: the weights are made at load, quantized and
             written to the disk tier's file under --workdir (O_DIRECT), then
             streamed from it per layer by the weight lane; the policy comes from
             `zigzag plan` run inside the same cgroup (its profile sees the
             limit), or --policy for a hand policy. No --cpu-mem: inside a
             cgroup zigzag's default is the group's limit less room for the
             program (runtime/limits.c), for plan and bench alike.

Reported per engine: FlexGen's prefill, decode and total tokens/s (total =
B * gen / (prefill + decode), warm-up and load excluded, as `zigzag bench`
defines them), the cgroup's peak memory and failcnt / OOM kills, the bytes the
process read from the block layer (getrusage ru_inblock: load and warm-up
included) and zigzag's own disk read of the timed part. Then the ratio of total
tokens/s, zigzag / llama.cpp (the issue's bar: >= 3).

  sudo /work/venv-lcpp/bin/python bench/bigger_than_ram.py --zigzag build/zigzag

Not a test (minutes); tests/cli/bigger_than_ram_args.sh checks its refusals.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llamacpp_compare as lcc  # noqa: E402  (the GGUF writer and llama.cpp runner)

SIZE_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGT]?)i?B?$", re.I)


def size_arg(s):
    m = SIZE_RE.match(s.strip())
    if not m:
        raise argparse.ArgumentTypeError("'%s' is not a size (e.g. 1G, 768M, 1073741824)" % s)
    v = float(m.group(1)) * (1 << (10 * " KMGT".index(m.group(2).upper() or " ")))
    if v < (64 << 20):
        raise argparse.ArgumentTypeError("'%s' is below 64 MiB: no engine fits there" % s)
    return int(v)


def pos_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not an integer" % s)
    if v < 1:
        raise argparse.ArgumentTypeError("'%s' must be at least 1" % s)
    return v


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default="build/zigzag")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "zz-bigger-than-ram"),
                   help="GGUF and zigzag's disk tier (one disk for both); must not be tmpfs")
    p.add_argument("--layers", type=pos_int, default=12)
    p.add_argument("--vocab", type=pos_int, default=32000)
    p.add_argument("--limit", type=size_arg, default=size_arg("1G"), help="the cgroup's memory limit")
    p.add_argument("--prompt-len", type=pos_int, default=8)
    p.add_argument("--gen-len", type=pos_int, default=4)
    p.add_argument("--batch", type=pos_int, default=64)
    p.add_argument("--threads", type=pos_int, default=2)
    p.add_argument("--cpu-act", choices=["f32", "int8"], default="f32",
                   help="zigzag bench's --cpu-act (int8: x in int8, as llama.cpp's Q8_0 activations beside Q4_0)")
    p.add_argument("--policy", help="zigzag's policy line (a hand policy); default: `zigzag plan` in the cgroup")
    p.add_argument("--profile-seconds", type=float, default=6, help="zigzag plan's measurement of this machine")
    p.add_argument("--in-ram-reference", action="store_true",
                   help="after the two rows, llama.cpp once more with no limit and the file in the page cache "
                        "(what its disk reads cost it; not part of the ratio)")
    p.add_argument("--lcpp-child", metavar="GGUF", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.gen_len < 2:
        p.error("--gen-len must be at least 2 (decode needs a step)")
    return a


# ---------------------------------------------------------------- cgroup

class Cgroup:
    """A memory cgroup of its own under this process's (v1 or v2), with a limit."""

    def __init__(self, limit, name):
        root = os.environ.get("ZZ_CGROUP_ROOT", "/sys/fs/cgroup")
        self.v1 = os.path.isfile(os.path.join(root, "memory", "memory.limit_in_bytes"))
        mine = ""
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrl, path = line.rstrip("\n").split(":", 2)
                if (self.v1 and "memory" in ctrl.split(",")) or (not self.v1 and ctrl == ""):
                    mine = path
        if self.v1:
            base = os.path.join(root, "memory")
        else:
            base = next((d for d in (os.path.join(root, "unified"), root)
                         if os.path.isfile(os.path.join(d, "cgroup.controllers"))), None)
            if base is None:
                raise SystemExit("bigger_than_ram: no memory cgroup: neither %s/memory (v1) nor a cgroup2 "
                                 "mount under %s" % (root, root))
        parent = os.path.join(base, mine.lstrip("/"))
        if not os.access(parent, os.W_OK):
            parent = base
        self.dir = os.path.join(parent, "zz-bigram-%d-%s" % (os.getpid(), name))
        try:
            os.mkdir(self.dir)
        except OSError as e:
            raise SystemExit("bigger_than_ram: cannot make the cgroup %s: %s" % (self.dir, e))
        limit_file = "memory.limit_in_bytes" if self.v1 else "memory.max"
        if not os.path.exists(os.path.join(self.dir, limit_file)):
            self.remove()
            raise SystemExit("bigger_than_ram: %s has no %s (the memory controller is not enabled there)" %
                             (self.dir, limit_file))
        self.write(limit_file, limit)
        swap = "memory.memsw.limit_in_bytes" if self.v1 else "memory.swap.max"
        if os.path.exists(os.path.join(self.dir, swap)):
            self.write(swap, limit if self.v1 else 0)

    def write(self, f, v):
        with open(os.path.join(self.dir, f), "w") as fh:
            fh.write(str(v))

    def read(self, f):
        try:
            with open(os.path.join(self.dir, f)) as fh:
                return fh.read()
        except OSError:
            return ""

    def join(self):  # in the child, before exec
        self.write("cgroup.procs", os.getpid())

    def stats(self):
        """peak bytes, times the limit was hit, OOM kills."""
        if self.v1:
            oom = re.search(r"oom_kill (\d+)", self.read("memory.oom_control"))
            return (int(self.read("memory.max_usage_in_bytes") or 0), int(self.read("memory.failcnt") or 0),
                    int(oom.group(1)) if oom else 0)
        ev = self.read("memory.events")
        get = lambda k: int((re.search(r"^%s (\d+)" % k, ev, re.M) or [0, 0])[1])  # noqa: E731
        return int(self.read("memory.peak") or 0), get("max"), get("oom_kill")

    def remove(self):
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def disk_sectors_read(path):
    """Sectors read by the block device holding path (all jobs on it: context only)."""
    st = os.stat(path)
    try:
        with open("/sys/dev/block/%d:%d/stat" % (os.major(st.st_dev), os.minor(st.st_dev))) as f:
            return int(f.read().split()[2])
    except (OSError, IndexError, ValueError):
        return -1


def run_in(cg, cmd, env=None):
    """Runs cmd inside cg; returns (rc or -signal, stdout, stderr, rusage, wall, device bytes read)."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    s0, t0 = disk_sectors_read(ARGS.workdir), time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, preexec_fn=cg.join)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall, s1 = time.perf_counter() - t0, disk_sectors_read(ARGS.workdir)
    out.seek(0)
    err.seek(0)
    return p.returncode, out.read(), err.read(), ru, wall, (s1 - s0) * 512 if s0 >= 0 and s1 >= 0 else -1


# ---------------------------------------------------------------- engines

def run_engine(a, name, cmd, env, how):
    """One engine's run in a fresh group of --limit, from a dropped page cache:
    (its last JSON line or None, peak bytes, failcnt, OOM kills, bytes read, device reads, wall s, how)."""
    cg = Cgroup(a.limit, name)
    try:
        drop_caches()
        rc, out, err, ru, wall, dev = run_in(cg, cmd, env)
        peak, fail, oom = cg.stats()
    finally:
        cg.remove()
    got = None
    if rc == 0:
        got = json.loads(out.strip().splitlines()[-1])
    else:
        print("# %s failed (%s): %s" % (name, "killed by signal %d" % -rc if rc < 0 else "exit %d" % rc,
                                        err.strip()[-600:]))
    return (got, peak, fail, oom, ru.ru_inblock * 512, dev, wall, how)


def lcpp_child(a):
    """In the cgroup: one llama.cpp run from the mmapped GGUF."""
    import llama_cpp as lc
    mp = {"use_extra_bufts": False}  # repacked Q4_0 would live in anonymous memory
    if hasattr(lc, "LLAMA_LOAD_MODE_MMAP"):
        mp["load_mode"] = lc.LLAMA_LOAD_MODE_MMAP
    else:
        mp["use_mmap"] = True
    # one KV cache for all sequences: per-sequence caches are padded to 256 cells
    # each (3 GiB for 64 sequences of 12 tokens over 12 layers)
    cp = {"kv_unified": True} if "kv_unified" in [f[0] for f in lc.llama_context_params._fields_] else {}
    lcc.lcpp_one(a, a.lcpp_child, "f16", a.batch, model_params=mp, context_params=cp)


def fmt_bytes(n):
    return "%.2f GiB" % (n / (1 << 30)) if n >= (1 << 30) else "%.0f MiB" % (n / (1 << 20))


def main():
    global ARGS
    a = ARGS = parse()
    if a.lcpp_child:
        lcpp_child(a)
        return 0
    if os.geteuid() != 0:
        print("bigger_than_ram: must run as root (a memory cgroup and drop_caches need it)", file=sys.stderr)
        return 2
    if not (os.path.isfile(a.zigzag) and os.access(a.zigzag, os.X_OK)):
        print("bigger_than_ram: zigzag binary '%s' not found or not executable (build it first)" % a.zigzag,
              file=sys.stderr)
        return 2
    Cgroup(a.limit, "probe").remove()  # refuses now, before minutes of writing, where there is none
    try:
        import llama_cpp  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as e:
        print("skip: llama-cpp-python and gguf are needed (%s); run this with a python that has them" % e)
        return 0
    os.makedirs(a.workdir, exist_ok=True)
    s = lcc.shapes(a)
    mdir = os.path.join(a.workdir, "zz-model")
    lcc.write_config(mdir, s)
    q4 = os.path.join(a.workdir, "model-%dL-q4_0.gguf" % a.layers)
    if not os.path.exists(q4):
        f32 = os.path.join(a.workdir, "model-%dL-f32.gguf.part" % a.layers)
        print("writing %s, then quantizing to Q4_0 ..." % f32, file=sys.stderr)
        lcc.write_gguf(f32, s)
        lcc.quantize(f32, q4 + ".part", "q4_0", a.threads)
        os.remove(f32)
        os.rename(q4 + ".part", q4)
    gsize = os.path.getsize(q4)
    if gsize <= a.limit:
        print("bigger_than_ram: the Q4_0 model (%s) is not bigger than --limit %s: more --layers or a lower --limit" %
              (fmt_bytes(gsize), fmt_bytes(a.limit)), file=sys.stderr)
        return 2
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads))
    zz_common = ["--model", mdir, "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len), "--threads",
                 str(a.threads), "--offload-dir", a.workdir, "--json"]
    rows = {}

    # llama.cpp first, zigzag after: each from a dropped page cache in its own group
    rows["llama.cpp"] = run_engine(a, "llama.cpp", [sys.executable, os.path.abspath(__file__), "--lcpp-child", q4,
                                                    "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len),
                                                    "--threads", str(a.threads), "--vocab", str(a.vocab), "--batch",
                                                    str(a.batch), "--limit", str(a.limit)], None,
                                   "Q4_0, mmap, no repack")

    policy, how = a.policy, "hand (--policy)"
    if not policy:  # planned in a group of its own with the same limit: its profile sees the limit
        cg = Cgroup(a.limit, "plan")
        try:
            rc, out, err, _, _, _ = run_in(cg, [a.zigzag, "plan"] + zz_common + [
                "--max-block", str(a.batch), "--profile-seconds", str(a.profile_seconds)], env)
        finally:
            cg.remove()
        if rc != 0:
            print("bigger_than_ram: zigzag plan failed inside the cgroup: %s" % err.strip()[-600:], file=sys.stderr)
            return 1
        plan = json.loads(out.strip().splitlines()[-1])
        policy, how = plan["policy"], "zigzag plan in the cgroup, predicted total %.3f tok/s" % plan["total_tps"]
        blk = re.search(r"gbs=(\d+) num_gb=(\d+)", policy)
        if not blk or int(blk.group(1)) * int(blk.group(2)) != a.batch:
            print("bigger_than_ram: zigzag plan chose %s, not a block of %d; give --policy" % (policy, a.batch),
                  file=sys.stderr)
            return 1
    rows["zigzag"] = run_engine(a, "zigzag", [a.zigzag, "bench", "--dummy", "--device", "cpu", "--attn-threads",
                                              str(a.threads), "--policy", policy, "--cpu-act", a.cpu_act] +
                                zz_common, env, "%s; --cpu-act %s; policy from %s" % (policy, a.cpu_act, how))

    print("# cpu: %s (%d online); llama-cpp-python %s; LLaMA-7B layer x %d, vocab %d; Q4_0 file %s; "
          "memory limit %s; batch %d, prompt %d, gen %d, threads %d; workdir %s" %
          (cpu, os.cpu_count() or 0, getattr(llama_cpp, "__version__", "?"), a.layers, a.vocab, fmt_bytes(gsize),
           fmt_bytes(a.limit), a.batch, a.prompt_len, a.gen_len, a.threads, a.workdir))
    print("engine,prefill_tok_s,decode_tok_s,total_tok_s,prefill_s,decode_s,cgroup_peak_bytes,failcnt,oom_kill,"
          "process_read_bytes,device_read_bytes,wall_s,config")
    total = {}
    for eng, (got, peak, fail, oom, rd, dev, wall, cfg) in rows.items():
        if got is None:
            print("%s,failed,,,,,%d,%d,%d,%d,%d,%.1f,%s" % (eng, peak, fail, oom, rd, dev, wall, cfg))
            continue
        total[eng] = a.batch * a.gen_len / (got["prefill_s"] + got["decode_s"])
        print("%s,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%d,%d,%d,%.1f,%s" %
              (eng, got["prefill_tok_s"], got["decode_tok_s"], total[eng], got["prefill_s"], got["decode_s"], peak,
               fail, oom, rd, dev, wall, cfg))
    z = rows["zigzag"][0]
    if z:
        print("# zigzag timed part: disk read %s at %.0f MiB/s; busy compute %.2f, weight_load %.2f, cache_load %.2f, "
              "cache_store %.2f; peak plan bytes %s; load %.1f s" %
              (fmt_bytes(z["disk_read_bytes"]), z["disk_read_bw"] / (1 << 20), z["busy"]["compute"],
               z["busy"]["weight_load"], z["busy"]["cache_load"], z["busy"]["cache_store"],
               json.dumps(z["peak_bytes"]), z["load_s"]))
    if len(total) == 2:
        print("ratio,total_tok_s,zigzag/llama.cpp,%.3f" % (total["zigzag"] / total["llama.cpp"]), flush=True)
    if a.in_ram_reference:
        with open(q4, "rb") as f:  # into the page cache, outside any group
            while f.read(1 << 24):
                pass
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--lcpp-child", q4, "--prompt-len",
                            str(a.prompt_len), "--gen-len", str(a.gen_len), "--threads", str(a.threads), "--vocab",
                            str(a.vocab), "--batch", str(a.batch)], capture_output=True, text=True)
        if r.returncode == 0:
            g = json.loads(r.stdout.strip().splitlines()[-1])
            print("llama.cpp-in-RAM (no limit, reference),%.3f,%.3f,%.3f,%.3f,%.3f" %
                  (g["prefill_tok_s"], g["decode_tok_s"], a.batch * a.gen_len / (g["prefill_s"] + g["decode_s"]),
                   g["prefill_s"], g["decode_s"]))
        else:
            print("# llama.cpp in RAM failed: %s" % r.stderr.strip()[-400:])
    return 0 if len(total) == 2 else 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
