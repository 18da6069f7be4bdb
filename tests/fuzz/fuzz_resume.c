/* fuzz_resume.c — the --resume scan of an existing --out: ids read back, each once,
 * anything that is not zigzag output refused; once the job begins, a torn last
 * line cut and nothing else. */
#include <sys/stat.h>

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
    long good = o.good_len;
    if (good < 0 || (size_t)good > len || (good > 0 && data[good - 1] != '\n')) abort();
    if (zz_output_begin(&o, NULL) != ZZ_OK) abort();
    zz_output_close(&o);
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size != good) abort(); /* complete lines kept, the torn tail cut */
    zz_resume_free(s);
  }
  return 0;
}
