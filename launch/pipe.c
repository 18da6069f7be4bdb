/*
 * pipe.c — `mpirun -np m zigzag generate|bench ...`: the same job over m ranks.
 *
 * Every rank: MPI with MPI_THREAD_MULTIPLE, hwloc binding (one line each), the stage
 * (heartbeats, error trail), its slice of the layer list (--layers, or split by
 * predicted cost), its own device and memory plan, checked before anything is
 * allocated and agreed on by every rank (a slice that does not fit stops all of them
 * with that rank's message), then the engine on that slice behind the stage's
 * callbacks. Every decision is the planner's, made once on rank 0 and broadcast:
 * with --hw and no policy given, the split and each rank's policy
 * (zz_pipe_plan_search, what `zigzag plan --ranks m` prints, rank 0 printing them
 * all); otherwise the split rule for the given policy (zz_plan_split, on the
 * file's machine or without --hw the nominal one) unless --layers gives the cuts.
 * Each rank applies its part: its binding (first: the thread rule splits the cores
 * it was bound to), its policy and threads, its slice. Rank 0 alone reads
 * --prompts, writes --out (one block of T x gbs x num_gb prompts at a time,
 * committed as one process commits, so --resume works with any m) and prints
 * progress; the last rank samples.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "fault_inject_impl.h"
#include "zz_launch.h"
#include "zz_planner.h"
#include "zz_stage.h"

typedef struct zz_pipe {
  const zz_opts *o; /* as parsed; read only */
  bool bench;
  int rank, size, groups;
  int max_new; /* new tokens per sequence: --max-new-tokens, bench's --gen-len */
  zz_job job;  /* rank 0: the files; every rank: model, checkpoint, shape */
  zz_run run;  /* this rank's policy, device kind and threads, its device and its engine (its slice) */
  zz_binding bind;
  bool bound;
  zz_stage *st;
  zz_stage_comm comm; /* --comm */
  zz_engine_stage *es;
  int *bounds;          /* [size + 1] layers of rank r: [bounds[r], bounds[r + 1]) */
  double predicted;     /* --hw, no policy given: the planner's pipeline total tokens/s (0: not planned) */
  bool planned;         /* --hw, no policy given, no --layers: the planner's pipeline runs */
  zz_pipeline_plan *pp; /* planned: rank 0's plan, broadcast to every rank */
  zz_hw hw;             /* --hw: the file, as this rank read and checked it */
  /* ZZ_FAULT_*: the fault injected into this rank (fault_inject.c) */
  zz_fault_inject fault;
  /* bench, rank 0: the request of the current run (0: none left) and its result */
  zz_request breq;
  bool bgiven;
  zz_result bres;
} zz_pipe;

static void zz_pipe_abort_hook(void) { MPI_Abort(MPI_COMM_WORLD, 1); }

/* ---------------------------------------------------------------- the split */

/* ---------------------------------------------------------------- callbacks of rank 0 */

static zz_status zz_pipe_next(void *ctx, int64_t max_n, zz_request *req_out) {
  zz_pipe *p = ctx;
  if (!p->bench) return zz_job_gather(&p->job, max_n, req_out);
  *req_out = (zz_request){0};
  if (!p->bgiven) *req_out = p->breq;
  p->bgiven = true;
  return ZZ_OK;
}

static zz_status zz_pipe_finished(void *ctx, const zz_request *req, const zz_result *res) {
  zz_pipe *p = ctx;
  (void)req;
  if (!p->bench) return zz_job_commit(&p->job, res);
  p->bres = (zz_result){.prefill_s = res->prefill_s, .decode_s = res->decode_s};
  return ZZ_OK;
}

/* Every rank: the injected fault (ZZ_FAULT_*), then a stop request (SIGINT, SIGTERM)
 * ends the pipeline at the next item. */
static zz_status zz_pipe_step_hook(void *ctx, int64_t block, int step, int group) {
  zz_pipe *p = ctx;
  ZZ_CHECK(zz_fault_at_step(&p->fault, p->rank, p->o->max_new_tokens, block, step, group));
  return zz_check_stop();
}

/* The first agreed step: the options every rank checks, then the plan. With --hw,
 * no policy given and no --layers, every rank reads and checks the file (it must
 * describe the machine the rank runs on) and rank 0 alone plans the pipeline, as
 * `zigzag plan --ranks m --hw FILE` does, for every rank; with --hw and a policy,
 * rank 0 reads the file for its split (zz_pipe_device). */
