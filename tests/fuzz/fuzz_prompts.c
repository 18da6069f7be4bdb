/* fuzz_prompts.c — a --prompts JSON Lines file read to its end or first error;
 * read again from the start, the same prompts. Each line's settings are read too
 * (launch/lines.c): accepted in range, or the line's error with a code and a
 * message; an OpenAI batch line carries no prompt of its own, only its JSON. */
#include "fuzz_util.h"
#include "lines_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char path[512];
  zz_fuzz_file("in.jsonl", data, len, path, sizeof path);
  zz_prompt_reader *r = NULL;
  zz_error_clear();
  zz_status st = zz_prompt_reader_open(path, &r);
  int64_t lines[2] = {0, 0};
  for (int pass = 0; pass < 2 && st == ZZ_OK; pass++) {
    bool got = true;
    while (st == ZZ_OK && got) {
      zz_prompt p;
      st = zz_prompt_reader_next(r, &p, &got);
      if (st == ZZ_OK && got) {
        if (!p.id) abort();
        if (p.openai ? (p.text || p.ids || !p.raw) : (!p.text) == (!p.ids)) abort(); /* one form each */
        static zz_line_defaults d;
        if (!d.model_name) {
          zz_opts o;
          zz_opts_defaults(&o);
          zz_line_defaults_init(&o, &d);
          d.model_name = "fuzz";
        }
        zz_line l;
        if (zz_line_parse(&p, &d, &l) == ZZ_OK) {
          if ((l.err == NULL) != (l.err_code == NULL)) abort();
          if (!l.err && (zz_seq_params_check(&l.sp, ZZ_MAX_POSITIONS) != ZZ_OK || l.n < 1 || l.n > ZZ_MAX_COMPLETIONS))
            abort(); /* an accepted line is in range */
          zz_line_free(&l);
        }
        zz_error_clear();
        lines[pass] = p.line;
        zz_prompt_free(&p);
      }
    }
    if (st == ZZ_OK && pass == 0) st = zz_prompt_reader_rewind(r);
  }
  if (st == ZZ_OK && lines[0] != lines[1]) abort(); /* the second pass saw what the first did */
  zz_fuzz_expect_message(st);
  zz_prompt_reader_close(r);
  return 0;
}
