/*
 * zz_model.h — what a model is: its configuration (a preset, or a Hugging Face
 * directory's config.json read by its architecture in runtime/arch_*.c) and its
 * list of layers (input embedding, attention and MLP per transformer layer,
 * output embedding), each with the weights it holds and the KV cache it keeps.
 *
 * Usage:
 *     zz_config cfg;  zz_model m;
 *     ZZ_CHECK(zz_config_resolve("opt-125m", &cfg));  // or a model directory
 *     ZZ_CHECK(zz_model_init(&cfg, &m));
 *     for (int i = 0; i < m.n_layers; i++) use(&m.layers[i]);
 *     zz_model_free(&m);
 */
#ifndef ZZ_MODEL_H
#define ZZ_MODEL_H

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ model */

#define ZZ_MAX_EOS_IDS 8    /* eos_token_id's list (Llama 3.1 lists three) */
#define ZZ_MOE_MAX_DENSE 32 /* mlp_only_layers' list (published Qwen-MoE configs list none) */

typedef struct zz_config {
  char model_type[32]; /* config.json's model_type: picks the architecture */
  char name[64];       /* preset name or directory */
  int64_t vocab_size;
  int64_t hidden;     /* hidden_size */
  int64_t ffn;        /* intermediate (MLP) width */
  int64_t n_layers;   /* transformer layers */
  int64_t n_heads;    /* query heads */
  int64_t n_kv_heads; /* key/value heads (== n_heads without grouped-query attention) */
  int64_t head_dim;   /* per head: hidden / n_heads unless config.json says (Qwen3: 128) */
  int64_t max_pos;    /* max_position_embeddings */
  int64_t embed_dim;  /* token embedding width (== hidden unless projected) */
  bool pre_ln;        /* normalisation before each sublayer */
  bool final_ln;      /* a final norm before the LM head */
  bool enable_bias;
  int32_t bos, pad;
  int32_t eos_ids[ZZ_MAX_EOS_IDS]; /* every id that ends a sequence: eos_token_id of */
  int n_eos;                       /* generation_config.json, else of config.json */
  float ln_eps;
  zz_dtype dtype; /* torch_dtype (dtype) of the checkpoint */
  zz_rope rope;   /* rotary embeddings (architectures with rotary positions) */
  bool tied_head; /* the LM head is the token embedding (tie_word_embeddings) */
  /* LLaMA-like families (runtime/arch_llama.c; each family's keys: arch_dense.c) */
  bool qkv_bias;       /* biases on the q, k and v projections (Qwen2) */
  bool qk_norm;        /* RMSNorm of each q and k head before RoPE (Qwen3's q_norm, k_norm) */
  bool fused_proj;     /* q, k, v as one qkv_proj and gate, up as one gate_up_proj (Phi-3) */
  int64_t window;      /* sliding_window: a query attends to itself and the window - 1 keys before it; 0: all */
  int64_t window_from; /* the first transformer layer with that window (Qwen2's max_window_layers) */
  int64_t window_to;   /* > 0: the layers from window_to on have none (Qwen2-MoE's max_window_layers) */
  bool window_even;    /* only the even layers of [window_from, window_to) have it (Qwen2-MoE) */
  /* Mixture of experts (runtime/moe.c); n_experts 0: every MLP dense. A MoE MLP
   * routes each row to n_experts_used of n_experts SwiGLU experts of width
   * expert_ffn, weighted by the router's softmax. */
  int64_t n_experts;      /* num_local_experts (mixtral), num_experts (qwen) */
  int64_t n_experts_used; /* num_experts_per_tok: the router's top-k */
  int64_t expert_ffn;     /* an expert's width: intermediate_size (mixtral), moe_intermediate_size (qwen) */
  bool norm_topk;         /* the k weights divided by their sum (mixtral always; qwen norm_topk_prob) */
  int64_t shared_ffn;     /* a shared expert on every row, scaled by sigmoid(shared_expert_gate · x):
                             shared_expert_intermediate_size (qwen2_moe); 0: none */
  /* which layers have experts (Qwen-MoE; zz_moe_layer_sparse): layer i where
   * (i + 1) % sparse_step == 0 (decoder_sparse_step; 0 or 1: every layer) and i
   * is not one of dense_layers (mlp_only_layers), whose MLP is dense */
  int64_t sparse_step;
  int32_t dense_layers[ZZ_MOE_MAX_DENSE];
  int n_dense_layers;
} zz_config;

/* Bounds a configuration is checked against (config.json may lie). */
#define ZZ_MAX_POSITIONS (1 << 20) /* max_position_embeddings */
#define ZZ_MAX_VOCAB (1 << 24)     /* vocab_size */

/* Whether tok is one of the configuration's end ids. */
bool zz_config_is_eos(const zz_config *c, int32_t tok);

/* Preset names of every architecture (opt-125m … opt-175b), or a Hugging Face
 * model directory's config.json (its model_type picks the architecture, which
 * reads its own fields). */