static zz_status zz_pipe_plan_root(zz_pipe *p) {
  const zz_opts *o = p->o;
  if (p->bench && o->gen_len < 2)
    return zz_error(ZZ_ERR_INVALID_ARG, "bench: --gen-len must be at least 2 (decode throughput needs a decode step)");
  if (zz_fault_commit_block(&p->fault, p->rank) < 0) p->job.kill_after = -1; /* the step hook fails instead */
  ZZ_CHECK(zz_stage_comm_parse(o->comm ? o->comm : "mpi", &p->comm));
  if (!(p->bounds = calloc((size_t)p->size + 1, sizeof *p->bounds))) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  bool given = o->policy || o->policy_flags_given;
  p->planned = !o->layers && o->hw && !given;
  if (!p->planned) /* rank 0's split for the given policy prices it on the file's machine */
    return o->hw && !o->layers && p->rank == 0 ? zz_hw_load(o->hw, &p->hw) : ZZ_OK;
  if (!(p->pp = calloc(1, sizeof *p->pp))) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  /* T: the user's, or the plan's choice (taken after the broadcast) */
  return zz_run_plan_pipeline(o, &p->job.model, &p->job.shape, p->size, o->num_inner_iterations,
                              p->rank == 0 ? p->pp : NULL, &p->hw);
}

/* Planned: this rank takes its part of rank 0's plan (broadcast), and the thread
 * rule over the cores its binding gave it, where no thread counts are given. */
