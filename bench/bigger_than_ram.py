#!/usr/bin/env python3
"""bigger_than_ram.py — zigzag beside llama.cpp on a model larger than the memory
it is given (issue #27 item 7), in one run, on the same disk, batch 64.

The model: LLaMA's layer of --shape (7b or 13b: bench/llamacpp_compare.py's
SHAPES, GGUF writer and llama.cpp runner, imported, not copied), --layers of
its 32 or 40, random weights, in 4 bits: llama.cpp's Q4_0 (quantized by
llama.cpp from an f16 GGUF written here) beside zigzag's groups of 64
(--compress-weight). The defaults per shape: 7b, 12 layers (a 1.44 GiB Q4_0
file) under 1 GiB, minutes on a 2-core machine; 13b, the whole model (40 layers,
about 7 GB in Q4_0) under 4 GiB, the issue's own case, about half an hour per
run on a quiet 2-core host. The GGUF files stay in --workdir for the next run
(named by shape, layers and vocabulary); the f16 one is 2 bytes a weight while
it is quantized (13B: 26 GB), and the script refuses up front where the disk
has not room for it, the Q4_0 and zigzag's disk tier. Put --workdir on a disk,
not tmpfs.

Each engine runs in a fresh memory cgroup with the same limit (cgroup v1
memory.limit_in_bytes, or v2 memory.max; swap limited to it too where the file
exists), created under this process's own memory cgroup, after the page cache
is dropped (echo 3 > /proc/sys/vm/drop_caches); root is needed for both, and the
script refuses without them.

--read-rate MB/s (10^6 bytes) runs both engines, and zigzag's plan, on a disk
of that speed: the same read throttle on the disk that holds --workdir (a
partition's whole disk) in each group, cgroup v1 blkio.throttle.read_bps_device
(a blkio group beside the memory group) or v2 io.max rbps (the same group),
read back after it is written; refused where there is no blkio controller, or
--workdir is on no block device. Writes are not throttled (zigzag writes its
disk tier at load). The throttle counts in slices of 100 ms: a reader that
pauses, as zigzag's weight lane does between layers, may start each burst with
one slice's worth, so its measured read rate can be ~10% above the rate. The
report's header line says the rate applied (or "not throttled"). A SATA SSD
reads about 550 MB/s; this VM's disk, unthrottled, 1-2.5 GB/s with 8 MiB
readahead, which makes llama.cpp's page faults cheap.

  llama.cpp  the GGUF mmapped as it is (load_mode MMAP, no repacking into
             anonymous buffers: with repacking the weights would be copied into
             the process's own memory and the cgroup would kill it); its page
             cache is charged to the cgroup, so every step faults the layers in
             again once the file is larger than the limit.
  zigzag     `zigzag bench --dummy`: the weights are made at load, quantized and
             written to the disk tier's file under --workdir (O_DIRECT), then
             streamed from it per layer by the weight lane; the policy comes from
             `zigzag plan` run inside the same cgroup (its profile sees the
             limit and the throttled disk), or --policy for a hand policy. No
             --cpu-mem: inside a cgroup zigzag's default is the group's limit
             less room for the program (runtime/limits.c), for plan and bench.

Reported per engine: FlexGen's prefill, decode and total tokens/s (total =
B * gen / (prefill + decode), warm-up and load excluded, as `zigzag bench`
defines them), the cgroup's peak memory and failcnt / OOM kills, the bytes the
process read from the block layer (getrusage ru_inblock: load and warm-up
included) and zigzag's own disk read of the timed part with its lanes' busy
fractions (compute near 1: its reads are hidden and its kernels set its speed).
Then the ratio of total tokens/s, zigzag / llama.cpp (the issue's bar: >= 3).

  sudo /work/venv-lcpp/bin/python bench/bigger_than_ram.py --zigzag build/zigzag \
      --workdir /work/zz-bigram-run --shape 13b --gen-len 16 --cpu-act int8 [--read-rate 550]

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
import llamacpp_moe_compare as moe  # noqa: E402  (the MoE shapes and their Q4_0 GGUF writer)

ALL_SHAPES = dict(lcc.SHAPES, **moe.SHAPES)

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


def rate_arg(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError("'%s' is not a rate in MB/s (e.g. 550)" % s)
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError("'%s' must be a rate above 0 MB/s" % s)
    if v * 1e6 < 4096:
        raise argparse.ArgumentTypeError("'%s' MB/s is below one 4 KiB page a second" % s)
    return v


# the defaults per --shape: LLaMA-7B, 12 of its 32 layers (1.44 GiB in Q4_0) under
# 1 GiB, a few minutes; LLaMA-13B whole (40 layers, 6.9 GiB) under 4 GiB, the case
SHAPE_DEFAULTS = {"7b": (12, "1G"), "13b": (40, "4G"), "qwen3-30b-a3b": (48, "6G"), "mixtral-8x7b": (32, "10G")}


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zigzag", default="build/zigzag")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "zz-bigger-than-ram"),
                   help="GGUF and zigzag's disk tier (one disk for both); must not be tmpfs")
    p.add_argument("--shape", choices=sorted(ALL_SHAPES), default="7b",
                   help="whose layer shapes (bench/llamacpp_compare.py's SHAPES, the MoE ones "
                        "bench/llamacpp_moe_compare.py's: their Q4_0 GGUF written directly)")
    p.add_argument("--layers", type=pos_int, help="layers of the shape's model (default: 7b 12, 13b all 40)")
    p.add_argument("--vocab", type=pos_int, help="default: 32000, a MoE shape's own")
    p.add_argument("--limit", type=size_arg, help="the cgroup's memory limit (default: 7b 1G, 13b 4G)")
    p.add_argument("--read-rate", type=rate_arg, metavar="MB/s",
                   help="throttle both engines' (and the plan's) reads from --workdir's disk to this many MB/s "
                        "(10^6 bytes; e.g. 550 for a SATA SSD): cgroup v1 blkio.throttle.read_bps_device or v2 io.max")
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
    full = ALL_SHAPES[a.shape]
    a.vocab = a.vocab or full.get("vocab", 32000)
    a.layers = a.layers or SHAPE_DEFAULTS[a.shape][0]
    a.limit = a.limit or size_arg(SHAPE_DEFAULTS[a.shape][1])
    if a.layers > full["layers"]:
        p.error("--layers %d: %s has %d layers" % (a.layers, full["name"], full["layers"]))
    return a


# ---------------------------------------------------------------- cgroup

def own_path(ctrl_match):
    """This process's path in the hierarchy /proc/self/cgroup's line ctrl_match picks."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrl, path = line.rstrip("\n").split(":", 2)
            if ctrl_match(ctrl):
                return path
    return ""


