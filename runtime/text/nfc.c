/*
 * nfc.c — Unicode Normalization Form C as UAX #15 defines it: each code point
 * fully decomposed (canonical mappings, Hangul syllables by arithmetic), the
 * combining marks of each run put in canonical order (a stable sort by combining
 * class), then composed again: a mark joins the last starter when no mark between
 * them has its class or a higher one (or none is between them), and the pair has
 * a primary composite. The tables are nfc_tables.c (nfc_impl.h).
 *
 * Text whose code points are all below U+0300 is in NFC already (nothing there
 * decomposes or combines with what precedes it) and is copied as it is.
 */
#include <stdlib.h>
#include <string.h>

#include "nfc_impl.h"
#include "utf8_impl.h"

/* The longest full decomposition of one code point (gen_nfc_tables.py checks). */
#define ZZ_NFC_MAX_FULL 4

/* Hangul syllables: S = SBASE + (L * VCOUNT + V) * TCOUNT + T. */
enum {
  ZZ_HANGUL_SBASE = 0xAC00,
  ZZ_HANGUL_LBASE = 0x1100,
  ZZ_HANGUL_VBASE = 0x1161,
  ZZ_HANGUL_TBASE = 0x11A7,
  ZZ_HANGUL_LCOUNT = 19,
  ZZ_HANGUL_VCOUNT = 21,
  ZZ_HANGUL_TCOUNT = 28,
  ZZ_HANGUL_NCOUNT = ZZ_HANGUL_VCOUNT * ZZ_HANGUL_TCOUNT,
  ZZ_HANGUL_SCOUNT = ZZ_HANGUL_LCOUNT * ZZ_HANGUL_NCOUNT,
};

/* A code point that stands for a byte that was not UTF-8 (kept as it is): above
 * every code point, class 0, composing with nothing. */
#define ZZ_NFC_RAW 0x80000000u

/* bsearch comparators: a code point against a range of one class, against a
 * decomposition's code point; a pair against a primary composite's pair. */
static int zz_nfc_cmp_ccc(const void *key, const void *elem) {
  uint32_t cp = *(const uint32_t *)key;
  const zz_nfc_ccc *r = elem;
  return cp < r->lo ? -1 : cp > r->hi;
}

static int zz_nfc_cmp_decomp(const void *key, const void *elem) {
  uint32_t cp = *(const uint32_t *)key, at = ((const zz_nfc_decomp *)elem)->cp;
  return cp < at ? -1 : cp > at;
}

static int zz_nfc_cmp_pair(const void *key, const void *elem) {
  const uint32_t *ab = key;
  const zz_nfc_decomp *d = &zz_nfc_decomps[*(const uint16_t *)elem];
  if (ab[0] != d->a) return ab[0] < d->a ? -1 : 1;
  return ab[1] < d->b ? -1 : ab[1] > d->b;
}

static uint32_t zz_nfc_ccc_of(uint32_t cp) {
  const zz_nfc_ccc *r = bsearch(&cp, zz_nfc_cccs, ZZ_NFC_N_CCCS, sizeof *zz_nfc_cccs, zz_nfc_cmp_ccc);
  return r ? r->ccc : 0;
}

/* The primary composite of a followed by b, or 0. */
static uint32_t zz_nfc_compose_pair(uint32_t a, uint32_t b) {
  if (a >= ZZ_HANGUL_LBASE && a < ZZ_HANGUL_LBASE + ZZ_HANGUL_LCOUNT && b >= ZZ_HANGUL_VBASE &&
      b < ZZ_HANGUL_VBASE + ZZ_HANGUL_VCOUNT)
    return ZZ_HANGUL_SBASE + ((a - ZZ_HANGUL_LBASE) * ZZ_HANGUL_VCOUNT + (b - ZZ_HANGUL_VBASE)) * ZZ_HANGUL_TCOUNT;
  if (a >= ZZ_HANGUL_SBASE && a < ZZ_HANGUL_SBASE + ZZ_HANGUL_SCOUNT && (a - ZZ_HANGUL_SBASE) % ZZ_HANGUL_TCOUNT == 0 &&
      b > ZZ_HANGUL_TBASE && b < ZZ_HANGUL_TBASE + ZZ_HANGUL_TCOUNT)
    return a + (b - ZZ_HANGUL_TBASE);
  uint32_t ab[2] = {a, b};
  const uint16_t *i = bsearch(ab, zz_nfc_compose, ZZ_NFC_N_COMPOSE, sizeof *zz_nfc_compose, zz_nfc_cmp_pair);
  return i ? zz_nfc_decomps[*i].cp : 0;
}

