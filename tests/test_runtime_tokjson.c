/*
 * test_runtime_tokjson.c — tokenizer.json against the tokenizers library.
 *
 * The five fixture directories (tests/fixtures/tok-*, written by
 * make_tokenizer_json_fixtures.py) each hold cases.json: per text the ids of
 * Tokenizer.encode(add_special_tokens=False), the BOS AutoTokenizer puts first, and
 * Tokenizer.decode of the ids. Beyond them: which file a directory with both kinds
 * is read from, round trips of random text, and refused files.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regex_impl.h" /* the Split patterns' matcher, fuzzed below */
#include "zz_tests.h"

#ifndef ZZ_FIXTURES_DIR
#error "ZZ_FIXTURES_DIR must name tests/fixtures"
#endif

static zz_tokenizer *zz_tj_load(const char *name) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", ZZ_FIXTURES_DIR, name);
  zz_tokenizer *tok = NULL;
  if (zz_tokenizer_load(dir, &tok) != ZZ_OK) fprintf(stderr, "\n  %s: %s\n", dir, zz_error_message());
  return tok;
}

/* ================================================================ golden cases */

/* Every case of one directory: ids exact, BOS as AutoTokenizer adds it, decode as
 * the library decodes. */
static void zz_tj_cases(const char *name, int *round_trips) {
  zz_tokenizer *tok = zz_tj_load(name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s/cases.json", ZZ_FIXTURES_DIR, name);
  json_error_t jerr;
  json_t *cases = json_load_file(path, 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
  CU_ASSERT_FATAL(json_array_size(cases) >= 60);
  int32_t bos = -2, eos = -2;
  CU_ASSERT(zz_tokenizer_specials(tok, &bos, &eos));
  CU_ASSERT_EQUAL(eos, -1);
  int decoded_checked = 0;
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *text = json_string_value(json_object_get(c, "text"));
    size_t len = json_string_length(json_object_get(c, "text"));
    json_t *want = json_object_get(c, "ids");
    json_t *want_bos = json_object_get(c, "bos");
    const char *decoded = json_string_value(json_object_get(c, "decoded"));
    CU_ASSERT_FATAL(text && json_is_array(want) && decoded);
    CU_ASSERT_EQUAL(bos, json_is_integer(want_bos) ? (int32_t)json_integer_value(want_bos) : -1);
    int32_t *ids = NULL;
    int64_t n = -1;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, text, len, &ids, &n), ZZ_OK);
    bool same = zz_test_ids_equal(ids, n, want);
    if (!same) {
      fprintf(stderr, "\n  %s case %zu (\"%s\"): got", name, i, text);
      for (int64_t k = 0; k < n; k++) fprintf(stderr, " %d", ids[k]);
      fprintf(stderr, "\n");
    }
    CU_ASSERT(same);
    char *back = NULL;
    size_t back_len = 0;
    CU_ASSERT_EQUAL(zz_tokenizer_decode(tok, ids, n, &back, &back_len), ZZ_OK);
    if (back) {
      bool eq = back_len == strlen(decoded) && memcmp(back, decoded, back_len) == 0;
      if (!eq) fprintf(stderr, "\n  %s case %zu: decoded \"%s\", the library \"%s\"\n", name, i, back, decoded);
      CU_ASSERT(eq);
      decoded_checked++;
      *round_trips += back_len == len && memcmp(back, text, len) == 0;
    }
    free(back);
    free(ids);
  }
  CU_ASSERT(decoded_checked >= 60);
  json_decref(cases);
  zz_tokenizer_free(tok);
}

static void test_tokjson_llama3(void) {
  int rt = 0;
  zz_tj_cases("tok-llama3", &rt);
  CU_ASSERT(rt >= 60); /* byte-level: every case round trips */
}
static void test_tokjson_llama2(void) {
  int rt = 0;
  zz_tj_cases("tok-llama2", &rt);
  CU_ASSERT(rt >= 60);
}
static void test_tokjson_llama2_meta(void) {
  int rt = 0;
  zz_tj_cases("tok-llama2-meta", &rt);
  CU_ASSERT(rt >= 55);
}
static void test_tokjson_spm_split(void) {
  int rt = 0;
  zz_tj_cases("tok-spm-split", &rt);
}
static void test_tokjson_gpt2(void) {
  int rt = 0;
  zz_tj_cases("tok-gpt2-json", &rt);
}

