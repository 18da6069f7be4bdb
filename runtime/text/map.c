/*
 * map.c — the tokenizer's hash map: uint64 keys (ids, id pairs) to two int32
 * values, open addressing with linear probing (map_impl.h). The vocabulary's
 * by-id table and the merges are such maps.
 */
#include <stdlib.h>

#include "map_impl.h"

/* Ids and id pairs are dense small integers; mix them so that linear probing does
 * not meet long runs. */
static uint64_t zz_hash_u64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7FB5D329728EA185ull;
  x ^= x >> 27;
  x *= 0x81DADEF4BC2DD44Dull;
  x ^= x >> 33;
  return x;
}

size_t zz_table_cap(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2; /* load factor at most 1/2 */
  return cap;
}

bool zz_u64_map_init(zz_u64_map *m, size_t n) {
  size_t cap = zz_table_cap(n);
  m->slots = malloc(cap * sizeof *m->slots);
  if (!m->slots) return false;
  m->mask = cap - 1;
  for (size_t i = 0; i < cap; i++) m->slots[i].key = ZZ_U64_EMPTY;
  return true;
}

zz_u64_slot *zz_u64_map_slot(const zz_u64_map *m, uint64_t key) {
  size_t i = (size_t)zz_hash_u64(key) & m->mask;
  while (m->slots[i].key != key && m->slots[i].key != ZZ_U64_EMPTY) i = (i + 1) & m->mask;
  return &m->slots[i];
}

const zz_u64_slot *zz_u64_map_find(const zz_u64_map *m, uint64_t key) {
  const zz_u64_slot *s = zz_u64_map_slot(m, key);
  return s->key == key ? s : NULL;
}

uint64_t zz_pair_key(int32_t left, int32_t right) { return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right; }
