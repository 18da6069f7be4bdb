/*
 * test_tokenizer.c — the GPT-2 byte-level BPE tokenizer against Hugging Face.
 *
 * The golden ids in tokenizer_cases.json come from GPT2TokenizerFast (see
 * tests/fixtures/make_fixtures.py). Beyond them: round trips of tricky and random
 * UTF-8, merge order on a hand-made vocabulary whose answers were checked against
 * both Hugging Face tokenizers, and the errors for bad input and bad files.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unicode_impl.h"
#include "zz_runtime.h"
#include "zz_tests.h"

#ifndef ZZ_FIXTURES_DIR
#error "ZZ_FIXTURES_DIR must name tests/fixtures"
#endif
#define ZZ_TOK_DIR ZZ_FIXTURES_DIR "/tiny-opt"
#define ZZ_TOK_CASES ZZ_FIXTURES_DIR "/tokenizer_cases.json"

void zz_test_tokenizer_register(void);

/* The fixture tokenizer, loaded once by the suite; NULL (and the message kept)
 * when loading failed, which every test then reports as its own failure. */
static zz_tokenizer *zz_tt_tok;
static char zz_tt_load_error[1024];

static int zz_tt_suite_init(void) {
  zz_tt_tok = NULL;
  if (zz_tokenizer_load(ZZ_TOK_DIR, &zz_tt_tok) != ZZ_OK)
    snprintf(zz_tt_load_error, sizeof zz_tt_load_error, "%s", zz_error_message());
  return 0;
}

static int zz_tt_suite_clean(void) {
  zz_tokenizer_free(zz_tt_tok);
  zz_tt_tok = NULL;
  return 0;
}

static const zz_tokenizer *zz_tt_fixture(void) {
  if (!zz_tt_tok) fprintf(stderr, "\n  loading %s failed: %s\n", ZZ_TOK_DIR, zz_tt_load_error);
  return zz_tt_tok;
}

static bool zz_tt_contains(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

/* Encodes and decodes text; true when both succeed, every id is in range and the
 * bytes come back unchanged. Says which text failed on stderr. */
static bool zz_tt_roundtrip(const zz_tokenizer *tok, const char *text, size_t len) {
  int32_t *ids = NULL;
  int64_t n = -1;
  char *back = NULL;
  size_t back_len = 0;
  bool ok = zz_tokenizer_encode(tok, text, len, &ids, &n) == ZZ_OK;
  for (int64_t i = 0; ok && i < n; i++) ok = ids[i] >= 0 && ids[i] < zz_tokenizer_vocab_size(tok);
  ok = ok && zz_tokenizer_decode(tok, ids, n, &back, &back_len) == ZZ_OK;
  ok = ok && back_len == len && memcmp(back, text, len) == 0 && back[len] == '\0';
  if (!ok) {
    fprintf(stderr, "\n  round trip failed for %zu bytes:", len);
    for (size_t i = 0; i < len && i < 64; i++) fprintf(stderr, " %02X", (uint8_t)text[i]);
    fprintf(stderr, " (%s)\n", zz_error_message());
  }
  free(ids);
  free(back);
  return ok;
}

/* ================================================================ golden cases */

static void test_tokenizer_fixture_cases(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  json_error_t jerr;
  json_t *cases = json_load_file(ZZ_TOK_CASES, JSON_ALLOW_NUL, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
  CU_ASSERT_FATAL(json_is_array(cases) && json_array_size(cases) >= 40);
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *text = json_string_value(json_object_get(c, "text"));
    size_t len = json_string_length(json_object_get(c, "text"));
    json_t *want = json_object_get(c, "ids");
    CU_ASSERT_FATAL(text != NULL && json_is_array(want));
    int32_t *ids = NULL;
    int64_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, text, len, &ids, &n), ZZ_OK);
    bool same = zz_test_ids_equal(ids, n, want);
    if (!same) fprintf(stderr, "\n  case %zu (\"%s\"): ids differ from Hugging Face\n", i, text);
    CU_ASSERT(same);
    char *back = NULL;
    size_t back_len = 0;
    CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, ids, n, &back, &back_len), ZZ_OK);
    CU_ASSERT(back != NULL && back_len == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
  }
  json_decref(cases);
}

static void test_tokenizer_vocab_size(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  json_error_t jerr;
  json_t *vocab = json_load_file(ZZ_TOK_DIR "/vocab.json", 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(vocab);
  json_int_t max_id = -1;
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v) {
    if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
  }
  /* + "<|endoftext|>": with no tokenizer_config.json or special_tokens_map.json
   * GPT2Tokenizer registers it as bos, eos and unk, and adds it after the vocabulary
   * (AutoTokenizer gives 1004 tokens for tiny-opt) */
  CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(tok), (int64_t)max_id + 2);
  CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(NULL), 0);
  json_decref(vocab);
}

/* OPT's special tokens are plain vocab.json entries: they decode to their text,
 * and their text in the input is not special (it is byte-level BPE like any other). */
static void test_tokenizer_special_tokens(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  const int32_t ids[] = {0, 1, 2, 3, 2};
  char *text = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_decode(tok, ids, 5, &text, &len), ZZ_OK);
  CU_ASSERT_STRING_EQUAL(text, "<s><pad></s><unk></s>");
  CU_ASSERT_EQUAL(len, strlen("<s><pad></s><unk></s>"));
  free(text);

  int32_t *enc = NULL;
  int64_t n = 0;
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, "</s>", 4, &enc, &n), ZZ_OK);
  CU_ASSERT(n > 1);
  for (int64_t i = 0; i < n; i++) CU_ASSERT(enc[i] > 3);
  free(enc);
}

/* The generated tables at their edges and at the code points the tokenizers are
 * known to disagree with str.isspace() or older Unicode on. */
