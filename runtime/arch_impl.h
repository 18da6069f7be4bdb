/*
 * arch_impl.h — the architecture boundary (internal to runtime/).
 *
 * An architecture owns everything that differs between model families: its
 * config.json fields and presets, its layer list and weight names, each weight's
 * --dummy init kind, each attention layer's cache spec, its position scheme, and
 * the math of each layer. The engine, the memory plan, the planner and the
 * pipeline see only layers, tensors and sizes. A new family is one arch_*.c file
 * plus one line in model.c's registry.
 */
#ifndef ZZ_ARCH_IMPL_H
#define ZZ_ARCH_IMPL_H
#include <jansson.h>

#include "zz_device.h"
#include "zz_hf_json.h"
#include "zz_policy.h"

/* What one layer computes for one GPU batch at one step. Pointers are device
 * pointers of the compute dtype unless typed otherwise. */
typedef struct zz_step {
  int64_t b;                /* sequences in the GPU batch */
  int64_t sq;               /* new tokens per sequence (prompt length in prefill, 1 after) */
  int64_t pos;              /* key position of the first new token */
  const int32_t *ids;       /* [b, sq] token ids (INPUT_EMBED) */
  const int32_t *positions; /* [b, sq] position ids of the architecture's scheme */
  const int32_t *pad;       /* [b] left padding slots */
  const int32_t *last;      /* [b] row of each sequence's last token in hidden: zz_step_last_row */
  void *hidden;             /* [b, sq, hidden] in and out */
  void *k, *v;              /* this layer's cache [b, t_max, kv row] (ATTENTION) */
  zz_kv_layout kv;          /* how k, v are stored (dtype, Q4 format, bytes between sequences) */
  double keep;              /* fraction of keys each query keeps (top-k sparse attention; 1 = dense) */
  int64_t window;           /* this layer's sliding window (zz_cache_spec.window); 0: none */
  void *logits;             /* [b, vocab] of the last position (OUTPUT_EMBED) */
  void *work;               /* workspace of arch->workspace_bytes */
  /* Only each sequence's last row of this layer's output is read after it (the
   * rule zz_layer_wants_all_rows said no): the layer computes what follows
   * its K and V (attention's output projection, the MLP) on those b rows alone, as
   * llama.cpp's inp_out_ids does, and leaves hidden's other rows stale. Set in a
   * prompt step (sq > 1, so [2b, dim] fits where [n, dim] did) of the last
   * transformer layer. */
  bool last_rows;
  /* CPU attention: when set, an ATTENTION layer hands its new q ([b, sq, heads *
   * head_dim]) and k, v ([b, sq, kv row]) to attend(), which appends k, v to a
   * cache living on the host and writes the attention output ([b, sq, heads *
   * head_dim], device) to out; k and v above are then unused. */
  zz_status (*attend)(void *ctx, const void *q, const void *k, const void *v, void *out);
  void *attend_ctx;
  /* A MoE layer whose experts are loaded one by one (offloaded): called with each
   * expert some row chose, before its matrices are read; NULL: all resident. */
  zz_status (*need_expert)(void *ctx, int64_t expert);
  void *expert_ctx;
} zz_step;

typedef struct zz_arch {
  const char *model_type;
  const char *(*preset_name)(int i); /* preset i's name; NULL past the last */
  /* the preset `name` (case-insensitive, "facebook/" accepted) → *out; false if unknown */
  bool (*preset)(const char *name, zz_config *out);
  /* config.json (root object, its path for messages) → *out */
  zz_status (*parse_config)(json_t *root, const char *path, zz_config *out);
  zz_status (*build)(struct zz_model *m);
  /* position ids of rows [from, from + n) of a sequence with `pad` left padding slots */
  void (*positions)(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out);
  /* bytes of workspace `forward` needs for b sequences of sq new tokens, t keys, on
   * a device so described (a plan may be for a device not opened here);
   * general_attn: attention takes the Q4 / top-k path (zz_attention_general) */
  size_t (*workspace_bytes)(const struct zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
                            bool general_attn);
  /* w[i]: the device-resident tensor of layer->weights[i] (tier GPU, data a device
   * pointer, shape from the spec, dtype what the device computes with; ndim 0 where
   * the spec is absent). forward calls the zz_device_* wrappers, which check them. */
  zz_status (*forward)(zz_device *dev, const struct zz_model *m, const zz_layer *layer, const zz_tensor *w,
                       const zz_step *step);
} zz_arch;

extern const zz_arch zz_arch_opt;
extern const zz_arch zz_arch_llama;
extern const zz_arch zz_arch_mixtral; /* arch_mixtral.c: LLaMA with a mixture of experts */
extern const zz_arch zz_arch_qwen2, zz_arch_mistral, zz_arch_qwen3, zz_arch_phi3; /* arch_dense.c */

/* ---------------------------------------------------------------- LLaMA-like families
 * (arch_llama.c): LLaMA's layers and math, varied by zz_config's family flags
 * (qkv_bias, qk_norm, fused_proj, window); each family (arch_dense.c) reads its
 * own keys after zz_llama_config and shares the rest of the table. */
