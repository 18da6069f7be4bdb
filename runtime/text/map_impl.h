/*
 * map_impl.h — the tokenizer's hash map (map.c): open addressing from a uint64 key
 * (an id, or a pair of ids) to two int32 values. Internal to runtime/text/.
 *
 *     zz_u64_map m;
 *     zz_u64_map_init(&m, n);                        // room for n keys
 *     zz_u64_slot *s = zz_u64_map_slot(&m, key);     // its slot, or the empty one
 *     if (s->key == ZZ_U64_EMPTY) { s->key = key; s->a = ...; }
 *     free(m.slots);
 */
#ifndef ZZ_MAP_IMPL_H
#define ZZ_MAP_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Keys are ids or id pairs, which are below 2^63, so all ones marks an empty slot. */
#define ZZ_U64_EMPTY UINT64_MAX

typedef struct zz_u64_slot {
  uint64_t key;
  int32_t a, b;
} zz_u64_slot;
typedef struct zz_u64_map {
  zz_u64_slot *slots; /* [mask + 1] */
  size_t mask;
} zz_u64_map;

/* Slots for n keys (a power of two, at least 2n: the load factor stays at most 1/2). */
size_t zz_table_cap(size_t n);
bool zz_u64_map_init(zz_u64_map *m, size_t n);
/* The slot holding key, or the empty slot where it would go. */
zz_u64_slot *zz_u64_map_slot(const zz_u64_map *m, uint64_t key);
const zz_u64_slot *zz_u64_map_find(const zz_u64_map *m, uint64_t key);
/* The key of the pair (left, right). */
uint64_t zz_pair_key(int32_t left, int32_t right);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_MAP_IMPL_H */