static void test_tokenizer_unicode_classes(void) {
  static const uint32_t letters[] = {
      'A', 'z', 0xAA, 0xB5, 0xBA, 0xC0, 0xFF, 0x4E00, 0x9FFF, 0xAC00, 0x10000, 0x1E290 /* new in 14.0 */, 0x2A6DF};
  static const uint32_t numbers[] = {'0', '9', 0xB2, 0xB3, 0xB9, 0xBC, 0x660, 0x2167, 0x3007, 0x1D7CE, 0x1FBF9};
  static const uint32_t spaces[] = {'\t',   '\n',   0x0B,   0x0C,   '\r',   ' ',    0x85,   0xA0,
                                    0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  static const uint32_t others[] = {0,      '!',    '\'',   '_',     0x1C,     0x1F,    0x7F,
                                    0xAD,   0xD7,   0xF7,   0x180E,  0x200B,   0x200D,  0x2060,
                                    0xFEFF, 0xD800, 0xFFFD, 0x1F44D, 0x10FFFF, 0x110000};
  for (size_t i = 0; i < sizeof letters / sizeof letters[0]; i++)
    CU_ASSERT(zz_unicode_is_letter(letters[i]) && !zz_unicode_is_number(letters[i]) &&
              !zz_unicode_is_space(letters[i]));
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    CU_ASSERT(!zz_unicode_is_letter(numbers[i]) && zz_unicode_is_number(numbers[i]) &&
              !zz_unicode_is_space(numbers[i]));
  for (size_t i = 0; i < sizeof spaces / sizeof spaces[0]; i++)
    CU_ASSERT(!zz_unicode_is_letter(spaces[i]) && !zz_unicode_is_number(spaces[i]) && zz_unicode_is_space(spaces[i]));
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    CU_ASSERT(!zz_unicode_is_letter(others[i]) && !zz_unicode_is_number(others[i]) && !zz_unicode_is_space(others[i]));
}

/* ================================================================ round trips */

static void test_tokenizer_roundtrip_tricky(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  static const char *const texts[] = {
      "",
      " ",
      "\n",
      "'",
      "''s",
      "'s's'S'RE're've'm'll'd'x",
      "it's 'tis' 'll ' 's",
      "    \t\t\n\n \r\n\r\n   x",
      "x   ",
      "\x1c\x1d\x1e\x1f field separators",
      "\x7f del and \x01\x02 controls",
      "\xc2\x85 next line, \xc2\xa0 no-break, \xe2\x80\xa8 line sep, \xe3\x80\x80 ideographic",
      "\xef\xbb\xbf bom at start",
      "\xc2\xb2 \xc2\xbd \xe2\x85\xab numbers: superscript two, one half, roman twelve",
      "\xc2\xaa\xc2\xba\xc2\xb5 latin-1 letters",
      "\xed\x9f\xbf\xee\x80\x80 U+D7FF U+E000 around the surrogates",
      "\xef\xbf\xbd\xef\xbf\xbf replacement char, U+FFFF",
      "\xf4\x8f\xbf\xbf U+10FFFF",
      "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb emoji zwj",
      "e\xcc\x81\xcc\x81\xcc\x81 stacked combining marks",
      "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 123 \xe0\xa5\xa7\xe0\xa5\xa8",
      "\xe4\xb8\xad\xe6\x96\207abc123!!!   \xe4\xb8\xad", /* octal: \x would eat "abc" */
      "snake_case and CamelCase and kebab-case",
      "https://example.com/path?q=1&r=2#frag",
      "1,234.56e-7 -0x1F 3/4",
      "tab\tsep\tvalues\n1\t2\t3\n",
      "trailing newline\n",
      "   ",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    CU_ASSERT(zz_tt_roundtrip(tok, texts[i], strlen(texts[i])));

  /* embedded NUL bytes are text too */
  CU_ASSERT(zz_tt_roundtrip(tok, "a\0b\0\0 c", 7));
  /* every byte value that can stand alone, i.e. all of ASCII */
  char ascii[128];
  for (int b = 0; b < 128; b++) ascii[b] = (char)b;
  CU_ASSERT(zz_tt_roundtrip(tok, ascii, sizeof ascii));
  /* one long word and one long run of spaces: a single pre-token each */
  size_t big = 20000;
  char *s = malloc(big);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  memset(s, 'e', big);
  CU_ASSERT(zz_tt_roundtrip(tok, s, big));
  memset(s, ' ', big);
  CU_ASSERT(zz_tt_roundtrip(tok, s, big));
  free(s);
}

static uint64_t zz_tt_rand(uint64_t *state) { /* xorshift64* */
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 0x2545F4914F6CDD1Dull;
}

static size_t zz_tt_put_utf8(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Random code points weighted toward what the pre-tokenizer treats specially:
 * spaces of every kind, apostrophes, letters, digits, and the rest of Unicode. */
static uint32_t zz_tt_rand_cp(uint64_t *st) {
  static const uint32_t special[] = {' ',    ' ',    '\t',   '\n', '\r',   0x0B,   0x0C,   0x1C,   0x1F,
                                     0x00,   '\'',   '\'',   's',  't',    'r',    'e',    'v',    'm',
                                     'l',    'd',    0x85,   0xA0, 0x1680, 0x2003, 0x2028, 0x202F, 0x3000,
                                     0x180E, 0x200B, 0xFEFF, 0xB2, 0xBD,   0x2167, 0xAA,   0x301};
  uint64_t r = zz_tt_rand(st) % 100;
  if (r < 35) return special[zz_tt_rand(st) % (sizeof special / sizeof special[0])];
  if (r < 65) return 0x20 + (uint32_t)(zz_tt_rand(st) % 0x5F);  /* printable ASCII */
  if (r < 75) return 0x80 + (uint32_t)(zz_tt_rand(st) % 0x780); /* two-byte UTF-8 */
  if (r < 90) {
    uint32_t cp;
    do cp = 0x800 + (uint32_t)(zz_tt_rand(st) % 0xF800);
    while (cp >= 0xD800 && cp <= 0xDFFF);
    return cp;
  }
  return 0x10000 + (uint32_t)(zz_tt_rand(st) % 0x100000);
}

static void test_tokenizer_roundtrip_random(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  uint64_t st = 0x5EED2024ull;
  char buf[4 * 64];
  int failures = 0;
  for (int k = 0; k < 4000 && failures < 5; k++) {
    size_t n_cp = (size_t)(zz_tt_rand(&st) % 64), len = 0;
    for (size_t i = 0; i < n_cp; i++) len += zz_tt_put_utf8(zz_tt_rand_cp(&st), buf + len);
    if (!zz_tt_roundtrip(tok, buf, len)) failures++;
  }
  CU_ASSERT_EQUAL(failures, 0);
}

/* ================================================================ bad input */

static void test_tokenizer_invalid_utf8(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  static const struct {
    const char *bytes;
    size_t len;
    const char *offset; /* as the message must say it */
  } bad[] = {
      {"\x80", 1, "offset 0"},                  /* lone continuation byte */
      {"ab\xff", 3, "offset 2"},                /* never valid */
      {"abc\xc0\xaf", 5, "offset 3"},           /* overlong '/' */
      {"\xe0\x80\xaf", 3, "offset 0"},          /* overlong, three bytes */
      {"x\xf0\x80\x80\xaf", 5, "offset 1"},     /* overlong, four bytes */
      {"hello \xed\xa0\x80", 9, "offset 6"},    /* surrogate U+D800 */
      {"\xf4\x90\x80\x80", 4, "offset 0"},      /* U+110000 */
      {"\xf5\x80\x80\x80", 4, "offset 0"},      /* lead byte past U+10FFFF */
      {"ok \xe2\x82", 5, "offset 3"},           /* truncated at the end */
      {"\xe2\x82 more", 7, "offset 0"},         /* truncated before ASCII */
      {"\xc3\xa9\xc3", 3, "offset 2"},          /* valid, then truncated */
      {"a\xf0\x9f\x91\xa9\x80", 6, "offset 5"}, /* stray continuation after */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int32_t *ids = (int32_t *)&ids; /* sentinels: must stay untouched */
    int64_t n = -7;
    CU_ASSERT_EQUAL(zz_tokenizer_encode(tok, bad[i].bytes, bad[i].len, &ids, &n), ZZ_ERR_INVALID_ARG);
    CU_ASSERT(zz_tt_contains(zz_error_message(), "UTF-8"));
    if (!zz_tt_contains(zz_error_message(), bad[i].offset))
      fprintf(stderr, "\n  case %zu: want \"%s\" in \"%s\"\n", i, bad[i].offset, zz_error_message());
    CU_ASSERT(zz_tt_contains(zz_error_message(), bad[i].offset));
    CU_ASSERT(ids == (int32_t *)&ids && n == -7);
  }
}

static void test_tokenizer_empty_and_args(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  int32_t *ids = NULL;
  int64_t n = -1;
  CU_ASSERT_EQUAL(zz_tokenizer_encode(tok, NULL, 0, &ids, &n), ZZ_OK);
  CU_ASSERT_EQUAL(n, 0);
  char *text = NULL;
  size_t len = 1;
  CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, ids, 0, &text, &len), ZZ_OK);
  CU_ASSERT(text != NULL && len == 0 && text[0] == '\0');
  free(ids);
  free(text);
  CU_ASSERT_EQUAL(zz_tokenizer_encode(NULL, "a", 1, &ids, &n), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tokenizer_encode(tok, NULL, 1, &ids, &n), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, NULL, 1, &text, &len), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, NULL, -1, &text, &len), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tokenizer_load(ZZ_TOK_DIR, NULL), ZZ_ERR_INVALID_ARG);
}

