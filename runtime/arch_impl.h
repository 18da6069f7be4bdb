/* arch_impl.h — the architectures known to the runtime (internal). */
#ifndef ZZ_ARCH_IMPL_H
#define ZZ_ARCH_IMPL_H
#include "zz_runtime.h"

extern const zz_arch zz_arch_opt;

#endif
