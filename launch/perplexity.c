/*
 * perplexity.c — `zigzag perplexity --model DIR --text FILE [--window N] [policy flags]`:
 * the held-out perplexity of a text file under a policy (compression and top-k
 * sparsity included), teacher forced in windows of --window tokens
 * (zz_perplexity in runtime/perplexity.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zz_launch.h"

int zz_cmd_perplexity(const zz_opts *o) {
  zz_config cfg;
  zz_model model = {0};
  zz_checkpoint *ck = NULL;
  zz_tokenizer *tok = NULL;
  zz_run run = {0};
  int32_t *ids = NULL;
  zz_ppl r = {0};
  zz_status st = ZZ_OK;
  struct stat sb;
  if (!o->text_file) {
    fprintf(stderr, "zigzag perplexity: --text FILE is required (see zigzag --help)\n");
    return 2;
  }
  if (stat(o->model, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "zigzag perplexity: --model %s must be a model directory (weights and tokenizer)\n", o->model);
    return 2;
  }
  ZZ_CHECK_GOTO(zz_setup_model(o, ZZ_SETUP_WEIGHTS | ZZ_SETUP_TOKENIZER, &cfg, &model, &ck, &tok), st, done);
  int64_t n = 0;
  ZZ_CHECK_GOTO(zz_tokenizer_encode_file(tok, o->text_file, &ids, &n), st, done);
  if (n < 1) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "--text %s: no tokens in it", o->text_file);
    goto done;
  }
  int64_t w = o->window ? o->window : cfg.max_pos - 1;
  if (w < 1 || w + 1 > cfg.max_pos) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "--window %lld: BOS + the window must fit the model's %lld positions",
                  (long long)w, (long long)cfg.max_pos);
    goto done;
  }
  zz_shape shape = {.prompt_len = 1, .gen_len = w};
  ZZ_CHECK_GOTO(zz_run_open(&run, o, false, &model, ck, &shape), st, done); /* no --hw for perplexity */
  ZZ_CHECK_GOTO(zz_perplexity(run.eng, ids, n, &r), st, done);
  char pol[256];
  printf("perplexity %.4f over %lld tokens (%lld windows of up to %lld) policy: %s\n", r.ppl, (long long)r.tokens,
         (long long)r.windows, (long long)w, zz_policy_str(zz_engine_policy(run.eng), pol, sizeof pol));
done:
  if (st != ZZ_OK) fprintf(stderr, "zigzag perplexity: %s\n", zz_error_message());
  zz_ppl_free(&r);
  free(ids);
  zz_run_free(&run);
  zz_tokenizer_free(tok);
  zz_checkpoint_close(ck);
  zz_model_free(&model);
  return st == ZZ_OK ? 0 : 1;
}