static void test_tokenizer_decode_out_of_range(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  int32_t vs = (int32_t)zz_tokenizer_vocab_size(tok);
  const int32_t bad[] = {-1, vs, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const int32_t ids[] = {5, 6, bad[i]};
    char *text = (char *)&text;
    size_t len = 99;
    CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, ids, 3, &text, &len), ZZ_ERR_INVALID_ARG);
    CU_ASSERT(zz_tt_contains(zz_error_message(), "position 2"));
    CU_ASSERT(text == (char *)&text && len == 99);
  }
}

/* ================================================================ hand-made files */

/* A temporary tokenizer directory; either file may be left out (NULL). */
typedef struct zz_tt_dir {
  char path[64];
} zz_tt_dir;

static bool zz_tt_write(const char *dir, const char *name, const char *data) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, strlen(data), f) == strlen(data);
  return fclose(f) == 0 && ok;
}

static bool zz_tt_dir_make(zz_tt_dir *d, const char *vocab, const char *merges) {
  snprintf(d->path, sizeof d->path, "/tmp/zz_test_tok_XXXXXX");
  if (!mkdtemp(d->path)) return false;
  return (!vocab || zz_tt_write(d->path, "vocab.json", vocab)) &&
         (!merges || zz_tt_write(d->path, "merges.txt", merges));
}

static void zz_tt_dir_remove(zz_tt_dir *d) {
  char path[128];
  snprintf(path, sizeof path, "%s/vocab.json", d->path);
  unlink(path);
  snprintf(path, sizeof path, "%s/merges.txt", d->path);
  unlink(path);
  rmdir(d->path);
}

/* vocab.json text with byte b's token at id b and then `extra` at 256, 257, ...
 * written here independently of the tokenizer's own byte mapping. The caller frees. */
static char *zz_tt_mini_vocab(const char *const *extra, size_t n_extra) {
  json_t *v = json_object();
  int next = 256;
  for (int b = 0; b < 256; b++) {
    bool self = (b > ' ' && b < 0x7F) || (b >= 0xA1 && b != 0xAD);
    char key[5];
    key[zz_tt_put_utf8(self ? (uint32_t)b : (uint32_t)next++, key)] = '\0';
    json_object_set_new(v, key, json_integer(b));
  }
  for (size_t i = 0; i < n_extra; i++) json_object_set_new(v, extra[i], json_integer(256 + (int)i));
  char *text = json_dumps(v, JSON_COMPACT);
  json_decref(v);
  return text;
}

