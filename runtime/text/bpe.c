/*
 * bpe.c — the BPE model: one word (a pre-token, in the vocabulary's spelling)
 * into ids as the tokenizers library's BPE makes them. Its characters become
 * symbols (byte tokens or <unk> for those the vocabulary lacks), then adjacent
 * symbols merge by merge rank, lowest first.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

void zz_bpe_work_free(zz_bpe_work *w) {
  free(w->sym);
  free(w->next);
  free(w->prev);
  free(w->heap);
}

static bool zz_bpe_work_reserve(zz_bpe_work *w, size_t m) {
  if (m <= w->cap) return true;
  size_t cap = w->cap ? w->cap : 64;
  while (cap < m) cap *= 2;
  zz_bpe_work g = {0};
  g.sym = malloc(cap * sizeof *g.sym);
  g.next = malloc(cap * sizeof *g.next);
  g.prev = malloc(cap * sizeof *g.prev);
  g.heap = malloc(3 * cap * sizeof *g.heap);
  if (!g.sym || !g.next || !g.prev || !g.heap) {
    zz_bpe_work_free(&g);
    return false;
  }
  zz_bpe_work_free(w);
  g.cap = cap;
  *w = g;
  return true;
}

static bool zz_cand_before(const zz_bpe_cand *a, const zz_bpe_cand *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* Queues the merge of symbols l and r if merges.txt has one for their pair. */
static void zz_bpe_push(zz_bpe_work *w, const zz_tokenizer *tok, int32_t l, int32_t r) {
  const zz_u64_slot *m = zz_u64_map_find(&tok->merges, zz_pair_key(w->sym[l], w->sym[r]));
  if (!m) return;
  zz_bpe_cand c = {m->a, l, r, w->sym[l], w->sym[r], m->b};
  size_t i = w->heap_n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!zz_cand_before(&c, &w->heap[parent])) break;
    w->heap[i] = w->heap[parent];
    i = parent;
  }
  w->heap[i] = c;
}

static zz_bpe_cand zz_bpe_pop(zz_bpe_work *w) {
  zz_bpe_cand top = w->heap[0];
  zz_bpe_cand last = w->heap[--w->heap_n];
  size_t i = 0, n = w->heap_n;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && zz_cand_before(&w->heap[child + 1], &w->heap[child])) child++;
    if (!zz_cand_before(&w->heap[child], &last)) break;
    w->heap[i] = w->heap[child];
    i = child;
  }
  if (n > 0) w->heap[i] = last;
  return top;
}

/*
 * Applies the merges to the m symbols in w->sym and appends the resulting ids to
 * ids. Merging the lowest-ranked pair first, leftmost on ties, one at a time, is
 * what the fast tokenizer does, and gives the same result as the slow one's
 * "merge every occurrence of the best pair" (a merge never recreates its own pair).
 * O(m log m) with a heap whose stale entries are skipped when popped.
 */
static size_t zz_bpe(const zz_tokenizer *tok, zz_bpe_work *w, size_t m, int32_t *ids) {
  if (m == 1) {
    ids[0] = w->sym[0];
    return 1;
  }
  for (size_t i = 0; i < m; i++) {
    w->prev[i] = (int32_t)i - 1;
    w->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
  }
  w->heap_n = 0;
  for (size_t i = 0; i + 1 < m; i++) zz_bpe_push(w, tok, (int32_t)i, (int32_t)i + 1);
  while (w->heap_n > 0) {
    zz_bpe_cand c = zz_bpe_pop(w);
    if (w->sym[c.pos] != c.left_id || w->next[c.pos] != c.right || w->sym[c.right] != c.right_id)
      continue; /* one of the two has merged since */
    w->sym[c.pos] = c.new_id;
    w->sym[c.right] = -1;
    int32_t after = w->next[c.right];
    w->next[c.pos] = after;
    if (after >= 0) w->prev[after] = c.pos;
    if (w->prev[c.pos] >= 0) zz_bpe_push(w, tok, w->prev[c.pos], c.pos);
    if (after >= 0) zz_bpe_push(w, tok, c.pos, after);
  }
  size_t n = 0;
  for (int32_t i = 0; i >= 0; i = w->next[i]) ids[n++] = w->sym[i];
  return n;
}


/*
 * One word (a pre-token, in the vocabulary's spelling) through the BPE model, as
 * the tokenizers library's BPE does it: with ignore_merges a word that is a token
 * is that token; else each character is a symbol, a character not in the
 * vocabulary becomes its <0xNN> byte tokens (byte_fallback, when all exist) or
 * <unk> (consecutive ones fused with fuse_unk) or nothing; then the merges.
 */
zz_status zz_bpe_word(zz_enc *e, const char *s, size_t m) {
  const zz_tokenizer *tok = e->tok;
  if (m == 0) return ZZ_OK;
  if (tok->ignore_merges) {
    const zz_tok_entry *t = zz_tok_find(tok, s, m);
    if (t) {
      if (!zz_enc_room(e, 1)) return zz_enc_oom(m);
      e->ids[e->n++] = t->id;
      return ZZ_OK;
    }
  }
  if (!zz_bpe_work_reserve(&e->w, m) || !zz_enc_room(e, m)) return zz_enc_oom(m);
  int32_t *sym = e->w.sym;
  size_t k = 0;     /* symbols: at most one per byte */
  int32_t unk = -1; /* a pending <unk> */
  for (size_t i = 0; i < m;) {
    uint32_t cp = 0;
    size_t len = zz_utf8_next((const uint8_t *)s + i, m - i, &cp);
    if (len == 0) len = 1; /* words are valid UTF-8; a stray byte stays one symbol */
    const zz_tok_entry *t = zz_tok_find(tok, s + i, len);
    if (t) {
      if (unk >= 0) sym[k++] = unk;
      unk = -1;
      sym[k++] = t->id;
    } else {
      bool bytes = tok->byte_fallback;
      for (size_t b = 0; bytes && b < len; b++) bytes = tok->fallback_id[(uint8_t)s[i + b]] >= 0;
      if (bytes) {
        for (size_t b = 0; b < len; b++) sym[k++] = tok->fallback_id[(uint8_t)s[i + b]];
      } else if (tok->unk_id >= 0) {
        if (unk >= 0 && !tok->fuse_unk) sym[k++] = unk;
        unk = tok->unk_id;
      }
    }
    i += len;
  }
  if (unk >= 0) sym[k++] = unk;
  if (k > 0) e->n += zz_bpe(tok, &e->w, k, e->ids + e->n);
  return ZZ_OK;
}
