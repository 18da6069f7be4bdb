/* zz_tests.h — suite registration functions and helpers shared by the test files. */
#ifndef ZZ_TESTS_H
#define ZZ_TESTS_H

void zz_test_kernels_register(void);
void zz_test_loader_register(void);
void zz_test_model_register(void);
void zz_test_tokenizer_register(void);
void zz_test_sampler_register(void);
void zz_test_jobs_register(void);
void zz_test_offload_register(void);
void zz_test_fuzz_register(void);

/* Reads a whole file into a malloc'd NUL-terminated buffer (NULL on failure). */
char *zz_test_read_file(const char *path, size_t *len);
/* Writes bytes to path; 0 on success. */
int zz_test_write_file(const char *path, const void *data, size_t len);
/* A fresh empty directory under $TMPDIR (static buffer per call site: copy it). */
const char *zz_test_tmpdir(void);

#endif