static zz_status zz_pipe_take_plan(zz_pipe *p) {
  zz_pipeline_plan *pp = p->pp;
  memcpy(p->bounds, pp->bounds, (size_t)(p->size + 1) * sizeof *p->bounds);
  ZZ_CHECK(zz_run_take_policy(&p->run, &pp->rank[p->rank].policy));
  p->run.device = zz_hw_run_device(&p->hw, p->o->device); /* --device auto: the device the plan was made for */
  p->predicted = pp->total_tps;
  zz_threads th = zz_plan_threads(&p->hw, p->bound ? p->bind.ncores : 0);
  if (zz_run_take_threads(&p->run, p->o, &th))
    fprintf(stderr,
            "zigzag: rank %d: threads from the plan for its %d cores: GEMM %d, CPU attention %d, I/O lanes "
            "%d x 1 (--threads, --attn-threads override)\n",
            p->rank, p->bound && p->bind.ncores > 0 ? p->bind.ncores : p->hw.cpu_cores, th.gemm, th.attn, th.io);
  if (p->rank == 0) { /* one write: the ranks' own lines do not mix into it */
    char *buf = NULL, pb[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f) {
      fprintf(f, "zigzag: no policy given: the planner's pipeline for %s on %d ranks, %d groups (--hw %s)\n",
              p->job.model.cfg.name, p->size, p->groups, p->o->hw);
      fprintf(f, "zigzag: layers:");
      for (int r = 0; r < p->size; r++) fprintf(f, " rank %d [%d, %d)", r, pp->bounds[r], pp->bounds[r + 1]);
      fprintf(f, "\n");
      for (int r = 0; r < p->size; r++)
        fprintf(f, "zigzag: rank %d: policy %s\n", r, zz_policy_str(&pp->rank[r].policy, pb, sizeof pb));
      fprintf(f,
              "zigzag: pipeline predicted: prefill %.4g tokens/s, decode %.4g tokens/s, total %.4g tokens/s; "
              "bubble %.1f%%\n",
              pp->prefill_tps, pp->decode_tps, pp->total_tps, 100 * pp->bubble);
      fclose(f);
      if (buf) fputs(buf, stderr);
    }
    free(buf);
  }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- set-up */

/* --comm nccl, once every rank's plan is agreed and before anything loads: every
 * rank's GPU compared (two ranks on one GPU: refused), the communicator made, and
 * the device buffers of the largest hidden state a step hands over (a group of
 * gbs x num_gb sequences at the longest prompt) taken from the device before the
 * engine plans its slice. */
static zz_status zz_pipe_comm(zz_pipe *p) {
  if (p->comm == ZZ_STAGE_COMM_MPI) return ZZ_OK;
  int64_t bls = (int64_t)p->run.pol.gpu_batch_size * p->run.pol.num_gpu_batches;
  size_t max_hidden = zz_hidden_bytes(p->job.model.cfg.hidden, zz_device_describe(p->run.dev)->compute_dtype, bls,
                                      p->job.shape.prompt_len);
  return zz_stage_use_comm(p->st, p->comm, p->run.dev, max_hidden);
}

/* Every rank opens the job (rank 0: the files, every prompt checked) for the
 * shape the command asks (bench: --prompt-len and --gen-len); the shape is then
 * rank 0's (the longest prompt to run), so every rank splits and plans for the
 * same one. */
static zz_status zz_pipe_open(zz_pipe *p) {
  const zz_opts *o = p->o;
  zz_shape asked = {.prompt_len = p->bench ? o->prompt_len : o->max_prompt_len, .gen_len = p->max_new};
  zz_status st = zz_job_open(&p->job, o, asked, !p->bench && p->rank == 0);
  /* priced without a shared prefix on every rank: a slice of a pipeline computes
   * none once (runtime/prefix.c) */
  p->job.shape.shared_prefix = 0;
  return st;
}

/* This rank's GPU: its local rank on its node, round-robin over the GPUs there. */
static int zz_pipe_gpu(void) {
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return zz_device_cuda_ordinal_of(local ? atoi(local) : 0);
}

/* Each rank, once the plan is here: its device (after its threads are known: the
 * device starts its pools), and on rank 0 the split when it is not the planned
 * pipeline's nor --layers' (every rank parses those cuts itself): the split rule
 * for the given policy, on the --hw file's machine or the nominal one. */
static zz_status zz_pipe_device(zz_pipe *p) {
  const zz_model *m = &p->job.model;
  const zz_opts *o = p->o;
  if (p->planned) ZZ_CHECK(zz_pipe_take_plan(p));
  ZZ_CHECK(zz_run_device(&p->run, o, m, strcmp(p->run.device, "cpu") == 0 ? 0 : zz_pipe_gpu()));
  ZZ_CHECK(zz_stage_comm_check(p->comm, p->run.dev));
  if (o->layers) return zz_opts_parse_layers(o->layers, m->n_layers, p->size, p->bounds);
  if (p->planned || p->rank != 0) return ZZ_OK;
  const zz_device_desc *d = zz_device_describe(p->run.dev);
  zz_hw nominal;
  if (!o->hw) zz_hw_nominal(d->name, &nominal);
  zz_planner_opts run; /* the device's own options, priced as it runs them */
  zz_planner_opts_default(&run);
  run.bf16_weights = d->bf16_weights, run.cpu_act = d->cpu_act;
  return zz_plan_split(m, o->hw ? &p->hw : &nominal, &p->job.shape, &p->run.pol, &run, p->size, p->groups, p->bounds);
}

/* Each rank's slice planned against its own tiers before anything is allocated. */
static zz_status zz_pipe_check(zz_pipe *p) {
  const zz_model *m = &p->job.model;
  zz_engine_opts eo;
  ZZ_CHECK(
      zz_run_engine_opts(&p->run, p->o, &p->job.shape, p->bounds[p->rank], p->bounds[p->rank + 1], p->groups, &eo));
  zz_memplan plan;
  zz_status s = zz_engine_plan_check(zz_device_describe(p->run.dev), m, &eo, &plan);
  if (s != ZZ_OK)
    return zz_error(s, "layers [%d, %d) of %d, %d groups: %s", eo.layer_begin, eo.layer_end, m->n_layers, p->groups,
                    zz_error_message());
  zz_memplan_free(&plan);
  return ZZ_OK;
}

static zz_status zz_pipe_build(zz_pipe *p) {
  zz_engine_opts eo;
  ZZ_CHECK(
      zz_run_engine_opts(&p->run, p->o, &p->job.shape, p->bounds[p->rank], p->bounds[p->rank + 1], p->groups, &eo));
  char who[96];
  snprintf(who, sizeof who, "rank %d: layers [%d, %d) of %d, %d groups; ", p->rank, eo.layer_begin, eo.layer_end,
           p->job.model.n_layers, p->groups);
  return zz_run_engine(&p->run, &p->job.model, p->job.ck, &eo, who);
}

/* Refill (--refill-blocks, generate): requests of that many blocks' prompts, a slot
 * whose sequence has ended taking the next, where every rank can (each group's
 * cache on its device, hidden states over MPI: the joins travel behind them);
 * collective, once every engine is built. Otherwise a request is one block. */
static zz_status zz_pipe_refill(zz_pipe *p, int *blocks_out) {
  bool mine = !p->bench && p->o->refill_blocks > 1 && p->comm == ZZ_STAGE_COMM_MPI, all = false;
  for (int g = 0; mine && g < p->groups; g++) mine = zz_engine_can_refill(p->run.eng, g);
  ZZ_CHECK(zz_stage_all(p->st, mine, &all));
  *blocks_out = all ? p->o->refill_blocks : 1;
  return ZZ_OK;
}

/* The stage over the engine; rank 0 starts the job's output. */
static zz_status zz_pipe_adapter(zz_pipe *p, int refill_blocks) {
  zz_engine_stage_config ec = {.engine = p->run.eng,
                               .device = p->run.dev,
                               .max_new_tokens = p->max_new,
                               .ignore_eos = p->bench,
                               .sampling = zz_opts_sampling(p->o),
                               .refill_blocks = refill_blocks,
                               .next = zz_pipe_next,
                               .finished = zz_pipe_finished,
                               .step_hook = zz_pipe_step_hook,
                               .ctx = p};
  ZZ_CHECK(zz_engine_stage_create(&ec, &p->es));
  if (p->rank != 0) return ZZ_OK;
  int64_t cap = (int64_t)p->groups * p->run.pol.gpu_batch_size * p->run.pol.num_gpu_batches * refill_blocks;
  if (p->bench) return ZZ_OK;
  return zz_job_start(&p->job, cap);
}

/* "zigzag: rank R: peak memory: ..." as one write, so ranks' lines do not mix. */
static void zz_pipe_report_peaks(const zz_pipe *p) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return;
  zz_report_peaks(p->run.eng, f);
  fclose(f);
  if (buf && len > 8) fprintf(stderr, "zigzag: rank %d:%s", p->rank, buf + strlen("zigzag:"));
  free(buf);
}

