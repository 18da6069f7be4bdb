/*
 * zz_runtime.h — the single-machine engine of zigzag.
 *
 * Everything one rank needs to generate text with a transformer whose weights and
 * KV cache may not fit on its compute device: status and error messages, tensors
 * and the memory tiers they live on (GPU, CPU, disk) with exact byte accounting,
 * the device interface (CPU reference, CUDA) behind checked zz_device_* wrappers,
 * worker pools (compute, CPU attention), model configurations and the
 * architecture table (OPT, LLaMA), checkpoint loading (safetensors) and dummy
 * weights, the byte-pair tokenizer (a Hugging Face tokenizer.json, or GPT-2's
 * vocab.json + merges.txt), sampling, the generation engine that runs the zig-zag
 * block schedule, and the JSON Lines job files.
 *
 * This header only gathers the module's headers, one per concern (listed below);
 * a file that needs one concern includes that header alone.
 *
 * Usage:
 *     zz_config cfg;  zz_model model;  zz_device *dev;  zz_engine *eng;
 *     ZZ_CHECK(zz_config_preset("opt-125m", &cfg));
 *     ZZ_CHECK(zz_model_init(&cfg, &model));
 *     ZZ_CHECK(zz_device_create_cpu(0, 0, 0, &dev));
 *     zz_policy pol;  zz_policy_default(&pol);
 *     ZZ_CHECK(zz_engine_create(dev, &model, NULL, &pol, &shape, &eng)); // NULL: dummy weights
 *     ZZ_CHECK(zz_generate(eng, &req, &res));
 *     zz_engine_destroy(eng); zz_device_destroy(dev); zz_model_free(&model);
 *
 * Every fallible function returns a zz_status; on failure zz_error_message() says
 * what went wrong and where (file, line, tensor, byte offset). Output parameters
 * are written only on success.
 */
#ifndef ZZ_RUNTIME_H
#define ZZ_RUNTIME_H

#include "zz_base.h"     /* status, errors, tiers, tensors, arenas */
#include "zz_device.h"   /* the device and its checked wrappers */
#include "zz_moe.h"      /* mixture of experts: its device ops, its sizes */
#include "zz_model.h"    /* configuration, layers */
#include "zz_weights.h"  /* checkpoints, dummy weights */
#include "zz_policy.h"   /* policy, sizes, memory plan */
#include "zz_engine.h"   /* tiers' capacities, the engine */
#include "zz_generate.h" /* sampling, the token loop, perplexity */
#include "zz_jobs.h"     /* prompt files, files replaced whole */
#include "zz_text.h"     /* tokenizer */

#endif /* ZZ_RUNTIME_H */