static const char *const zz_tt_mini_extra[] = {"aa",
                                               "bc",
                                               "aaa",
                                               "abc",
                                               "aaaa",
                                               "\xc4\xa0\x61",
                                               "<s>",
                                               "</s>",
                                               "'t",
                                               "\xc4\x8a\xc4\x8a",
                                               "\xc4\x8d\xc4\x8a",
                                               "\xc4\xa0\xc4\xa0",
                                               "\xc4\x8b\xc4\x8b",
                                               "\xc4\x9c\xc4\x9c",
                                               "a'",
                                               "\xc3\x83\xc2\xa9",
                                               "a\xc3\x83\xc2\xa9",
                                               "\xc3\x82\xc2\xb2",
                                               "1\xc3\x82\xc2\xb2"};
#define ZZ_TT_MINI_N_EXTRA (sizeof zz_tt_mini_extra / sizeof zz_tt_mini_extra[0])
/* In rank order. In byte-mapped text "\xc4\xa0" (U+0120) is a space, U+010A "\n",
 * U+010D "\r", U+010B "\v", U+011C the separator 0x1C; U+00C3 U+00A9 are the two
 * bytes of "\xc3\xa9" (e acute), U+00C2 U+00B2 those of superscript two. */
static const char *const zz_tt_mini_merges[] = {"a a",
                                                "b c",
                                                "aa a",
                                                "a bc",
                                                "aa aa",
                                                "\xc4\xa0 a",
                                                "' t",
                                                "\xc4\x8a \xc4\x8a",
                                                "\xc4\x8d \xc4\x8a",
                                                "\xc4\xa0 \xc4\xa0",
                                                "\xc4\x8b \xc4\x8b",
                                                "\xc4\x9c \xc4\x9c",
                                                "a '",
                                                "\xc3\x83 \xc2\xa9",
                                                "a \xc3\x83\xc2\xa9",
                                                "\xc3\x82 \xc2\xb2",
                                                "1 \xc3\x82\xc2\xb2"};
#define ZZ_TT_MINI_N_MERGES (sizeof zz_tt_mini_merges / sizeof zz_tt_mini_merges[0])

/* merges.txt text of the mini merges: after `head`, each line followed by `eol`,
 * and `blank` extra line ends after every third; the last line has no line end
 * when `last_eol` is false. The caller frees. */
static char *zz_tt_mini_merges_text(const char *head, const char *eol, const char *blank, bool last_eol) {
  size_t cap = 4096, len = (size_t)snprintf(NULL, 0, "%s", head);
  char *t = malloc(cap);
  if (!t) return NULL;
  snprintf(t, cap, "%s", head);
  for (size_t i = 0; i < ZZ_TT_MINI_N_MERGES; i++) {
    bool end = i + 1 < ZZ_TT_MINI_N_MERGES || last_eol;
    len += (size_t)snprintf(t + len, cap - len, "%s%s%s", zz_tt_mini_merges[i], end ? eol : "",
                            i % 3 == 2 ? blank : "");
  }
  return t;
}

/* Expected ids from GPT2TokenizerFast and GPT2Tokenizer on these files (both
 * agree): merges go lowest rank first and leftmost on ties, and never across
 * pre-tokens, so these also pin where the pattern cuts. */
static void zz_tt_check_mini(const zz_tokenizer *tok) {
  static const struct {
    const char *text;
    int n;
    int32_t ids[4];
  } cases[] = {
      {"aaa", 1, {258}},
      {"aaaa", 1, {260}},
      {"aaaaa", 2, {256, 258}},
      {"aaaaaa", 2, {260, 256}},
      {"abc", 1, {259}},
      {" abc", 2, {32, 259}},
      {"aabc", 2, {256, 257}},
      {" aaaa", 2, {32, 260}},
      {"abcabc", 2, {259, 259}},
      {"bca", 2, {257, 97}},
      {"a't", 2, {97, 264}},     /* contraction */
      {"''t", 3, {39, 39, 116}}, /* ... only where a pre-token starts */
      {" 't", 3, {32, 39, 116}},
      {"a'T", 3, {97, 39, 84}}, /* case-sensitive */
      {"a''", 3, {97, 39, 39}}, /* no merge across pre-tokens */
      {"\r\n", 1, {266}},
      {"a\n\n", 2, {97, 265}},         /* trailing spaces stay together */
      {"a\n\nb", 4, {97, 10, 10, 98}}, /* the last space leaves a run before \S */
      {"a\r\nb", 4, {97, 13, 10, 98}},
      {"a  b", 4, {97, 32, 32, 98}},
      {"a   ", 3, {97, 267, 32}},
      {"  a", 2, {32, 261}},
      {"\v\v", 1, {268}},          /* \v is a space */
      {"\x1c\x1c!", 2, {269, 33}}, /* 0x1C is not (White_Space, not isspace) */
      {"\x1c\x1c a", 2, {269, 261}},
      {"a\xc3\xa9", 1, {272}}, /* e acute is a letter */
      {"\xc3\xa9\x31", 2, {271, 49}},
      {"1\xc2\xb2", 1, {274}}, /* superscript two is a number */
      {"x1\xc2\xb2", 2, {120, 274}},
      {"a\xc2\xb2", 2, {97, 273}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int32_t *ids = NULL;
    int64_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, cases[i].text, strlen(cases[i].text), &ids, &n), ZZ_OK);
    bool same = n == cases[i].n;
    for (int k = 0; same && k < n; k++) same = ids[k] == cases[i].ids[k];
    if (!same) fprintf(stderr, "\n  mini case %zu: wrong ids\n", i);
    CU_ASSERT(same);
    free(ids);
  }
}

