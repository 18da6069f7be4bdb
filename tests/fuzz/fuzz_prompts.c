/* fuzz_prompts.c — a --prompts JSON Lines file read to its end or first error;
 * read again from the start, the same prompts. */
#include "fuzz_util.h"

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
        if (!p.id || (!p.text) == (!p.ids)) abort(); /* exactly one of the two forms */
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
