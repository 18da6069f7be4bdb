/* fuzz_resume.c — the --resume scan of an existing --out: ids read back, a torn
 * last line cut, anything that is not zigzag output refused. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char path[512];
  zz_fuzz_file("out.jsonl", data, len, path, sizeof path);
  zz_resume_set *s = NULL;
  zz_output o;
  zz_error_clear();
  zz_status st = zz_output_open(&o, path, true, &s);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK) {
    (void)zz_resume_has(s, "1");
    zz_output_close(&o);
    zz_resume_free(s);
  }
  return 0;
}