static void test_tokenizer_merge_order(void) {
  char *vocab = zz_tt_mini_vocab(zz_tt_mini_extra, ZZ_TT_MINI_N_EXTRA);
  char *merges = zz_tt_mini_merges_text("#version: 0.2\n", "\n", "", true);
  zz_tt_dir d;
  CU_ASSERT_FATAL(vocab && merges && zz_tt_dir_make(&d, vocab, merges));
  zz_tokenizer *tok = NULL;
  CU_ASSERT_EQUAL(zz_tokenizer_load(d.path, &tok), ZZ_OK);
  if (tok) {
    CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(tok), 256 + (int64_t)ZZ_TT_MINI_N_EXTRA + 1); /* + <|endoftext|> */
    zz_tt_check_mini(tok);
  }
  zz_tokenizer_free(tok);
  zz_tt_dir_remove(&d);
  free(vocab);
  free(merges);
}

/* No "#version" line, CRLF line ends, blank lines, no line end at the end. */
static void test_tokenizer_merges_layout(void) {
  char *layouts[] = {
      zz_tt_mini_merges_text("", "\n", "", false),
      zz_tt_mini_merges_text("#version: 0.2\r\n", "\r\n", "\r\n", true),
      zz_tt_mini_merges_text("\n\n", "\n", "\n\n", false),
  };
  char *vocab = zz_tt_mini_vocab(zz_tt_mini_extra, ZZ_TT_MINI_N_EXTRA);
  CU_ASSERT_FATAL(vocab && layouts[0] && layouts[1] && layouts[2]);
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    zz_tt_dir d;
    CU_ASSERT_FATAL(zz_tt_dir_make(&d, vocab, layouts[i]));
    zz_tokenizer *tok = NULL;
    CU_ASSERT_EQUAL(zz_tokenizer_load(d.path, &tok), ZZ_OK);
    if (tok) zz_tt_check_mini(tok);
    zz_tokenizer_free(tok);
    zz_tt_dir_remove(&d);
    free(layouts[i]);
  }
  free(vocab);
}

/* Loads a directory made of vocab/merges (NULL: file absent) and checks the
 * status and that the message names `file` and contains `also` (NULL: nothing). */
static void zz_tt_expect_load_error(const char *vocab, const char *merges, zz_status want, const char *file,
                                    const char *also) {
  zz_tt_dir d;
  CU_ASSERT_FATAL(zz_tt_dir_make(&d, vocab, merges));
  zz_tokenizer *tok = (zz_tokenizer *)&tok;
  zz_status st = zz_tokenizer_load(d.path, &tok);
  const char *msg = zz_error_message();
  bool ok = st == want && zz_tt_contains(msg, file) && zz_tt_contains(msg, d.path) &&
            (!also || zz_tt_contains(msg, also)) && tok == (zz_tokenizer *)&tok;
  if (!ok)
    fprintf(stderr, "\n  want %s naming %s and \"%s\", got %s: %s\n", zz_status_str(want), file, also ? also : "",
            zz_status_str(st), msg);
  CU_ASSERT(ok);
  zz_tt_dir_remove(&d);
}

static void test_tokenizer_load_errors(void) {
  char *vocab = zz_tt_mini_vocab(zz_tt_mini_extra, ZZ_TT_MINI_N_EXTRA);
  CU_ASSERT_PTR_NOT_NULL_FATAL(vocab);
  const char *merges = "#version: 0.2\na a\n";

  /* a directory that does not exist */
  zz_tokenizer *tok = (zz_tokenizer *)&tok;
  CU_ASSERT_EQUAL(zz_tokenizer_load("/nonexistent/zz-tokenizer", &tok), ZZ_ERR_IO);
  CU_ASSERT(zz_tt_contains(zz_error_message(), "/nonexistent/zz-tokenizer/vocab.json"));
  CU_ASSERT(tok == (zz_tokenizer *)&tok);

  /* vocab.json */
  zz_tt_expect_load_error(NULL, merges, ZZ_ERR_IO, "vocab.json", NULL);
  zz_tt_expect_load_error("[1, 2, 3]", merges, ZZ_ERR_FORMAT, "vocab.json", "object");
  zz_tt_expect_load_error("{\"a\": 1,", merges, ZZ_ERR_FORMAT, "vocab.json", NULL);
  zz_tt_expect_load_error("", merges, ZZ_ERR_FORMAT, "vocab.json", NULL);
  zz_tt_expect_load_error("{}", merges, ZZ_ERR_FORMAT, "vocab.json", NULL);
  zz_tt_expect_load_error("{\"a\": 1, \"a\": 2}", merges, ZZ_ERR_FORMAT, "vocab.json", NULL);
  zz_tt_expect_load_error("{\"a\": -1}", merges, ZZ_ERR_FORMAT, "vocab.json", "\"a\"");
  zz_tt_expect_load_error("{\"a\": 2147483648}", merges, ZZ_ERR_FORMAT, "vocab.json", "\"a\"");
  zz_tt_expect_load_error("{\"a\": 1.5}", merges, ZZ_ERR_FORMAT, "vocab.json", "\"a\"");
  zz_tt_expect_load_error("{\"a\": \"1\"}", merges, ZZ_ERR_FORMAT, "vocab.json", "\"a\"");
  zz_tt_expect_load_error("{\"a\": 7, \"b\": 7}", merges, ZZ_ERR_FORMAT, "vocab.json", "id 7");
  /* all 256 byte tokens are required */
  zz_tt_expect_load_error("{\"a\": 0}", merges, ZZ_ERR_FORMAT, "vocab.json", "byte 0x00");

  /* merges.txt */
  zz_tt_expect_load_error(vocab, NULL, ZZ_ERR_IO, "merges.txt", NULL);
  zz_tt_expect_load_error(vocab, "#version: 0.2\na a\nbc\n", ZZ_ERR_FORMAT, "merges.txt:3", "bc");
  zz_tt_expect_load_error(vocab, "a a\nb c d\n", ZZ_ERR_FORMAT, "merges.txt:2", NULL);
  zz_tt_expect_load_error(vocab, "a a\n b\n", ZZ_ERR_FORMAT, "merges.txt:2", NULL);
  zz_tt_expect_load_error(vocab, "a a\nb \n", ZZ_ERR_FORMAT, "merges.txt:2", NULL);
  zz_tt_expect_load_error(vocab, "a a\nb  c\n", ZZ_ERR_FORMAT, "merges.txt:2", NULL);
  /* "#version" is only a header on the first line */
  zz_tt_expect_load_error(vocab, "a a\n#version: 0.2\n", ZZ_ERR_FORMAT, "merges.txt:2", NULL);
  /* a part, or the merged token, missing from vocab.json */
  zz_tt_expect_load_error(vocab, "a a\nzz c\n", ZZ_ERR_FORMAT, "merges.txt:2", "\"zz\"");
  zz_tt_expect_load_error(vocab, "a a\nc d\n", ZZ_ERR_FORMAT, "merges.txt:2", "\"cd\"");
  free(vocab);
}

