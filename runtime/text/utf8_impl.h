/*
 * utf8_impl.h — the tree's one UTF-8 codec (utf8.c) and GPT-2's byte mapping, which
 * shows each byte as one printable code point. Internal to runtime/text/.
 *
 *     uint32_t cp;
 *     size_t k = zz_utf8_next(s, avail, &cp);       // 0: not a well-formed sequence
 *     size_t n = zz_utf8_lossy(bytes, len, out);    // U+FFFD per maximal ill-formed subpart
 */
#ifndef ZZ_UTF8_IMPL_H
#define ZZ_UTF8_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZZ_UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* Length of the well-formed UTF-8 sequence at s[0..avail), its code point in *cp;
 * 0 when the bytes there are not one. */
size_t zz_utf8_next(const uint8_t *s, size_t avail, uint32_t *cp);
/* Whether s[0..len) is all well-formed UTF-8. */
bool zz_utf8_valid(const char *s, size_t len);
/* s with each maximal ill-formed subpart replaced by U+FFFD, in out (room for 3 *
 * len bytes); returns the length. */
size_t zz_utf8_lossy(const char *s, size_t len, char *out);
/* Writes cp (at most U+10FFFF) as UTF-8, 1 to 4 bytes; returns the length. */
size_t zz_utf8_put(uint32_t cp, char *out);

/* The highest code point the byte mapping uses: U+0100 + 67. */
#define ZZ_BYTE_CP_MAX 0x143

/* GPT-2's byte mapping both ways: the code point of each byte, and the byte of each
 * code point up to ZZ_BYTE_CP_MAX (-1 for those that stand for none). */
void zz_byte_map(uint32_t cp_of_byte[256], int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1]);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_UTF8_IMPL_H */
