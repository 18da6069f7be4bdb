/*
 * setup.c — the model every command opens from --model: config.json or the preset,
 * the model, and as the command asks the checkpoint and the tokenizer. generate
 * (launch/job.c), bench, perplexity and plan open it here; what runs it is the run
 * (launch/run.c).
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_launch.h"

zz_status zz_setup_model(const zz_opts *o, unsigned what, zz_config *cfg, zz_model *model, zz_checkpoint **ck,
                         zz_tokenizer **tok) {
  ZZ_CHECK(zz_config_resolve(o->model, cfg));
  ZZ_CHECK(zz_model_init(cfg, model));
  if (!(what & (ZZ_SETUP_WEIGHTS | ZZ_SETUP_TOKENIZER | ZZ_SETUP_TOKENIZER_IF_ANY))) return ZZ_OK;
  struct stat sb;
  bool is_dir = stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode);
  if (what & ZZ_SETUP_WEIGHTS) {
    if (!is_dir && !o->dummy)
      return zz_error(ZZ_ERR_INVALID_ARG, "--model %s is a preset: add --dummy for random weights, or give a directory",
                      o->model);
    if (is_dir && !o->dummy) ZZ_CHECK(zz_checkpoint_open(o->model, ck));
  }
  if ((what & ZZ_SETUP_TOKENIZER) || ((what & ZZ_SETUP_TOKENIZER_IF_ANY) && is_dir)) {
    /* vocab.json + merges.txt, or tokenizer.json; only a directory has either */
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", o->model);
    if ((what & ZZ_SETUP_TOKENIZER) || access(vocab, R_OK) == 0 || zz_tokenizer_has_json(o->model))
      ZZ_CHECK(zz_tokenizer_load(o->model, tok));
  }
  return ZZ_OK;
}