/* ================================================================ size */

static bool zz_tt_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* 256 KiB of real text: a round trip, and no pre-token boundary lost (the ids of
 * the whole equal the ids of the parts when the parts are cut before a newline
 * that follows a non-space, where the pattern always cuts). */
static void test_tokenizer_long_text(void) {
  const zz_tokenizer *tok = zz_tt_fixture();
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  FILE *f = fopen(ZZ_FIXTURES_DIR "/training_text.txt", "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char src[1 << 14];
  size_t src_len = fread(src, 1, sizeof src, f);
  fclose(f);
  /* cut at a line end so repeating it keeps the UTF-8 whole */
  while (src_len > 0 && src[src_len - 1] != '\n') src_len--;
  while (src_len > 1 && src[src_len - 2] == '\n') src_len--; /* end on "x\n" */
  CU_ASSERT_FATAL(src_len > 100 && !zz_tt_ascii_space(src[src_len - 2]));

  size_t reps = (256 << 10) / src_len + 1, len = reps * src_len;
  char *text = malloc(len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  for (size_t r = 0; r < reps; r++) memcpy(text + r * src_len, src, src_len);
  CU_ASSERT(zz_tt_roundtrip(tok, text, len));

  /* each copy starts right after "x\n" and begins with a non-space: a cut there */
  int32_t *all = NULL, *one = NULL;
  int64_t n_all = 0, n_one = 0;
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, text, len, &all, &n_all), ZZ_OK);
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, src, src_len, &one, &n_one), ZZ_OK);
  if (!zz_tt_ascii_space(src[0])) {
    CU_ASSERT_EQUAL(n_all, n_one * (int64_t)reps);
    bool same = n_all == n_one * (int64_t)reps;
    for (int64_t i = 0; same && i < n_all; i++) same = all[i] == one[i % n_one];
    CU_ASSERT(same);
  }
  free(all);
  free(one);
  free(text);
}

/* ================================================================ Hugging Face's text (issue #21 item 5) */

static zz_tokenizer *zz_tt_load_fixture(const char *name) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, name);
  zz_tokenizer *tok = NULL;
  if (zz_tokenizer_load(dir, &tok) != ZZ_OK) fprintf(stderr, "\n  %s: %s\n", dir, zz_error_message());
  return tok;
}

/* Id sequences whose bytes are not UTF-8 (decode_cases.json, made by
 * make_hf_text_fixtures.py) decode to the string transformers' decode gives: a
 * ByteFallback run of <0xNN> tokens that is not UTF-8 becomes one U+FFFD per
 * token, ByteLevel bytes one U+FFFD per maximal ill-formed subpart. */
static void test_tokenizer_decode_like_hf(void) {
  json_error_t jerr;
  json_t *all = json_load_file(ZZ_FIXTURES_DIR "/decode_cases.json", 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(all);
  CU_ASSERT_FATAL(json_object_size(all) >= 7);
  int checked = 0, replaced = 0;
  const char *name;
  json_t *cases;
  json_object_foreach(all, name, cases) {
    zz_tokenizer *tok = zz_tt_load_fixture(name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    int bad = 0;
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
      json_t *jids = json_object_get(c, "ids"), *want = json_object_get(c, "decoded");
      CU_ASSERT_FATAL(json_is_array(jids) && json_is_string(want));
      int32_t ids[64];
      size_t n = json_array_size(jids);
      CU_ASSERT_FATAL(n <= 64);
      for (size_t k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(jids, k));
      char *text = NULL;
      size_t len = 0;
      CU_ASSERT_EQUAL_FATAL(zz_tokenizer_decode(tok, ids, (int64_t)n, &text, &len), ZZ_OK);
      bool same = len == json_string_length(want) && memcmp(text, json_string_value(want), len) == 0;
      if (!same && bad++ < 5) {
        fprintf(stderr, "\n  %s case %zu: decoded", name, i);
        for (size_t k = 0; k < len; k++) fprintf(stderr, " %02X", (uint8_t)text[k]);
        fprintf(stderr, ", Hugging Face \"%s\"\n", json_string_value(want));
      }
      CU_ASSERT(same);
      checked++;
      replaced += strstr(json_string_value(want), "\xEF\xBF\xBD") != NULL;
      free(text);
    }
    zz_tokenizer_free(tok);
  }
  CU_ASSERT(checked >= 500);
  CU_ASSERT(replaced >= 300);
  json_decref(all);
}

/* The two rules side by side, on hand-picked ids of tok-llama2 (<0xNN> is id 3 +
 * NN) and tiny-opt (byte-level singles): "\xE4\xB8" then "A" */
static void test_tokenizer_decode_replacement_rules(void) {
  static const struct {
    const char *dir;
    int n;
    int32_t ids[4];
    const char *want;
  } cases[] = {
      /* ByteFallback: the whole run of byte tokens is bad, so each token is U+FFFD,
       * even the valid "A" inside it */
      {"tok-llama2", 3, {3 + 0xE4, 3 + 0xB8, 3 + 0x41}, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"tok-llama2", 3, {3 + 0xE4, 3 + 0xB8, 3 + 0xAD}, "\xE4\xB8\xAD"},
      /* ByteLevel: "\xE4\xB8" is one maximal subpart, "A" stays */
      {"tiny-opt",
       3,
       {164, 120, 36},
       "\xEF\xBF\xBD"
       "A"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zz_tokenizer *tok = zz_tt_load_fixture(cases[i].dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, cases[i].ids, cases[i].n, &text, &len), ZZ_OK);
    CU_ASSERT(text && len == strlen(cases[i].want) && memcmp(text, cases[i].want, len) == 0);
    free(text);
    zz_tokenizer_free(tok);
  }
}

/* An OPT directory as facebook/opt-* publishes it (tokenizer_config.json and
 * special_tokens_map.json register "</s>" and "<pad>"): those written in the text
 * are their ids, as AutoTokenizer gives them (tok-opt/cases.json); "<s>" and
 * "<unk>", which are not registered, stay text. */
static void test_tokenizer_opt_special_text(void) {
  zz_tokenizer *tok = zz_tt_load_fixture("tok-opt");
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  json_error_t jerr;
  json_t *cases = json_load_file(ZZ_FIXTURES_DIR "/tok-opt/cases.json", 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
  CU_ASSERT_FATAL(json_array_size(cases) >= 15);
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *text = json_string_value(json_object_get(c, "text"));
    CU_ASSERT_FATAL(text != NULL);
    int32_t *ids = NULL;
    int64_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, text, strlen(text), &ids, &n), ZZ_OK);
    bool same = zz_test_ids_equal(ids, n, json_object_get(c, "ids"));
    if (!same) fprintf(stderr, "\n  tok-opt case %zu (\"%s\"): ids differ from Hugging Face\n", i, text);
    CU_ASSERT(same);
    free(ids);
  }
  int32_t *ids = NULL;
  int64_t n = 0;
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, "a</s>b", 6, &ids, &n), ZZ_OK);
  CU_ASSERT(n == 3 && ids[1] == 2);
  free(ids);
  CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(tok), 1003); /* every registered token is in vocab.json */
  json_decref(cases);
  zz_tokenizer_free(tok);
}