/* The full canonical decomposition of cp appended at out; returns its length. */
static size_t zz_nfc_decompose(uint32_t cp, uint32_t *out) {
  if (cp >= ZZ_HANGUL_SBASE && cp < ZZ_HANGUL_SBASE + ZZ_HANGUL_SCOUNT) {
    uint32_t s = cp - ZZ_HANGUL_SBASE, t = s % ZZ_HANGUL_TCOUNT;
    out[0] = ZZ_HANGUL_LBASE + s / ZZ_HANGUL_NCOUNT;
    out[1] = ZZ_HANGUL_VBASE + (s % ZZ_HANGUL_NCOUNT) / ZZ_HANGUL_TCOUNT;
    if (!t) return 2;
    out[2] = ZZ_HANGUL_TBASE + t;
    return 3;
  }
  const zz_nfc_decomp *d = cp < 0xC0 ? NULL
                                     : bsearch(&cp, zz_nfc_decomps, ZZ_NFC_N_DECOMPS, sizeof *zz_nfc_decomps,
                                               zz_nfc_cmp_decomp);
  if (!d) {
    out[0] = cp;
    return 1;
  }
  size_t n = zz_nfc_decompose(d->a, out);
  if (d->b) n += zz_nfc_decompose(d->b, out + n);
  return n;
}

zz_status zz_nfc(const char *s, size_t len, char **out, size_t *out_len) {
  bool simple = true;
  for (size_t i = 0; i < len && simple; i++) simple = (uint8_t)s[i] < 0xCC; /* U+0300 is CC 80 */
  if (simple) {
    char *copy = malloc(len + 1);
    if (!copy) return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for NFC of %zu bytes", len);
    memcpy(copy, s, len);
    copy[len] = '\0';
    *out = copy;
    *out_len = len;
    return ZZ_OK;
  }
  /* at most ZZ_NFC_MAX_FULL code points of each byte, each at most 4 bytes again */
  bool fits = len <= SIZE_MAX / (4 * ZZ_NFC_MAX_FULL * sizeof(uint32_t)) - 1;
  uint32_t *cp = fits ? malloc(ZZ_NFC_MAX_FULL * len * sizeof *cp) : NULL;
  uint8_t *cls = fits ? malloc(ZZ_NFC_MAX_FULL * len) : NULL;
  char *text = NULL;
  if (!cp || !cls) {
    free(cp);
    free(cls);
    return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for NFC of %zu bytes", len);
  }
  /* decompose */
  size_t n = 0;
  for (size_t i = 0, k; i < len; i += k) {
    uint32_t c;
    k = zz_utf8_next((const uint8_t *)s + i, len - i, &c);
    if (k == 0) {
      cp[n++] = ZZ_NFC_RAW | (uint8_t)s[i];
      k = 1;
    } else {
      n += zz_nfc_decompose(c, cp + n);
    }
  }
  for (size_t i = 0; i < n; i++) cls[i] = cp[i] & ZZ_NFC_RAW ? 0 : (uint8_t)zz_nfc_ccc_of(cp[i]);
  /* canonical order: each run of marks sorted by class, stably (insertion) */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && cls[j] && cls[j - 1] > cls[j]; j--) {
      uint32_t tc = cp[j];
      uint8_t tk = cls[j];
      cp[j] = cp[j - 1];
      cls[j] = cls[j - 1];
      cp[j - 1] = tc;
      cls[j - 1] = tk;
    }
  /* compose, in place: cp[0, m) is the output so far */
  size_t m = 0, starter = SIZE_MAX;
  int last = 256; /* the class of the last code point kept after the starter; 256: none may join */
  for (size_t i = 0; i < n; i++) {
    uint32_t c = cp[i];
    int cc = cls[i];
    /* last == 0: c is next to the starter (nothing kept since it); last < cc: no
     * mark kept since the starter blocks c */
    uint32_t joined = starter != SIZE_MAX && (last == 0 || last < cc) && !(c & ZZ_NFC_RAW)
                          ? zz_nfc_compose_pair(cp[starter], c)
                          : 0;
    if (joined) {
      cp[starter] = joined;
      continue;
    }
    if (cc == 0) {
      starter = m;
      last = 0;
    } else {
      last = cc;
    }
    cp[m++] = c;
  }
  /* encode: NFC may be longer than its input (U+0958 is two code points in NFC) */
  text = malloc(4 * m + 1);
  if (!text) {
    free(cp);
    free(cls);
    return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for NFC of %zu bytes", len);
  }
  size_t at = 0;
  for (size_t i = 0; i < m; i++) {
    uint32_t c = cp[i];
    if (c & ZZ_NFC_RAW) text[at++] = (char)(c & 0xFF);
    else
      at += zz_utf8_put(c, text + at);
  }
  text[at] = '\0';
  free(cp);
  free(cls);
  *out = text;
  *out_len = at;
  return ZZ_OK;
}
