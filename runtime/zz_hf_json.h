/*
 * zz_hf_json.h — reading Hugging Face's JSON files (runtime/config.c), shared by
 * the model configuration, the generation defaults and the tokenizer
 * (runtime/text/). Apart from zz_runtime.h because it hands out jansson's json_t.
 */
#ifndef ZZ_HF_JSON_H
#define ZZ_HF_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "zz_base.h"

/* Hugging Face's JSON files (config.json, generation_config.json,
 * tokenizer_config.json) at path into *out, an object; every number read as a
 * double (integers past int64 appear in real directories). required false: a
 * missing file gives ZZ_OK and *out NULL. */
zz_status zz_json_load_hf(const char *path, bool required, json_t **out);

#endif /* ZZ_HF_JSON_H */