/* A vocab.json directory's special-token files: a token missing from the
 * vocabulary takes the next id (as transformers adds it), a registered token must
 * be a token, null names none, and a bad file is named. The ids of the cases that
 * load are what GPT2TokenizerFast and GPT2Tokenizer (transformers 4.46.3) give on
 * the same files. */
static void test_tokenizer_opt_special_files(void) {
  char *vocab = zz_tt_mini_vocab(zz_tt_mini_extra, ZZ_TT_MINI_N_EXTRA);
  char *merges = zz_tt_mini_merges_text("#version: 0.2\n", "\n", "", true);
  CU_ASSERT_FATAL(vocab && merges);
  static const struct {
    const char *config, *map;
    const char *text;
    int n;
    int32_t ids[3];
    const char *error; /* NULL: loads */
  } cases[] = {
      /* GPT2Tokenizer's defaults: "<|endoftext|>" added as id 256 + extra */
      {NULL, NULL, "a<|endoftext|>", 2, {97, 256 + ZZ_TT_MINI_N_EXTRA}, NULL},
      /* null: no token; "a" registered as pad is special (HF matches it in "aaa") */
      {"{\"bos_token\": null, \"eos_token\": null, \"unk_token\": null, \"pad_token\": \"a\", "
       "\"model_max_length\": 1000000000000000019884624838656}",
       NULL,
       "aaa",
       3,
       {97, 97, 97},
       NULL},
      /* the map wins over the config; additional_special_tokens; new ids in order */
      {"{\"bos_token\": \"<x>\"}",
       "{\"bos_token\": {\"content\": \"<y>\"}, \"additional_special_tokens\": [\"<z>\"]}",
       "<z><y>",
       2,
       {256 + ZZ_TT_MINI_N_EXTRA + 2, 256 + ZZ_TT_MINI_N_EXTRA},
       NULL},
      {"{\"added_tokens_decoder\": {\"275\": {\"content\": \"<q>\", \"special\": true}}}",
       NULL,
       "b<q>",
       2,
       {98, 256 + ZZ_TT_MINI_N_EXTRA},
       NULL},
      {"{\"pad_token\": 5}", NULL, NULL, 0, {0}, "tokenizer_config.json: pad_token must be a token"},
      {NULL,
       "{\"mask_token\": {\"content\": \"<m>\", \"lstrip\": true}}",
       NULL,
       0,
       {0},
       "special_tokens_map.json: mask_token: lstrip true is not supported"},
      {"[1]", NULL, NULL, 0, {0}, "tokenizer_config.json: not a JSON object"},
      {"{\"added_tokens_decoder\": {\"0\": {\"content\": \"b\"}}}",
       NULL,
       NULL,
       0,
       {0},
       "added token \"b\" has id 0 but the vocabulary gives it 98"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zz_tt_dir d;
    CU_ASSERT_FATAL(zz_tt_dir_make(&d, vocab, merges));
    char path[4200];
    const char *files[2] = {cases[i].config, cases[i].map};
    const char *names[2] = {"tokenizer_config.json", "special_tokens_map.json"};
    for (int f = 0; f < 2; f++) {
      if (!files[f]) continue;
      snprintf(path, sizeof path, "%s/%s", d.path, names[f]);
      FILE *fp = fopen(path, "w");
      CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
      fputs(files[f], fp);
      fclose(fp);
    }
    zz_tokenizer *tok = NULL;
    zz_status st = zz_tokenizer_load(d.path, &tok);
    if (cases[i].error) {
      CU_ASSERT_NOT_EQUAL(st, ZZ_OK);
      bool named = st != ZZ_OK && zz_tt_contains(zz_error_message(), cases[i].error);
      if (!named) fprintf(stderr, "\n  special files case %zu: \"%s\"\n", i, st ? zz_error_message() : "loaded");
      CU_ASSERT(named);
    } else {
      CU_ASSERT_EQUAL_FATAL(st, ZZ_OK);
      int32_t *ids = NULL;
      int64_t n = 0;
      CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, cases[i].text, strlen(cases[i].text), &ids, &n), ZZ_OK);
      bool same = n == cases[i].n;
      for (int k = 0; same && k < n; k++) same = ids[k] == cases[i].ids[k];
      if (!same) {
        fprintf(stderr, "\n  special files case %zu:", i);
        for (int64_t k = 0; k < n; k++) fprintf(stderr, " %d", ids[k]);
        fprintf(stderr, "\n");
      }
      CU_ASSERT(same);
      free(ids);
    }
    zz_tokenizer_free(tok);
    for (int f = 0; f < 2; f++) {
      snprintf(path, sizeof path, "%s/%s", d.path, names[f]);
      unlink(path);
    }
    zz_tt_dir_remove(&d);
  }
  free(vocab);
  free(merges);
}