zz_status zz_config_preset(const char *name, zz_config *out);
zz_status zz_config_load(const char *dir, zz_config *out);
/* A preset name, or a directory holding config.json. */
zz_status zz_config_resolve(const char *model, zz_config *out);
/* Where --model's files are: a directory as given; "org/name" not a directory
 * but in the Hugging Face cache: its snapshot of the main branch (runtime/hub.c:
 * $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub; offline, as
 * transformers and vLLM read it); anything else (a preset name) as given. An
 * "org/name" found nowhere and not a preset: ZZ_ERR_IO naming where it looked. */
zz_status zz_model_locate(const char *model, char *dir, size_t len);
/* Preset names of every architecture, NULL terminated. */
const char *const *zz_config_preset_names(void);

typedef enum zz_layer_kind {
  ZZ_LAYER_INPUT_EMBED = 0, /* token (+ position) embedding */
  ZZ_LAYER_ATTENTION,       /* self attention of one transformer layer, with its norm and residual */
  ZZ_LAYER_MLP,             /* the MLP of one transformer layer, with its norm and residual */
  ZZ_LAYER_OUTPUT_EMBED,    /* final norm, LM head */
} zz_layer_kind;

#define ZZ_MAX_LAYER_WEIGHTS 12

/* How --dummy fills a weight: values scaled like a trained checkpoint's. */
typedef enum zz_init_kind {
  ZZ_INIT_MATRIX = 0, /* N(0, 0.02²)-like */
  ZZ_INIT_BIAS,       /* small around 0 */
  ZZ_INIT_NORM_GAIN,  /* near 1 */
  ZZ_INIT_NORM_BIAS,  /* near 0, a norm's spread */
} zz_init_kind;

typedef struct zz_weight_spec {
  char name[ZZ_NAME_LEN]; /* canonical checkpoint name */
  int ndim;               /* 0: absent in this configuration (e.g. no bias) */
  int64_t shape[2];
  zz_init_kind init; /* for --dummy */
  /* A matrix its layer applies after the attention's K and V (an output
   * projection, an MLP's): on each sequence's last row alone where
   * zz_layer_wants_all_rows says no; set by the architecture's build beside the
   * forward that gathers those rows (zz_arch_rows), read by the cost model. */
  bool after_kv;
  /* A table its layer reads rows of (an input embedding), never multiplied:
   * no GEMM to price; set by the architecture's build, read by the cost model. */
  bool gathered;
  /* > 0: the matrices of this many experts stacked along dim 0 (expert e's rows
   * [e * shape[0] / experts, ...)); the name holds a '*' where a checkpoint's
   * tensor names put the expert's index (runtime/moe.c) */
  int64_t experts;
  /* A matrix kept in the compute dtype under --compress-weight and bf16 weights: a
   * router, whose small errors move whole experts (llama.cpp keeps its
   * ffn_gate_inp unquantized too) */
  bool precise;
} zz_weight_spec;

/* What an attention layer keeps per position: K and V rows of kv_heads × head_dim
 * elements of dtype each. */
typedef struct zz_cache_spec {
  int64_t kv_heads, head_dim;
  zz_dtype dtype;
  zz_qfmt q;      /* dtype Q4: groups along head_dim */
  int64_t window; /* sliding window of the layer's attention (zz_attn_args.window); 0: none */
} zz_cache_spec;

/* One unit of the schedule: loaded once per block, used by every GPU batch. */
typedef struct zz_layer {
  zz_layer_kind kind;
  int index; /* transformer layer for ATTENTION/MLP, -1 otherwise */
  int n_weights;
  zz_weight_spec weights[ZZ_MAX_LAYER_WEIGHTS];
  int64_t weight_numel; /* sum over weights */
  bool has_cache;       /* ATTENTION layers own a KV cache */
  zz_cache_spec cache;  /* when has_cache (dtype: set by the memory plan) */
} zz_layer;

struct zz_arch; /* an architecture's table: runtime/arch_impl.h */

typedef struct zz_model {
  zz_config cfg;
  const struct zz_arch *arch;
  int n_layers; /* entries of layers: embed, attention/MLP per transformer layer, output */
  zz_layer *layers;
} zz_model;

zz_status zz_model_init(const zz_config *cfg, zz_model *out);
void zz_model_free(zz_model *m);
/* Total weight elements of the model. */
int64_t zz_model_numel(const zz_model *m);
/* The one rule for which rows of a layer's output a step of sq new tokens per
 * sequence computes: every row, except in a prompt step (sq > 1) for the last
 * transformer layer's ATTENTION and MLP, whose output only the output embedding
 * reads, at each sequence's last position (the logits the engine gives); there
 * the layer's after_kv matrices run on those rows alone (llama.cpp's
 * inp_out_ids). all_rows (zz_engine_opts.all_rows): a reader of every position
 * keeps them. The schedule (zz_step.last_rows) and the planner's cost model ask
 * it, with the global layer, so in a pipeline only the rank holding the last
 * transformer layer drops rows. */
bool zz_layer_wants_all_rows(const zz_model *m, const zz_layer *layer, int64_t sq, bool all_rows);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_MODEL_H */
