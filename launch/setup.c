/*
 * setup.c — the one setup sequence of every command: options → the model (config,
 * weights, tokenizer) → the policy (with --hw the planner's, its threads and
 * binding) → the device → the engine. generate, bench, perplexity and plan call
 * these steps instead of each writing the sequence again; a command checks its own
 * arguments between them (generate reads and checks every prompt after the model
 * and before the weights are loaded into an engine).
 */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_planner.h"

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

zz_status zz_setup_policy(zz_setup *s, const zz_opts *o, bool plan, const zz_model *m, const zz_shape *shape) {
  s->opts = *o;
  if (plan && o->hw) { /* --hw: the planner's policy when none is given, for the engine's shape */
    ZZ_CHECK(zz_opts_plan_policy(o, m, shape, &s->opts, s->pline, sizeof s->pline, &s->pred));
    zz_run_bind(&s->pred.bind); /* before the device starts its threads */
    s->predicted = true;
  }
  return zz_opts_policy(&s->opts, &s->pol);
}

zz_status zz_setup_engine(zz_setup *s, const zz_model *m, const zz_checkpoint *ck, const zz_shape *shape) {
  ZZ_CHECK(zz_opts_device(&s->opts, &s->dev));
  double t0 = zz_now();
  ZZ_CHECK(zz_opts_engine(&s->opts, s->dev, m, ck, shape, &s->eng));
  s->load_s = zz_now() - t0;
  return ZZ_OK;
}

void zz_setup_free(zz_setup *s) {
  zz_engine_destroy(s->eng);
  zz_device_destroy(s->dev);
  s->eng = NULL;
  s->dev = NULL;
}