typedef struct zz_llama_size {
  const char *name;
  int64_t hidden, ffn, n_layers, n_heads, n_kv_heads;
  int64_t head_dim; /* 0: hidden / n_heads */
  int64_t vocab, max_pos;
  float eps, theta;
  int32_t bos, eos;
  int64_t window; /* sliding_window on every layer; 0: none */
} zz_llama_size;
/* The preset `name` of table (case-insensitive; "org/" accepted) as model_type → *out */
bool zz_llama_preset_in(const zz_llama_size *table, size_t n, const char *model_type, const char *name, zz_config *out);
/* The keys every LLaMA-like config.json shares (sizes, ids, RoPE in both forms, the
 * norm's eps, the head, dtype; head_dim defaults to head_dim_def, or hidden / heads
 * when 0); anything else it names that LLaMA's math does not do is refused. */
zz_status zz_llama_config(json_t *root, const char *path, const char *model_type, int64_t head_dim_def, zz_config *out);
/* Qwen2's and Qwen3's windows: use_sliding_window, sliding_window and
 * max_window_layers (transformers 4), or layer_types (5; its sliding layers must be
 * the last ones) → c->window, c->window_from. */
zz_status zz_dense_window_layers(json_t *root, const char *path, zz_config *c);
/* ZZ_ERR_UNSUPPORTED where config.json sets a sliding_window (LLaMA has none). */
zz_status zz_llama_no_window(json_t *root, const char *path, const zz_config *c);
zz_status zz_llama_build(struct zz_model *m);
void zz_llama_positions(const zz_config *c, int64_t pad, int64_t from, int64_t n, int32_t *out);
size_t zz_llama_workspace(const struct zz_model *m, const zz_device_desc *dev, int64_t b, int64_t sq, int64_t t,
                          bool general_attn);
zz_status zz_llama_forward(zz_device *dev, const struct zz_model *m, const zz_layer *layer, const zz_tensor *w,
                           const zz_step *st);
#define ZZ_LLAMA_LAYERS                                                                                                \
  .build = zz_llama_build, .positions = zz_llama_positions, .workspace_bytes = zz_llama_workspace,                     \
  .forward = zz_llama_forward

/* The registry (model.c): every architecture, NULL terminated. */
const zz_arch *const *zz_arch_all(void);

/* Readers of the keys of Hugging Face's JSON files (zz_hf_json.h): absent or
 * null → default (def < 0, or NaN for reals: required); wrong type or out of
 * range → ZZ_ERR_FORMAT naming the key and the file. An integer may be written as a real without a fraction (4096.0). */
zz_status zz_json_int_in(json_t *obj, const char *path, const char *key, int64_t def, int64_t lo, int64_t hi,
                         int64_t *out);
/* zz_json_int_in over [0, 2^40] */
zz_status zz_json_int(json_t *obj, const char *path, const char *key, int64_t def, int64_t *out);
zz_status zz_json_bool(json_t *obj, const char *path, const char *key, bool def, bool *out);
/* a number in [lo, hi] */
zz_status zz_json_real(json_t *obj, const char *path, const char *key, double def, double lo, double hi, double *out);
/* torch_dtype or dtype ("float32" when both are absent; both written: equal) */
zz_status zz_json_dtype(json_t *obj, const char *path, zz_dtype *out);
/* The end ids under key (an id or a list of at most ZZ_MAX_EOS_IDS, each below
 * vocab) into c->eos_ids / c->n_eos; absent or null leaves them. */
zz_status zz_json_eos(json_t *obj, const char *path, const char *key, int64_t vocab, zz_config *c);

/* Bounds on config.json's sizes: far beyond any published model, so a value past
 * them is a lying file, not a big model. */
#define ZZ_MAX_HIDDEN (1 << 20)
#define ZZ_MAX_FFN (1 << 22)
#define ZZ_MAX_LAYERS 4096

/* An ATTENTION layer's attention once q, k, v ([b, sq, heads * hd], [b, sq,
 * kv_heads * hd]) are computed: st->attend when set, else k and v appended to the
 * layer's cache at st->pos and attention over it into att ([b, sq, heads * hd]);
 * scratch is zz_device_desc_attention_scratch's. */
zz_status zz_arch_attend(zz_device *dev, const zz_config *c, const zz_step *st, const void *q, const void *k,
                         const void *v, void *att, void *scratch);

/* Row of sequence i's last new token in a step's hidden state [b, sq, hidden]. */
static inline int64_t zz_step_last_row(int64_t sq, int64_t i) { return i * sq + sq - 1; }
/* The rows of x ([b * sq, dim], compute dtype) a layer computes after its K and V
 * (zz_step.last_rows): all of them in place, or each sequence's last gathered
 * into spare ([b, dim]); *rows gets their count, *at where they are. */
zz_status zz_arch_rows(zz_device *dev, const zz_step *st, void *x, int64_t dim, void *spare, int64_t *rows, void **at);
/* The residual res computed on zz_arch_rows' rows of st->hidden back into them:
 * under st->last_rows a copy of each sequence's last row, else nothing to do. */
zz_status zz_arch_rows_done(zz_device *dev, const zz_step *st, const void *res, int64_t dim);

/* Weight spec *w: absent (ndim 0) unless present; name from fmt with the layer
 * index; shape [d0] or [d0, d1]; init MATRIX for 2-D, BIAS for 1-D. */
void zz_arch_spec(zz_weight_spec *w, bool present, int ndim, int64_t d0, int64_t d1, const char *fmt, int index);

#endif
