/*
 * slots.c — which prompt runs in which of the engine's slots when a request has
 * more prompts than slots (continuous batching, zz_request.refill). The rule, once:
 *
 *   a group whose sequences have all ended begins a fresh block of the next bls
 *   waiting prompts (in their order) and runs their prompt step;
 *   else each ended slot, in slot order, takes the first waiting prompt that can
 *   make all its new tokens there (the room: zz_engine_refill_room), prefilled
 *   alone; a newcomer that ends at its first token frees its slot again at once;
 *   then the group's decode step, ended slots fed the pad token.
 *
 * Nothing here touches an engine or samples: what a turn does is the caller's
 * (zz_slot_ops). The token loop (generate.c) drives an engine with it; the
 * planner (planner/workload.c) drives its cost model with the same turns, each
 * sequence ending at its own max tokens, so the schedule it prices is this one.
 */
#include <stdlib.h>

#include "zz_generate.h"

static bool zz_slot_free(const zz_slots *sl, int64_t s) { return sl->seq[s] < 0 || sl->ops->done(sl->ctx, sl->seq[s]); }

void zz_slots_claim(zz_slots *sl, int64_t q) {
  sl->taken[q] = true;
  sl->waiting--;
  while (sl->next < sl->n && sl->taken[sl->next]) sl->next++;
}

/* Prompt q goes into slot s. */
static void zz_slot_take(zz_slots *sl, int64_t s, int64_t q) {
  sl->seq[s] = q;
  zz_slots_claim(sl, q);
}

int64_t zz_slots_first(const zz_slots *sl) { return sl->waiting ? sl->next : -1; }

int64_t zz_slots_fit(const zz_slots *sl, int gr, int step) {
  for (int64_t q = sl->next; q < sl->n; q++)
    if (!sl->taken[q] && sl->ops->room(sl->ctx, gr, step, sl->lens[q]) >= sl->ops->max_new(sl->ctx, q)) return q;
  return -1;
}

zz_status zz_slots_init(zz_slots *sl, int n_groups, int64_t bls, int64_t n, const int64_t *lens, const zz_slot_ops *ops,
                        void *ctx) {
  *sl = (zz_slots){.n_groups = n_groups,
                   .bls = bls,
                   .cap = bls * n_groups,
                   .n = n,
                   .lens = lens,
                   .ops = ops,
                   .ctx = ctx,
                   .waiting = n};
  sl->seq = malloc((size_t)sl->cap * sizeof *sl->seq);
  sl->ended = calloc((size_t)sl->cap, sizeof *sl->ended);
  sl->n_in = calloc((size_t)n_groups, sizeof *sl->n_in);
  sl->step = calloc((size_t)n_groups, sizeof *sl->step);
  sl->taken = calloc((size_t)(n > 0 ? n : 1), sizeof *sl->taken);
  if (!sl->seq || !sl->ended || !sl->n_in || !sl->step || !sl->taken) {
    zz_slots_free(sl);
    return zz_error(ZZ_ERR_NO_MEMORY, "slots: out of memory");
  }
  for (int64_t s = 0; s < sl->cap; s++) sl->seq[s] = -1;
  return ZZ_OK;
}

void zz_slots_free(zz_slots *sl) {
  if (!sl) return;
  free(sl->seq);
  free(sl->ended);
  free(sl->n_in);
  free(sl->step);
  free(sl->taken);
  sl->seq = sl->n_in = sl->step = NULL;
  sl->ended = sl->taken = NULL;
}

bool zz_slots_busy(const zz_slots *sl) {
  if (sl->waiting) return true;
  for (int gr = 0; gr < sl->n_groups; gr++)
    for (int64_t i = 0; i < sl->n_in[gr]; i++)
      if (!zz_slot_free(sl, gr * sl->bls + i)) return true;
  return false;
}

zz_status zz_slots_turn(zz_slots *sl, int gr) {
  int64_t base = gr * sl->bls;
  bool live = false;
  for (int64_t i = 0; i < sl->n_in[gr]; i++) live = live || !zz_slot_free(sl, base + i);
  if (!live) {
    if (!sl->waiting) return ZZ_OK;
    int64_t cnt = 0;
    for (int64_t q = sl->next; q < sl->n && cnt < sl->bls; q++)
      if (!sl->taken[q]) zz_slot_take(sl, base + cnt++, q);
    sl->n_in[gr] = cnt;
    ZZ_CHECK(sl->ops->begin(sl->ctx, gr, cnt, sl->seq + base));
    sl->step[gr] = 1;
    return ZZ_OK;
  }
  int step = (int)sl->step[gr];
  bool fits = true; /* until a search finds none: the next would find none either */
  for (int64_t i = 0; i < sl->n_in[gr] && sl->waiting && fits; i++) {
    int64_t q;
    while (zz_slot_free(sl, base + i) && (fits = (q = zz_slots_fit(sl, gr, step)) >= 0)) {
      zz_slot_take(sl, base + i, q);
      ZZ_CHECK(sl->ops->refill(sl->ctx, gr, i, q, step));
    }
  }
  live = false;
  for (int64_t i = 0; i < sl->n_in[gr]; i++) {
    sl->ended[base + i] = zz_slot_free(sl, base + i);
    live = live || !sl->ended[base + i];
  }
  if (!live) return ZZ_OK; /* every newcomer ended at its first token */
  ZZ_CHECK(sl->ops->step(sl->ctx, gr, step, sl->n_in[gr], sl->seq + base, sl->ended + base));
  sl->step[gr]++;
  return ZZ_OK;
}