def cgroup_layout():
    """(v1?, the memory hierarchy's mount) of ZZ_CGROUP_ROOT (default /sys/fs/cgroup)."""
    root = os.environ.get("ZZ_CGROUP_ROOT", "/sys/fs/cgroup")
    if os.path.isfile(os.path.join(root, "memory", "memory.limit_in_bytes")):
        return True, os.path.join(root, "memory")
    base = next((d for d in (os.path.join(root, "unified"), root)
                 if os.path.isfile(os.path.join(d, "cgroup.controllers"))), None)
    if base is None:
        raise SystemExit("bigger_than_ram: no memory cgroup: neither %s/memory (v1) nor a cgroup2 "
                         "mount under %s" % (root, root))
    return False, base


def blkio_base():
    """The v1 blkio hierarchy's mount, or None on v2 (io.max in the memory group)."""
    v1, _ = cgroup_layout()
    if not v1:
        return None
    d = os.path.join(os.environ.get("ZZ_CGROUP_ROOT", "/sys/fs/cgroup"), "blkio")
    if not os.path.isfile(os.path.join(d, "blkio.throttle.read_bps_device")):
        raise SystemExit("bigger_than_ram: --read-rate: no blkio controller with a read throttle: %s has no "
                         "blkio.throttle.read_bps_device (cgroup v1; a kernel without CONFIG_BLK_DEV_THROTTLING?)" % d)
    return d