/* ---------------------------------------------------------------- bench */

static zz_status zz_pipe_bench_run(zz_pipe *p, zz_request req) {
  p->breq = req;
  p->bgiven = false;
  return zz_engine_stage_run(p->es, p->st);
}

/* A warm-up block (one prompt of one token, two new tokens), then the measured one
 * of T x gbs x num_gb prompts; throughput at rank 0 as one process reports it, and
 * each rank's busy, bubble and bytes per token over the measured block. */
static zz_status zz_pipe_bench(zz_pipe *p, int *rc) {
  const zz_opts *o = p->o;
  int64_t b = (int64_t)p->groups * p->run.pol.gpu_batch_size * p->run.pol.num_gpu_batches, one = 1;
  int32_t **ids = NULL;
  int64_t *lens = NULL;
  zz_status s = ZZ_OK;
  if (p->rank == 0) s = zz_bench_prompts(&p->job.cfg, b, o->prompt_len, &ids, &lens);
  s = zz_stage_agree(p->st, s);
  if (s != ZZ_OK) {
    *rc = 1;
    return s;
  }
  zz_request warm = {.n = 1, .ids = (const int32_t *const *)ids, .lens = &one};
  zz_request req = {.n = b, .ids = (const int32_t *const *)ids, .lens = lens};
  if ((s = zz_pipe_bench_run(p, warm)) != ZZ_OK) zz_stage_fail(p->st, s);
  zz_stage_stats s0, s1, *all = NULL;
  zz_stage_get_stats(p->st, &s0);
  if ((s = zz_pipe_bench_run(p, req)) != ZZ_OK) zz_stage_fail(p->st, s);
  zz_stage_get_stats(p->st, &s1);
  if (p->rank == 0 && !(all = calloc((size_t)p->size, sizeof *all)))
    zz_stage_fail(p->st, zz_error(ZZ_ERR_NO_MEMORY, "out of memory"));
  /* what each rank did in the measured block: its counters then minus before */
  zz_stage_stats d = s1;
  d.total_s -= s0.total_s, d.busy_s -= s0.busy_s, d.bubble_s -= s0.bubble_s, d.send_wait_s -= s0.send_wait_s;
  d.bytes_sent -= s0.bytes_sent, d.bytes_received -= s0.bytes_received, d.messages_sent -= s0.messages_sent;
  d.items -= s0.items, d.tokens -= s0.tokens, d.blocks -= s0.blocks;
  d.bytes_per_token = d.tokens ? (double)d.bytes_sent / (double)d.tokens : 0;
  if ((s = zz_stage_gather_stats(p->st, &d, all)) != ZZ_OK) zz_stage_fail(p->st, s);
  if (p->rank == 0) {
    double rate[3];
    zz_bench_rates(b, o->prompt_len, o->gen_len, &p->bres, rate);
    char pbuf[256];
    zz_policy_str(&p->run.pol, pbuf, sizeof pbuf);
    if (o->json) {
      printf("{\"model\": \"%s\", \"device\": \"%s\", \"ranks\": %d, \"groups\": %d, \"prompt_len\": %d, "
             "\"gen_len\": %d, \"batch\": %lld, \"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, "
             "\"total_tok_s\": %.3f, \"prefill_s\": %.4f, \"decode_s\": %.4f, \"policy\": \"%s\", \"predicted\": %.3f, "
             "\"stages\": [",
             p->job.cfg.name, zz_device_describe(p->run.dev)->name, p->size, p->groups, o->prompt_len, o->gen_len,
             (long long)b, rate[0], rate[1], rate[2], p->bres.prefill_s, p->bres.decode_s, pbuf, p->predicted);
      for (int r = 0; r < p->size; r++)
        printf("%s{\"rank\": %d, \"layers\": [%d, %d], \"busy_s\": %.4f, \"bubble_s\": %.4f, \"total_s\": %.4f, "
               "\"busy_frac\": %.4f, \"bubble_frac\": %.4f, \"bytes_per_token\": %.1f}",
               r ? ", " : "", r, p->bounds[r], p->bounds[r + 1], all[r].busy_s, all[r].bubble_s, all[r].total_s,
               all[r].total_s > 0 ? all[r].busy_s / all[r].total_s : 0,
               all[r].total_s > 0 ? all[r].bubble_s / all[r].total_s : 0, all[r].bytes_per_token);
      printf("], \"warmup\": \"excluded\"}\n");
    } else {
      printf("zigzag bench: %s on %s, %d ranks, %d groups, %lld prompts x %d tokens, %d new tokens each "
             "(warm-up excluded)\n",
             p->job.cfg.name, zz_device_describe(p->run.dev)->name, p->size, p->groups, (long long)b, o->prompt_len,
             o->gen_len);
      printf("  policy     %s (%s)\n", pbuf,
             p->predicted > 0 ? "rank 0's; each rank's planned for its slice" : "per rank");
      printf("  prefill    %10.1f tok/s  (%.3f s)\n", rate[0], p->bres.prefill_s);
      printf("  decode     %10.1f tok/s  (%.3f s)\n", rate[1], p->bres.decode_s);
      printf("  total      %10.1f tok/s\n", rate[2]);
      if (p->predicted > 0)
        printf("  predicted  %10.1f tok/s total (the planner's pipeline, --hw %s)\n", p->predicted, o->hw);
      for (int r = 0; r < p->size; r++)
        printf("  rank %-3d   layers [%d, %d): busy %.0f%%, bubble %.0f%% of %.3f s, %.0f bytes sent per token\n", r,
               p->bounds[r], p->bounds[r + 1], all[r].total_s > 0 ? 100 * all[r].busy_s / all[r].total_s : 0,
               all[r].total_s > 0 ? 100 * all[r].bubble_s / all[r].total_s : 0, all[r].total_s, all[r].bytes_per_token);
    }
    fflush(stdout);
  }
  free(all);
  zz_bench_prompts_free(ids, lens, p->rank == 0 ? b : 0);
  *rc = 0;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- the command */

int zz_cmd_pipe(const zz_opts *opts) {
  bool bench = strcmp(opts->command, "bench") == 0;
  zz_pipe pp = {.o = opts, .bench = bench, .max_new = bench ? opts->gen_len : opts->max_new_tokens}, *p = &pp;
  int provided = 0, rc = 1;
  if (!pp.bench && (!opts->prompts || !opts->out)) {
    fprintf(stderr, "zigzag generate: --prompts and --out are required (see zigzag --help)\n");
    return 2;
  }
  if (zz_stage_mpi_init(opts->peer_timeout, &provided) != ZZ_OK) {
    fprintf(stderr, "zigzag: %s\n", zz_error_message());
    return 1;
  }
  zz_set_fatal_hook(zz_pipe_abort_hook);
  MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p->size);
  /* T for the stage's tag space until a plan (if any) says otherwise */
  p->groups = zz_pipe_groups(p->size, opts->num_inner_iterations);
  zz_catch_stop_signals();
  zz_status s = ZZ_OK;
  p->fault = zz_fault_inject_of(opts);
  zz_run_init(&p->run, opts); /* the options' policy, device and threads until a plan says otherwise */
  int gpu = strcmp(opts->device, "cuda") == 0 ? zz_pipe_gpu() : -1;
  if (s == ZZ_OK) s = zz_binding_init(MPI_COMM_WORLD, gpu, &p->bind);
  p->bound = s == ZZ_OK;
  zz_stage_config cfg;
  zz_stage_config_default(&cfg);
  cfg.groups = p->groups;
  cfg.peer_timeout = opts->peer_timeout;
  cfg.max_new_tokens = p->max_new;
  if (s == ZZ_OK) s = zz_stage_create(MPI_COMM_WORLD, &cfg, &p->st);
  if (s != ZZ_OK) { /* no stage to stop the others with: the launcher does */
    fprintf(stderr, "zigzag: rank %d: %s: %s\n", p->rank, zz_status_str(s), zz_error_message());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* plan every slice before anything is allocated, then build, then start writing:
   * each step agreed on, so a rank that cannot go on stops every rank cleanly */
  s = zz_stage_agree(p->st, zz_pipe_open(p));
  /* rank 0's shape: the longest prompt to run, the most new tokens a line asks */
  if (s == ZZ_OK) s = zz_stage_bcast(p->st, &p->job.shape, (int)sizeof p->job.shape, 0);
  if (s == ZZ_OK) {
    p->max_new = (int)p->job.shape.gen_len;
    s = zz_stage_agree(p->st, zz_stage_set_limits(p->st, p->groups, p->max_new));
  }
  /* rank 0 plans, every rank takes its part: the plan (planned), then the cuts */
  if (s == ZZ_OK) s = zz_stage_agree(p->st, zz_pipe_plan_root(p));
  if (s == ZZ_OK && p->planned) s = zz_stage_bcast(p->st, p->pp, (int)sizeof *p->pp, 0);
  if (s == ZZ_OK && p->planned) { /* the plan's T is what every rank runs */
    p->groups = p->pp->groups;
    s = zz_stage_agree(p->st, zz_stage_set_limits(p->st, p->groups, p->max_new));
  }
  if (s == ZZ_OK && opts->plan_trace)
    fprintf(stderr, "zigzag: rank %d: planner searches run here: %d\n", p->rank, zz_planner_searches());
  if (s == ZZ_OK) s = zz_stage_agree(p->st, zz_pipe_device(p));
  if (s == ZZ_OK && !p->planned && !opts->layers)
    s = zz_stage_bcast(p->st, p->bounds, (int)((size_t)(p->size + 1) * sizeof *p->bounds), 0);
  if (s == ZZ_OK) s = zz_stage_agree(p->st, zz_pipe_check(p));
  if (s == ZZ_OK && p->comm != ZZ_STAGE_COMM_MPI) s = zz_stage_agree(p->st, zz_pipe_comm(p));
  if (s == ZZ_OK) s = zz_stage_agree(p->st, zz_pipe_build(p));
  int refill_blocks = 1;
  if (s == ZZ_OK) s = zz_pipe_refill(p, &refill_blocks);
  if (s == ZZ_OK) s = zz_stage_agree(p->st, zz_pipe_adapter(p, refill_blocks));
  if (s == ZZ_OK && p->bench) {
    zz_pipe_bench(p, &rc);
  } else if (s == ZZ_OK) {
    zz_status r = zz_engine_stage_run(p->es, p->st);
    if (r != ZZ_OK) zz_stage_fail(p->st, r); /* the error trail; never returns */
    if (p->rank == 0) zz_progress_finish(&p->job.prog);
    zz_pipe_report_peaks(p);
    rc = 0;
  }
  zz_stage_destroy(p->st);
  if (p->bound) zz_binding_free(&p->bind);
  zz_engine_stage_destroy(p->es);
  zz_run_free(&p->run);
  zz_job_close(&p->job);
  free(p->bounds);
  free(p->pp);
  MPI_Finalize();
  return s == ZZ_OK ? rc : (s == ZZ_ERR_INVALID_ARG ? 2 : 1);
}