/* The families of issue 45 (make_tokenizer_family_fixtures.py): Qwen2/2.5/3's NFC
 * and Split regex, Mistral v0.1 and v0.3, Phi-3's added tokens with rstrip. */
static void test_tokjson_qwen2(void) {
  int rt = 0;
  zz_tj_cases("tok-qwen2", &rt);
  CU_ASSERT(rt >= 75); /* byte-level: all but the texts NFC changes */
}
static void test_tokjson_mistral(void) {
  int rt = 0;
  zz_tj_cases("tok-mistral", &rt);
  CU_ASSERT(rt >= 75);
  zz_tj_cases("tok-mistral-v3", &rt);
}
static void test_tokjson_phi3(void) {
  int rt = 0;
  zz_tj_cases("tok-phi3", &rt);
  CU_ASSERT(rt >= 70);
}

/* Random UTF-8 (all planes, whitespace, digits, the added tokens' characters)
 * encodes and decodes back to itself with the byte-level and byte-fallback files. */
static void test_tokjson_random_round_trip(void) {
  static const char *const names[] = {"tok-llama3", "tok-llama2"};
  zz_rng rng;
  zz_rng_seed(&rng, 20240613, 0);
  for (int d = 0; d < 2; d++) {
    zz_tokenizer *tok = zz_tj_load(names[d]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    int bad = 0;
    for (int it = 0; it < 300; it++) {
      char text[400];
      size_t len = 0;
      while (len < 300) {
        uint64_t r = zz_rng_next(&rng);
        uint32_t cp;
        switch (r % 6) {
          case 0: cp = (uint32_t)(" \n\t<|>'s"[(r >> 8) % 8]); break;
          case 1: cp = 'a' + (uint32_t)((r >> 8) % 26); break;
          case 2: cp = '0' + (uint32_t)((r >> 8) % 10); break;
          case 3: cp = 0x80 + (uint32_t)((r >> 8) % 0x780); break;
          case 4: cp = 0x800 + (uint32_t)((r >> 8) % 0xF800); break;
          default: cp = 0x10000 + (uint32_t)((r >> 8) % 0x100000); break;
        }
        /* no surrogates; no U+2581, which the SentencePiece-style files decode as a
         * space (the library does not round trip it either) */
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581) continue;
        if (cp < 0x80) text[len++] = (char)cp;
        else if (cp < 0x800) {
          text[len++] = (char)(0xC0 | (cp >> 6));
          text[len++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          text[len++] = (char)(0xE0 | (cp >> 12));
          text[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
          text[len++] = (char)(0x80 | (cp & 0x3F));
        } else {
          text[len++] = (char)(0xF0 | (cp >> 18));
          text[len++] = (char)(0x80 | ((cp >> 12) & 0x3F));
          text[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
          text[len++] = (char)(0x80 | (cp & 0x3F));
        }
      }
      /* the legacy LLaMA-2 files put "▁" before the text and decode it back to a
       * space that Strip removes: a text starting with a space loses it */
      if (d == 1 && text[0] == ' ') text[0] = 'x';
      int32_t *ids = NULL;
      int64_t n = 0;
      char *back = NULL;
      size_t bl = 0;
      bool ok = zz_tokenizer_encode(tok, text, len, &ids, &n) == ZZ_OK &&
                zz_tokenizer_decode(tok, ids, n, &back, &bl) == ZZ_OK && bl == len && memcmp(back, text, len) == 0;
      if (!ok) {
        fprintf(stderr, "\n  %s: round trip failed (%zu bytes):", names[d], len);
        for (size_t k = 0; k < len && k < 48; k++) fprintf(stderr, " %02X", (uint8_t)text[k]);
        fprintf(stderr, "\n");
      }
      bad += !ok;
      free(ids);
      free(back);
    }
    CU_ASSERT_EQUAL(bad, 0);
    zz_tokenizer_free(tok);
  }
}

/* ================================================================ which file */

static void zz_tj_copy(const char *from_dir, const char *name, const char *to_dir) {
  char src[4200], dst[4200];
  snprintf(src, sizeof src, "%s/%s/%s", ZZ_FIXTURES_DIR, from_dir, name);
  snprintf(dst, sizeof dst, "%s/%s", to_dir, name);
  size_t len = 0;
  char *data = zz_test_read_file(src, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(data);
  CU_ASSERT_EQUAL(zz_test_write_file(dst, data, len), 0);
  free(data);
}

static void zz_tj_rm(const char *dir) {
  static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"};
  char p[4200];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  rmdir(dir);
}

/* AutoTokenizer reads tokenizer.json when a directory has both kinds. */
static void test_tokjson_preferred(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  zz_tj_copy("tiny-opt", "vocab.json", dir);
  zz_tj_copy("tiny-opt", "merges.txt", dir);
  zz_tokenizer *tok = NULL;
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  CU_ASSERT_FALSE(zz_tokenizer_has_json(dir));
  CU_ASSERT_FALSE(zz_tokenizer_specials(tok, NULL, NULL));
  CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(tok), 1004); /* 1003 + GPT2Tokenizer's <|endoftext|> */
  zz_tokenizer_free(tok);
  zz_tj_copy("tok-llama3", "tokenizer.json", dir);
  CU_ASSERT_TRUE(zz_tokenizer_has_json(dir));
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  CU_ASSERT_EQUAL(zz_tokenizer_vocab_size(tok), 707); /* 700 + 7 added */
  int32_t bos = -1;
  CU_ASSERT(zz_tokenizer_specials(tok, &bos, NULL));
  CU_ASSERT_EQUAL(bos, 700);
  zz_tokenizer_free(tok);
  zz_tj_rm(dir);
}

/* GPT-2's vocab.json must spell every byte: the first one missing is named, with
 * its byte-level character (byte 0 is U+0100, "\xc4\x80"). */
static void test_vocab_missing_byte(void) {
  char dir[4096], p[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(p, sizeof p, "%s/vocab.json", dir);
  CU_ASSERT_EQUAL_FATAL(zz_test_write_file(p, "{\"a\": 0}", 8), 0);
  snprintf(p, sizeof p, "%s/merges.txt", dir);
  CU_ASSERT_EQUAL_FATAL(zz_test_write_file(p, "#version: 0.2\n", 13), 0);
  zz_tokenizer *tok = NULL;
  CU_ASSERT_EQUAL(zz_tokenizer_load(dir, &tok), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NULL(tok);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "no token for byte 0x00 (\"\xc4\x80\")"));
  zz_tj_rm(dir);
}

/* ================================================================ refused files */

/* Loads fixture `from`'s tokenizer.json after edit(root), expecting a refusal whose
 * message holds `want` and names the file. */
static void zz_tj_refused(const char *from, void (*edit)(json_t *root), const char *want) {
  char src[4200], dir[4096], dst[4200];
  snprintf(src, sizeof src, "%s/%s/tokenizer.json", ZZ_FIXTURES_DIR, from);
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
  json_error_t jerr;
  json_t *root = json_load_file(src, 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  edit(root);
  CU_ASSERT_EQUAL_FATAL(json_dump_file(root, dst, 0), 0);
  json_decref(root);
  zz_tokenizer *tok = NULL;
  zz_error_clear();
  zz_status st = zz_tokenizer_load(dir, &tok);
  CU_ASSERT_NOT_EQUAL(st, ZZ_OK);
  CU_ASSERT_PTR_NULL(tok);
  const char *msg = zz_error_message();
  bool ok = strstr(msg, want) && strstr(msg, "tokenizer.json");
  if (!ok) fprintf(stderr, "\n  wanted \"%s\" in: %s\n", want, msg);
  CU_ASSERT(ok);
  zz_tokenizer_free(tok);
  zz_tj_rm(dir);
}

static void zz_set(json_t *o, const char *key, json_t *v) { json_object_set_new(o, key, v); }
static json_t *zz_tj_model(json_t *root) { return json_object_get(root, "model"); }

static void edit_unigram(json_t *r) { zz_set(zz_tj_model(r), "type", json_string("Unigram")); }
static void edit_dropout(json_t *r) { zz_set(zz_tj_model(r), "dropout", json_real(0.1)); }
static void edit_suffix(json_t *r) { zz_set(zz_tj_model(r), "end_of_word_suffix", json_string("</w>")); }
static void edit_no_vocab(json_t *r) { json_object_del(zz_tj_model(r), "vocab"); }
static void edit_bad_merge(json_t *r) {
  json_array_set_new(json_object_get(zz_tj_model(r), "merges"), 3, json_integer(7));
}
static void edit_merge_unknown(json_t *r) {
  json_array_set_new(json_object_get(zz_tj_model(r), "merges"), 0, json_pack("[ss]", "no-such-token", "x"));
}
static void edit_merge_one_string(json_t *r) {
  json_array_set_new(json_object_get(zz_tj_model(r), "merges"), 0, json_string("nospace"));
}
static void edit_dup_id(json_t *r) { zz_set(json_object_get(zz_tj_model(r), "vocab"), "brand-new", json_integer(5)); }
static void edit_unk(json_t *r) { zz_set(zz_tj_model(r), "unk_token", json_string("<nope>")); }
static void edit_nfkc(json_t *r) { zz_set(r, "normalizer", json_pack("{ss}", "type", "NFKC")); }
static void edit_regex_replace(json_t *r) {
  zz_set(r, "normalizer", json_pack("{ss s{ss} ss}", "type", "Replace", "pattern", "Regex", " +", "content", "_"));
}
static void edit_split(json_t *r) {
  json_t *split = json_array_get(json_object_get(json_object_get(r, "pre_tokenizer"), "pretokenizers"), 0);
  zz_set(json_object_get(split, "pattern"), "Regex", json_string("\\w+|\\s+"));
}
/* Qwen2's pre-tokenizer with another Split pattern. */
static void zz_tj_split_pattern(json_t *r, const char *pattern) {
  json_t *split = json_array_get(json_object_get(json_object_get(r, "pre_tokenizer"), "pretokenizers"), 0);
  zz_set(json_object_get(split, "pattern"), "Regex", json_string(pattern));
}
static void edit_split_lu(json_t *r) { zz_tj_split_pattern(r, "\\p{Lu}+|\\s+"); }
static void edit_split_behind(json_t *r) { zz_tj_split_pattern(r, "(?<=a)b"); }
static void edit_split_lazy(json_t *r) { zz_tj_split_pattern(r, "\\p{L}+?"); }
static void edit_split_group(json_t *r) { zz_tj_split_pattern(r, "(?:ab)+"); }
static void edit_split_anchor(json_t *r) { zz_tj_split_pattern(r, "^\\s+"); }
static void edit_split_open(json_t *r) { zz_tj_split_pattern(r, "(?:ab"); }
static void edit_nfd(json_t *r) { zz_set(r, "normalizer", json_pack("{ss}", "type", "NFD")); }
static void edit_bert_pre(json_t *r) { zz_set(r, "pre_tokenizer", json_pack("{ss}", "type", "BertPreTokenizer")); }
static void edit_decoder_null(json_t *r) { zz_set(r, "decoder", json_null()); }
static void edit_decoder_wp(json_t *r) { zz_set(r, "decoder", json_pack("{ss}", "type", "WordPiece")); }
static void edit_single_word(json_t *r) {
  zz_set(json_array_get(json_object_get(r, "added_tokens"), 0), "single_word", json_true());
}
static void edit_added_id(json_t *r) {
  zz_set(json_array_get(json_object_get(r, "added_tokens"), 0), "id", json_integer(5));
}
static void edit_roberta(json_t *r) { zz_set(r, "post_processor", json_pack("{ss}", "type", "RobertaProcessing")); }
static void edit_prepend_scheme(json_t *r) {
  zz_set(json_object_get(r, "pre_tokenizer"), "prepend_scheme", json_string("sometimes"));
}

static void test_tokjson_refused(void) {
  zz_tj_refused("tok-llama3", edit_unigram, "model.type \"Unigram\"");
  zz_tj_refused("tok-llama3", edit_dropout, "model.dropout");
  zz_tj_refused("tok-llama3", edit_suffix, "model.end_of_word_suffix");
  zz_tj_refused("tok-llama3", edit_no_vocab, "model.vocab");
  zz_tj_refused("tok-llama3", edit_bad_merge, "model.merges[3]");
  zz_tj_refused("tok-llama3", edit_merge_unknown, "\"no-such-token\" is not in the vocabulary");
  zz_tj_refused("tok-llama2", edit_merge_one_string, "model.merges[0]");
  zz_tj_refused("tok-llama3", edit_dup_id, "both have id 5");
  zz_tj_refused("tok-llama2", edit_unk, "model.unk_token");
  zz_tj_refused("tok-llama3", edit_nfkc, "normalizer type \"NFKC\"");
  zz_tj_refused("tok-llama2", edit_regex_replace, "Regex pattern");
  zz_tj_refused("tok-llama3", edit_split, "Split pattern");
  zz_tj_refused("tok-qwen2", edit_split_lu, "a Unicode class other than \\p{L} and \\p{N} (\"\\p{Lu}");
  zz_tj_refused("tok-qwen2", edit_split_behind, "a (? group other than");
  zz_tj_refused("tok-qwen2", edit_split_lazy, "a lazy or possessive repeat");
  zz_tj_refused("tok-qwen2", edit_split_group, "a repeated group (\"+\" at offset 6)");
  zz_tj_refused("tok-qwen2", edit_split_anchor, "an anchor");
  zz_tj_refused("tok-qwen2", edit_split_open, "an unclosed (");
  zz_tj_refused("tok-qwen2", edit_nfd, "normalizer type \"NFD\"");
  zz_tj_refused("tok-llama3", edit_bert_pre, "pre_tokenizer type \"BertPreTokenizer\"");
  zz_tj_refused("tok-llama3", edit_decoder_null, "decoder is null");
  zz_tj_refused("tok-llama3", edit_decoder_wp, "\"WordPiece\"");
  zz_tj_refused("tok-llama3", edit_single_word, "single_word true is not supported");
  zz_tj_refused("tok-llama2", edit_added_id, "model.vocab gives it 0");
  zz_tj_refused("tok-llama3", edit_roberta, "post_processor type \"RobertaProcessing\"");
  zz_tj_refused("tok-llama2-meta", edit_prepend_scheme, "prepend_scheme \"sometimes\"");
}

/* tok-qwen2 with its Split pattern replaced, written to a fresh directory. */
static zz_tokenizer *zz_tj_with_pattern(const char *pattern, char *dir, size_t dir_size) {
  char src[4200], dst[4200];
  snprintf(src, sizeof src, "%s/tok-qwen2/tokenizer.json", ZZ_FIXTURES_DIR);
  snprintf(dir, dir_size, "%s", zz_test_tmpdir());
  snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
  json_error_t jerr;
  json_t *root = json_load_file(src, 0, &jerr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  zz_tj_split_pattern(root, pattern);
  CU_ASSERT_EQUAL_FATAL(json_dump_file(root, dst, 0), 0);
  json_decref(root);
  zz_tokenizer *tok = NULL;
  CU_ASSERT_EQUAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  return tok;
}

/* Split patterns other than the shipped ones: text no match covers is a piece of
 * its own, lookahead and (?i:) sets work, empty matches split as Oniguruma's
 * find_iter does (ids from tokenizers 0.23.3 with the same edit: make_tokenizer_
 * family_fixtures.py --split-goldens); a pattern that backtracks without bound is
 * an error, not a hang. */
static void test_tokjson_split_patterns(void) {
  static const struct {
    const char *pattern, *text;
    int32_t ids[24];
    int n;
  } cases[] = {
      {"\\p{L}+|[0-9]{2}",
       "Hello 12345 world!!  ok",
       {359, 287, 78, 220, 16, 17, 18, 19, 20, 220, 86, 278, 494, 0, 0, 324, 78, 74},
       18},
      {"[^\\s]+(?=\\s)|(?i:[A-C])",
       "Hello 12345 world!!  ok",
       {359, 287, 78, 220, 16, 17, 18, 19, 20, 220, 86, 278, 494, 0, 0, 220, 260, 74},
       18},
      {"[^\\s]+(?=\\s)|(?i:[A-C])",
       "abc  Cab\n\n12 3 45678",
       {364, 66, 324, 34, 364, 198, 198, 16, 17, 220, 18, 220, 19, 20, 21, 22, 23},
       17},
      /* empty matches (Oniguruma's find_iter): the text between falls into characters */
      {"l{,2}",
       "Hello 12345 world!!  ok",
       {39, 68, 287, 78, 220, 16, 17, 18, 19, 20, 220, 86, 78, 81, 75, 67, 0, 0, 220, 220, 78, 74},
       22},
      /* {,} is no repeat but the literal text "{,}" */
      {"o{,}|\\s+",
       "Hello 12345 world!!  ok",
       {359, 287, 78, 220, 16, 17, 18, 19, 20, 220, 86, 278, 494, 0, 0, 324, 78, 74},
       18},
  };
  char dir[4096];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    zz_tokenizer *tok = zz_tj_with_pattern(cases[c].pattern, dir, sizeof dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
    int32_t *ids = NULL;
    int64_t n = 0;
    CU_ASSERT_EQUAL_FATAL(zz_tokenizer_encode(tok, cases[c].text, strlen(cases[c].text), &ids, &n), ZZ_OK);
    bool same = n == cases[c].n && memcmp(ids, cases[c].ids, (size_t)n * sizeof *ids) == 0;
    if (!same) fprintf(stderr, "\n  pattern %s on \"%s\": %lld ids\n", cases[c].pattern, cases[c].text, (long long)n);
    CU_ASSERT(same);
    free(ids);
    zz_tokenizer_free(tok);
    zz_tj_rm(dir);
  }
  /* each start tries every split of the run among four stars */
  zz_tokenizer *tok = zz_tj_with_pattern("\\p{L}*\\p{L}*\\p{L}*\\p{L}*x", dir, sizeof dir);
  CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
  char text[3001];
  memset(text, 'a', 3000);
  text[3000] = '\0';
  int32_t *ids = NULL;
  int64_t n = 0;
  zz_error_clear();
  CU_ASSERT_EQUAL(zz_tokenizer_encode(tok, text, 3000, &ids, &n), ZZ_ERR_UNSUPPORTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "backtracks too much"));
  free(ids);
  zz_tokenizer_free(tok);
  zz_tj_rm(dir);
}

/* Qwen's pattern mutated (bytes changed, regex syntax put in): each one compiles or
 * is refused with a message, and a compiled one matches random text within its
 * budget, ending inside the text. ASan and UBSan watch it in CI. */
static void test_tokjson_regex_mutations(void) {
  static const char base[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                             "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const char syntax[] = "()[]{}|?*+\\^$.-,:!=<i0123pPsSLN'";
  static const uint32_t chars[] = {'a', 'Z', '5', ' ', '\n', '\r', '\'', 's', 0xE9, 0x17F, 0x3000, 0x4E2D, '!', '{'};
  zz_rng rng;
  zz_rng_seed(&rng, 20261207, 0);
  int compiled = 0, refused = 0;
  uint32_t cp[64];
  uint8_t cls[64];
  for (int it = 0; it < 4000; it++) {
    char pat[sizeof base + 8];
    memcpy(pat, base, sizeof base);
    size_t len = sizeof base - 1;
    for (int m = 0, edits = 1 + (int)(zz_rng_next(&rng) % 4); m < edits; m++) {
      uint64_t r = zz_rng_next(&rng);
      size_t at = (size_t)(r >> 8) % len;
      char c = syntax[(r >> 40) % (sizeof syntax - 1)];
      if (r % 3 == 0 && len + 1 < sizeof pat) { /* insert */
        memmove(pat + at + 1, pat + at, len - at + 1);
        pat[at] = c;
        len++;
      } else if (r % 3 == 1 && len > 1) { /* delete */
        memmove(pat + at, pat + at + 1, len - at);
        len--;
      } else {
        pat[at] = c;
      }
    }
    zz_regex *re = NULL;
    zz_error_clear();
    zz_status st = zz_regex_compile(pat, "fuzz", &re);
    if (st != ZZ_OK) {
      CU_ASSERT(re == NULL && strstr(zz_error_message(), "fuzz pattern") != NULL);
      refused++;
      continue;
    }
    compiled++;
    size_t n = 1 + zz_rng_next(&rng) % 64;
    for (size_t k = 0; k < n; k++) {
      cp[k] = chars[zz_rng_next(&rng) % (sizeof chars / sizeof chars[0])];
      cls[k] = zz_regex_class(cp[k]);
    }
    for (size_t i = 0; i <= n; i++) {
      size_t budget = 1 << 16, end = SIZE_MAX;
      if (zz_regex_match(re, cp, cls, n, i, &end, &budget)) CU_ASSERT(end >= i && end <= n);
    }
    zz_regex_free(re);
  }
  CU_ASSERT(compiled > 500 && refused > 500); /* both sides reached */
}

/* Not JSON at all, and a tokenizer_config.json asking for a BOS the file lacks. */
static void test_tokjson_bad_files(void) {
  char dir[4096], p[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(p, sizeof p, "%s/tokenizer.json", dir);
  CU_ASSERT_EQUAL(zz_test_write_file(p, "{\"model\": {", 11), 0);
  zz_tokenizer *tok = NULL;
  CU_ASSERT_NOT_EQUAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "tokenizer.json:1:"));
  zz_tj_copy("tok-llama2", "tokenizer.json", dir);
  snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
  const char *cfg = "{\"tokenizer_class\": \"LlamaTokenizer\", \"bos_token\": \"<bos>\"}";
  CU_ASSERT_EQUAL(zz_test_write_file(p, cfg, strlen(cfg)), 0);
  CU_ASSERT_NOT_EQUAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "tokenizer_config.json: add_bos_token is true but \"<bos>\""));
  /* add_eos_token adds </s> after the text */
  cfg = "{\"tokenizer_class\": \"LlamaTokenizerFast\", \"add_bos_token\": false, \"add_eos_token\": true}";
  CU_ASSERT_EQUAL(zz_test_write_file(p, cfg, strlen(cfg)), 0);
  CU_ASSERT_EQUAL_FATAL(zz_tokenizer_load(dir, &tok), ZZ_OK);
  int32_t bos = 0, eos = 0;
  CU_ASSERT(zz_tokenizer_specials(tok, &bos, &eos));
  CU_ASSERT_EQUAL(bos, -1);
  CU_ASSERT_EQUAL(eos, 2);
  zz_tokenizer_free(tok);
  zz_tj_rm(dir);
}

/* tokenizer_config.json as real directories ship it (issue #21): Llama-2's file
 * (tests/fixtures/tok-llama2-hub: model_max_length 1e30 written as an integer past
 * int64, added_tokens_decoder, chat_template, "pad_token": null) beside the same
 * tokenizer.json as tok-llama2-meta gives the same cases; then each key's rule. */
static void test_tokjson_hub_config(void) {
  int rt = 0;
  zz_tj_cases("tok-llama2-hub", &rt);
  CU_ASSERT(rt >= 55);
  char dir[4096], p[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  zz_tj_copy("tok-llama2", "tokenizer.json", dir);
  snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
  static const struct {
    const char *json;
    zz_status st;
    const char *needle;
    int32_t bos;
  } cases[] = {
      {"{\"tokenizer_class\": \"PreTrainedTokenizerFast\", \"model_max_length\": 1000000000000000019884624838656}",
       ZZ_OK, NULL, -1},
      {"{\"tokenizer_class\": \"LlamaTokenizer\", \"model_max_length\": 1e30, \"pad_token\": null, "
       "\"chat_template\": \"{{ bos_token }}\", \"legacy\": false, \"sp_model_kwargs\": {}}",
       ZZ_OK, NULL, 1},
      {"{\"tokenizer_class\": \"LlamaTokenizerFast\", \"add_bos_token\": false, \"bos_token\": null, "
       "\"model_max_length\": 4096.0, \"chat_template\": [{\"name\": \"default\", \"template\": \"{{ x }}\"}], "
       "\"added_tokens_decoder\": {\"2\": {\"content\": \"</s>\", \"special\": true}}}",
       ZZ_OK, NULL, -1},
      {"{\"tokenizer_class\": \"LlamaTokenizer\", \"bos_token\": null}", ZZ_ERR_FORMAT,
       "tokenizer_config.json: add_bos_token is true but bos_token is null", 0},
      {"{\"added_tokens_decoder\": {\"1\": {\"content\": \"<bos>\"}}}", ZZ_ERR_UNSUPPORTED,
       "tokenizer_config.json: added_tokens_decoder 1 \"<bos>\" is not that id of tokenizer.json", 0},
      {"{\"added_tokens_decoder\": {\"50000\": {\"content\": \"<pad>\"}}}", ZZ_ERR_UNSUPPORTED,
       "added_tokens_decoder 50000 \"<pad>\"", 0},
      {"{\"added_tokens_decoder\": {\"x1\": {\"content\": \"<s>\"}}}", ZZ_ERR_FORMAT, "added_tokens_decoder \"x1\"", 0},
      {"{\"added_tokens_decoder\": [1]}", ZZ_ERR_FORMAT, "\"added_tokens_decoder\" must be an object", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CU_ASSERT_EQUAL_FATAL(zz_test_write_file(p, cases[i].json, strlen(cases[i].json)), 0);
    zz_tokenizer *tok = NULL;
    zz_status st = zz_tokenizer_load(dir, &tok);
    bool ok = st == cases[i].st && (!cases[i].needle || strstr(zz_error_message(), cases[i].needle));
    if (ok && st == ZZ_OK) {
      int32_t bos = -2, eos = -2;
      ok = zz_tokenizer_specials(tok, &bos, &eos) && bos == cases[i].bos;
    }
    if (!ok)
      fprintf(stderr, "\ntokenizer_config %s: got %s '%s'\n", cases[i].json, zz_status_str(st), zz_error_message());
    CU_ASSERT(ok);
    zz_tokenizer_free(tok);
  }
  zz_tj_rm(dir);
}

void zz_test_tokjson_register(void) {
  CU_pSuite s = CU_add_suite("tokenizer.json", NULL, NULL);
  CU_add_test(s, "LLaMA-3 byte-level: ids, BOS, decode", test_tokjson_llama3);
  CU_add_test(s, "LLaMA-2 legacy (Prepend + Replace, byte_fallback)", test_tokjson_llama2);
  CU_add_test(s, "LLaMA-2 Metaspace (prepend first, no split)", test_tokjson_llama2_meta);
  CU_add_test(s, "Metaspace split, fused <unk>, Metaspace decoder", test_tokjson_spm_split);
  CU_add_test(s, "GPT-2 style tokenizer.json (prefix space)", test_tokjson_gpt2);
  CU_add_test(s, "Qwen2/2.5/3: NFC, Qwen's Split regex, ByteLevel", test_tokjson_qwen2);
  CU_add_test(s, "Mistral v0.1 (Prepend + Replace) and v0.3 (control tokens, Metaspace)", test_tokjson_mistral);
  CU_add_test(s, "Phi-3: added tokens with rstrip", test_tokjson_phi3);
  CU_add_test(s, "random UTF-8 round trips", test_tokjson_random_round_trip);
  CU_add_test(s, "tokenizer.json preferred over vocab.json", test_tokjson_preferred);
  CU_add_test(s, "vocab.json without a byte's token refused, naming it", test_vocab_missing_byte);
  CU_add_test(s, "unsupported or broken tokenizer.json refused", test_tokjson_refused);
  CU_add_test(s, "Split patterns with gaps, lookahead, (?i:); runaway backtracking", test_tokjson_split_patterns);
  CU_add_test(s, "mutated Split patterns: compiled or refused, matches in bounds", test_tokjson_regex_mutations);
  CU_add_test(s, "broken JSON, tokenizer_config.json BOS/EOS", test_tokjson_bad_files);
  CU_add_test(s, "tokenizer_config.json as real directories ship it", test_tokjson_hub_config);
}