def block_device(path):
    """(major, minor) of the disk that holds path's file system, or None where it is
    on none (tmpfs, proc, overlay, btrfs's anonymous devices). A partition gives its
    disk: the throttle takes whole disks only."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.stat(path)
    sysdir = "/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    if os.major(st.st_dev) == 0 or not os.path.isdir(sysdir):
        return None
    if os.path.exists(os.path.join(sysdir, "partition")):
        sysdir = os.path.dirname(os.path.realpath(sysdir))
    with open(os.path.join(sysdir, "dev")) as f:
        mj, mn = f.read().strip().split(":")
    return int(mj), int(mn)


class Cgroup:
    """A memory cgroup of its own under this process's (v1 or v2), with a limit;
    with read_bps (bytes/s) and dev (major, minor), reads from dev throttled too:
    on v1 in a blkio group of the same name, on v2 io.max in the same group."""

    def __init__(self, limit, name, read_bps=None, dev=None):
        self.v1, base = cgroup_layout()
        self.dirs = []
        mine = own_path(lambda c: "memory" in c.split(",") if self.v1 else c == "")
        leaf = "zz-bigram-%d-%s" % (os.getpid(), name)
        self.dir = self.mkdir(base, mine, leaf)
        limit_file = "memory.limit_in_bytes" if self.v1 else "memory.max"
        if not os.path.exists(os.path.join(self.dir, limit_file)):
            self.remove()
            raise SystemExit("bigger_than_ram: %s has no %s (the memory controller is not enabled there)" %
                             (self.dir, limit_file))
        self.write(self.dir, limit_file, limit)
        swap = "memory.memsw.limit_in_bytes" if self.v1 else "memory.swap.max"
        if os.path.exists(os.path.join(self.dir, swap)):
            self.write(self.dir, swap, limit if self.v1 else 0)
        if read_bps:
            self.throttle(read_bps, dev, leaf)

    def mkdir(self, base, mine, leaf):
        parent = os.path.join(base, mine.lstrip("/"))
        if not os.access(parent, os.W_OK):
            parent = base
        d = os.path.join(parent, leaf)
        try:
            os.mkdir(d)
        except OSError as e:
            self.remove()
            raise SystemExit("bigger_than_ram: cannot make the cgroup %s: %s" % (d, e))
        self.dirs.append(d)
        return d

    def throttle(self, bps, dev, leaf):
        """The read limit on dev, read back: a rate the kernel did not take is refused, not reported."""
        if self.v1:
            d = self.mkdir(blkio_base(), own_path(lambda c: "blkio" in c.split(",")), leaf)
            f, line, want = "blkio.throttle.read_bps_device", "%d:%d %d" % (dev + (bps,)), "%d:%d %d" % (dev + (bps,))
        else:
            d = self.dir
            if not os.path.exists(os.path.join(d, "io.max")):  # the io controller, enabled for the children
                try:
                    self.write(os.path.dirname(d), "cgroup.subtree_control", "+io")
                except OSError:
                    pass
            f, line, want = "io.max", "%d:%d rbps=%d" % (dev + (bps,)), "%d:%d rbps=%d " % (dev + (bps,))
            if not os.path.exists(os.path.join(d, f)):
                self.remove()
                raise SystemExit("bigger_than_ram: --read-rate: %s has no io.max (the io controller cannot be "
                                 "enabled there)" % d)
        try:
            self.write(d, f, line)
        except OSError as e:
            self.remove()
            raise SystemExit("bigger_than_ram: --read-rate: writing '%s' to %s/%s: %s" % (line, d, f, e))
        if want not in self.read(d, f):
            got = self.read(d, f).strip()
            self.remove()
            raise SystemExit("bigger_than_ram: --read-rate: %s/%s reads back '%s', not '%s'" % (d, f, got, line))

    @staticmethod
    def write(d, f, v):
        with open(os.path.join(d, f), "w") as fh:
            fh.write(str(v))

    @staticmethod
    def read(d, f):
        try:
            with open(os.path.join(d, f)) as fh:
                return fh.read()
        except OSError:
            return ""

    def join(self):  # in the child, before exec: every hierarchy's group
        for d in self.dirs:
            self.write(d, "cgroup.procs", os.getpid())

    def stats(self):
        """peak bytes, times the limit was hit, OOM kills."""
        r = lambda f: self.read(self.dir, f)  # noqa: E731
        if self.v1:
            oom = re.search(r"oom_kill (\d+)", r("memory.oom_control"))
            return (int(r("memory.max_usage_in_bytes") or 0), int(r("memory.failcnt") or 0),
                    int(oom.group(1)) if oom else 0)
        ev = r("memory.events")
        get = lambda k: int((re.search(r"^%s (\d+)" % k, ev, re.M) or [0, 0])[1])  # noqa: E731
        return int(r("memory.peak") or 0), get("max"), get("oom_kill")

    def remove(self):
        for d in reversed(self.dirs):
            try:
                os.rmdir(d)
            except OSError:
                pass
        self.dirs = []


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def disk_sectors_read(path):
    """Sectors read by the disk holding path (all jobs on it: context only)."""
    dev = block_device(path)
    try:
        with open("/sys/dev/block/%d:%d/stat" % dev) as f:
            return int(f.read().split()[2])
    except (TypeError, OSError, IndexError, ValueError):
        return -1


def new_group(a, name):
    """A group of --limit, its reads throttled to --read-rate where one is given."""
    return Cgroup(a.limit, name, a.read_bps, a.dev)


def model_params(s):
    """Weights of the model s (lcc.shapes or moe.shapes): its layers, the embedding and the output."""
    if "experts" in s:
        return moe.model_params(s)
    h, f = s["hidden"], s["inter"]
    kvd = s["kv_heads"] * (h // s["heads"])
    return s["layers"] * (2 * h * h + 2 * kvd * h + 3 * h * f) + 2 * s["vocab"] * h


def check_space(a, s, q4):
    """Refuses before minutes of writing where --workdir's disk cannot hold the
    files: the f16 GGUF beside its Q4_0 while it is quantized (18 bytes a block of
    32, the output in Q6_K), then the Q4_0 beside zigzag's disk tier (4-bit groups
    of 64 with their scales, and its cache); 10% and 1 GiB to spare."""
    n = model_params(s)
    q4_b = n * 0.6
    f16_b = 0 if "experts" in s else 2 * n  # a MoE shape's Q4_0 is written directly
    need = (0.6 * n if os.path.exists(q4) else max(f16_b + q4_b, q4_b + 0.6 * n)) * 1.1 + (1 << 30)
    d = a.workdir
    while not os.path.isdir(d):  # the disk it will be made on
        d = os.path.dirname(d)
    st = os.statvfs(d)
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise SystemExit("bigger_than_ram: --workdir %s has %s free; %s x %d layers needs about %s there (f16 GGUF "
                         "%s while it is quantized, Q4_0 %s, zigzag's disk tier %s): free some or give a --workdir "
                         "on a bigger disk" % (a.workdir, fmt_bytes(free), s["name"], s["layers"], fmt_bytes(need),
                                               fmt_bytes(2 * n), fmt_bytes(q4_b), fmt_bytes(0.6 * n)))


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
    cg = new_group(a, name)
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
    a.read_bps, a.dev = None, None
    if a.read_rate:  # where and how to throttle, refused now where there is no way
        blkio_base()
        a.dev = block_device(a.workdir)
        if a.dev is None:
            print("bigger_than_ram: --read-rate: --workdir %s is on no block device (tmpfs, proc, overlay or btrfs?): "
                  "there is no disk to throttle; give a --workdir on a disk" % a.workdir, file=sys.stderr)
            return 2
        a.read_bps = int(a.read_rate * 1e6)
    new_group(a, "probe").remove()  # refuses now, before minutes of writing, where there is none
    is_moe = a.shape in moe.SHAPES
    s = moe.shapes(a) if is_moe else lcc.shapes(a)
    stem = os.path.join(a.workdir, "model-%s-%dL-v%d-" % (a.shape, a.layers, a.vocab))
    q4 = stem + "q4_0.gguf"
    check_space(a, s, q4)
    try:
        import llama_cpp  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as e:
        print("skip: llama-cpp-python and gguf are needed (%s); run this with a python that has them" % e)
        return 0
    os.makedirs(a.workdir, exist_ok=True)
    mdir = os.path.join(a.workdir, "zz-model")
    (moe.write_config if is_moe else lcc.write_config)(mdir, s)
    if not os.path.exists(q4) and is_moe:  # Q4_0 blocks written directly: no f16 file, no quantize
        print("writing %s ..." % q4, file=sys.stderr)
        moe.write_gguf(q4 + ".part", s, "q4_0")
        os.rename(q4 + ".part", q4)
    if not os.path.exists(q4):  # through f16, not f32: half the disk and the time (13B: 26 GB, not 52)
        f16 = stem + "f16.gguf.part"
        print("writing %s, then quantizing to Q4_0 ..." % f16, file=sys.stderr)
        lcc.write_gguf(f16, s, "f16", pool=True)
        lcc.quantize(f16, q4 + ".part", "q4_0", a.threads)
        os.remove(f16)
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
        cg = new_group(a, "plan")
        try:
            # priced as the bench runs: --cpu-act int8 plans the int8 rate (compressed weights only)
            rc, out, err, _, _, _ = run_in(cg, [a.zigzag, "plan"] + zz_common + [
                "--max-block", str(a.batch), "--profile-seconds", str(a.profile_seconds), "--cpu-act", a.cpu_act], env)
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

    rate = ("throttled to %g MB/s (%d bytes/s on disk %d:%d, %s, in each engine's group and the plan's)" %
            (a.read_rate, a.read_bps, a.dev[0], a.dev[1],
             "blkio.throttle.read_bps_device" if blkio_base() else "io.max rbps") if a.read_rate else
            "not throttled (the disk's own speed)")
    print("# cpu: %s (%d online); llama-cpp-python %s; %s layer x %d, vocab %d; Q4_0 file %s; "
          "memory limit %s; batch %d, prompt %d, gen %d, threads %d; workdir %s; disk reads %s" %
          (cpu, os.cpu_count() or 0, getattr(llama_cpp, "__version__", "?"), s["name"], a.layers, a.vocab,
           fmt_bytes(gsize), fmt_bytes(a.limit), a.batch, a.prompt_len, a.gen_len, a.threads, a.workdir, rate))
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
        cp = z.get("compute_parts", {})
        print("# zigzag timed part: disk read %s at %.0f MiB/s; busy compute %.2f (of it attention on the CPU %.2f, "
              "waiting for it %.2f), weight_load %.2f, cache_load %.2f, cache_store %.2f; peak plan bytes %s; "
              "load %.1f s" %
              (fmt_bytes(z["disk_read_bytes"]), z["disk_read_bw"] / (1 << 20), z["busy"]["compute"],
               cp.get("attn_cpu", 0), cp.get("attn_wait", 0), z["busy"]["weight_load"], z["busy"]["cache_load"],
               z["busy"]["cache_store"], json.dumps(z["peak_bytes"]), z["load_s"]))
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
