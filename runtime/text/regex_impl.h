/*
 * regex_impl.h — the pre-tokenizer's regular expressions (regex.c): the subset of
 * Oniguruma's syntax that Split patterns of tokenizer.json use (GPT-2's, LLaMA-3's,
 * Qwen2's), matched over code points as Oniguruma matches them (the first
 * alternative that matches, greedy quantifiers that give back). Whatever else a
 * pattern asks for is refused when it is compiled, naming the construct.
 * Internal to runtime/text/.
 *
 *     zz_regex *re;
 *     ZZ_CHECK(zz_regex_compile(pattern, "tokenizer.json: pre_tokenizer Split", &re));
 *     size_t budget = 1 << 20;
 *     size_t end;
 *     if (zz_regex_match(re, cp, cls, n, i, &end, &budget)) ...   // [i, end) matched
 *     zz_regex_free(re);
 */
#ifndef ZZ_REGEX_IMPL_H
#define ZZ_REGEX_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zz_regex zz_regex;

/* pattern (UTF-8) into *out; an unsupported construct or a malformed pattern is
 * ZZ_ERR_UNSUPPORTED / ZZ_ERR_FORMAT naming it, prefixed by `where`. */
zz_status zz_regex_compile(const char *pattern, const char *where, zz_regex **out);
void zz_regex_free(zz_regex *re);

/* The classes a pattern tells apart (\p{L}, \p{N}, \s); a code point is in at most one. */
enum { ZZ_RE_LETTER = 1, ZZ_RE_NUMBER = 2, ZZ_RE_SPACE = 4 };
/* The class bit of cp (0: none of them), by the generated Unicode tables. */
uint8_t zz_regex_class(uint32_t cp);

/* Whether a match of re starts at code point i of cp[0, n) (cls[k] =
 * zz_regex_class(cp[k]), i <= n); its end (exclusive, i for an empty match) in
 * *end. *budget: the steps the matcher may still take, decreased by those it
 * takes; at 0 it gives up (false), and the caller reports a pattern that
 * backtracks too much. */
bool zz_regex_match(const zz_regex *re, const uint32_t *cp, const uint8_t *cls, size_t n, size_t i, size_t *end,
                    size_t *budget);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_REGEX_IMPL_H */