/* ================================================================ a text's bytes against a prompt's tokens */

/* zz_tokenizer_text_bound never refuses a text that fits: texts made of each
 * tokenizer's longest token (the most bytes a token can stand for), of spaces and of
 * mixed scripts encode to n ids with bytes <= bound(n); the families zigzag runs
 * give a bound. */
static void test_tokenizer_text_bound(void) {
  static const char *const dirs[] = {"tok-opt",     "tok-gpt2-json",  "tok-llama2", "tok-llama2-hub", "tok-llama3",
                                     "tok-mistral", "tok-mistral-v3", "tok-phi3",   "tok-qwen2",      "tok-spm-split"};
  static const char *const texts[] = {
      "                                        ", "Liberty and justice for all. ",
      "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a",
      "0123456789+-*/ 0123456789"};
  int bounded = 0;
  for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
    zz_tokenizer *tok = zz_tt_load_fixture(dirs[d]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    if (zz_tokenizer_text_bound(tok, 1) == SIZE_MAX) {
      zz_tokenizer_free(tok);
      continue;
    }
    CU_ASSERT_EQUAL(zz_tokenizer_text_bound(tok, 0), 0);
    bounded++;
    /* the decoded text of the token with the longest decoded bytes */
    int64_t best = 0;
    size_t best_len = 0;
    for (int32_t id = 0; id < zz_tokenizer_vocab_size(tok); id++) {
      char *t = NULL;
      size_t len = 0;
      if (zz_tokenizer_decode(tok, &id, 1, &t, &len) == ZZ_OK && len > best_len) {
        best = id;
        best_len = len;
      }
      zz_error_clear();
      free(t);
    }
    char *one = NULL;
    size_t one_len = 0;
    int32_t bid = (int32_t)best;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_decode(tok, &bid, 1, &one, &one_len), ZZ_OK);
    for (size_t k = 0; k <= sizeof texts / sizeof texts[0]; k++) {
      const char *piece = k < sizeof texts / sizeof texts[0] ? texts[k] : one;
      size_t plen = strlen(piece), reps = 64, len = plen * reps;
      char *text = malloc(len + 1);
      CU_ASSERT_PTR_NOT_NULL_FATAL(text);
      for (size_t r = 0; r < reps; r++) memcpy(text + r * plen, piece, plen);
      text[len] = 0;
      int32_t *ids = NULL;
      int64_t n = 0;
      CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, text, len, &ids, &n), ZZ_OK);
      CU_ASSERT(len <= zz_tokenizer_text_bound(tok, n));
      if (len > zz_tokenizer_text_bound(tok, n))
        fprintf(stderr, "\n  %s: %zu bytes in %lld tokens, bound %zu\n", dirs[d], len, (long long)n,
                zz_tokenizer_text_bound(tok, n));
      free(ids);
      free(text);
    }
    free(one);
    zz_tokenizer_free(tok);
  }
  CU_ASSERT(bounded >= 6);
}

/* ================================================================ registration */

void zz_test_tokenizer_register(void) {
  CU_pSuite s = CU_add_suite("tokenizer", zz_tt_suite_init, zz_tt_suite_clean);
  if (!s) return;
  CU_add_test(s, "fixture cases match Hugging Face", test_tokenizer_fixture_cases);
  CU_add_test(s, "vocab size", test_tokenizer_vocab_size);
  CU_add_test(s, "special tokens", test_tokenizer_special_tokens);
  CU_add_test(s, "unicode classes", test_tokenizer_unicode_classes);
  CU_add_test(s, "round trip: tricky strings", test_tokenizer_roundtrip_tricky);
  CU_add_test(s, "round trip: random UTF-8", test_tokenizer_roundtrip_random);
  CU_add_test(s, "invalid UTF-8 names the offset", test_tokenizer_invalid_utf8);
  CU_add_test(s, "empty text and bad arguments", test_tokenizer_empty_and_args);
  CU_add_test(s, "decode rejects unknown ids", test_tokenizer_decode_out_of_range);
  CU_add_test(s, "merge order: rank, then leftmost", test_tokenizer_merge_order);
  CU_add_test(s, "merges.txt layouts", test_tokenizer_merges_layout);
  CU_add_test(s, "load errors name the file", test_tokenizer_load_errors);
  CU_add_test(s, "256 KiB of text", test_tokenizer_long_text);
  CU_add_test(s, "a text's bytes bound its tokens (refused before tokenizing)", test_tokenizer_text_bound);
  CU_add_test(s, "decode of ill-formed bytes as Hugging Face", test_tokenizer_decode_like_hf);
  CU_add_test(s, "decode: ByteFallback and ByteLevel replacement", test_tokenizer_decode_replacement_rules);
  CU_add_test(s, "OPT: </s> in the text is the special token", test_tokenizer_opt_special_text);
  CU_add_test(s, "vocab.json: special-token files", test_tokenizer_opt_special_files);
}
