/*
 * utf8.c — the tree's one UTF-8 decoder (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), the lossy decoding Hugging Face's decoders
 * apply to ill-formed bytes, and GPT-2's byte mapping (utf8_impl.h).
 */
#include <string.h>

#include "utf8_impl.h"

/* GPT-2 shows each byte as a printable code point: the printable Latin-1 bytes
 * stand for themselves, the other 68 take U+0100, U+0101, ... in byte order. */
void zz_byte_map(uint32_t cp_of_byte[256], int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1]) {
  for (int c = 0; c <= ZZ_BYTE_CP_MAX; c++) byte_of_cp[c] = -1;
  uint32_t next = 256;
  for (int b = 0; b < 256; b++) {
    bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    cp_of_byte[b] = self ? (uint32_t)b : next++;
    byte_of_cp[cp_of_byte[b]] = (int16_t)b;
  }
}

size_t zz_utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (size_t k = n - 1; k > 0; k--, cp >>= 6) out[k] = (char)(0x80 | (cp & 0x3F));
  out[0] = (char)(lead[n] | cp);
  return n;
}

/* The UTF-8 sequence at s[0..avail) (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF): *ok true, its code point in *cp and its length
 * returned; or *ok false and the length of its maximal ill-formed subpart (the
 * longest start of a well-formed sequence there, at least one byte), which is what
 * Unicode's "substitution of maximal subparts" replaces with one U+FFFD, as
 * Python's bytes.decode(errors="replace") and Rust's from_utf8_lossy do. */
static size_t zz_utf8_scan(const uint8_t *s, size_t avail, uint32_t *cp, bool *ok) {
  uint8_t b0 = s[0];
  *ok = false;
  if (b0 < 0x80) {
    *cp = b0;
    *ok = true;
    return 1;
  }
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0; /* overlong below U+0800 */
    else if (b0 == 0xED)
      hi = 0x9F; /* surrogates U+D800..U+DFFF */
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90; /* overlong below U+10000 */
    else if (b0 == 0xF4)
      hi = 0x8F; /* above U+10FFFF */
  } else {
    return 1; /* a continuation byte, C0/C1 (always overlong), or F5..FF */
  }
  uint32_t v = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; k++) {
    if (k >= avail || s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF)) return k;
    v = (v << 6) | (s[k] & 0x3F);
  }
  *cp = v;
  *ok = true;
  return n;
}

size_t zz_utf8_next(const uint8_t *s, size_t avail, uint32_t *cp) {
  bool ok;
  size_t n = zz_utf8_scan(s, avail, cp, &ok);
  return ok ? n : 0;
}

bool zz_utf8_valid(const char *s, size_t len) {
  for (size_t i = 0, k; i < len; i += k) {
    uint32_t cp;
    if ((k = zz_utf8_next((const uint8_t *)s + i, len - i, &cp)) == 0) return false;
  }
  return true;
}

/* s with each maximal ill-formed subpart replaced by U+FFFD, in out (room for 3 *
 * len bytes); returns the length. */
size_t zz_utf8_lossy(const char *s, size_t len, char *out) {
  size_t n = 0;
  for (size_t i = 0, k; i < len; i += k) {
    uint32_t cp;
    bool ok;
    k = zz_utf8_scan((const uint8_t *)s + i, len - i, &cp, &ok);
    if (ok) {
      memcpy(out + n, s + i, k);
      n += k;
    } else {
      memcpy(out + n, ZZ_UTF8_REPLACEMENT, 3);
      n += 3;
    }
  }
  return n;
}
