#!/usr/bin/env python3
"""Write runtime/text/nfc_tables.c: the Unicode data NFC normalization needs.

tokenizer.json's "NFC" normalizer (Qwen2, Qwen2.5, Qwen3) composes text as Unicode
Normalization Form C. runtime/text/nfc.c does the algorithm (UAX #15: full
canonical decomposition, canonical ordering, canonical composition, Hangul by
arithmetic); this script turns Python's unicodedata into the three tables it reads:

  zz_nfc_decomps    each code point with a canonical decomposition mapping (one
                    level: one or two code points), sorted by code point
  zz_nfc_compose    the primary composites among them (those NFC composes again:
                    two code points, not excluded, not a singleton), as indices
                    into zz_nfc_decomps sorted by their pair
  zz_nfc_cccs       the canonical combining class of every code point that has one
                    (not 0), as ranges of one class

Hangul syllables are left out: nfc.c computes them. CI runs no Python: commit the
output, and run this again (from the repository root) only to move to another
Unicode version, keeping it the same as scripts/gen_unicode_tables.py's:

    python3 scripts/gen_nfc_tables.py            # writes runtime/text/nfc_tables.c
    python3 scripts/gen_nfc_tables.py --check    # fails if the file is stale
"""

import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_unicode_tables import ROOT, generated_header, write_or_check  # noqa: E402 - the script's directory first

MAX_CP = 0x10FFFF
HANGUL = range(0xAC00, 0xAC00 + 11172)
MAX_FULL = 4  # nfc.c's bound on the full decomposition of one code point


def tables():
    decomps = []
    for cp in range(MAX_CP + 1):
        if cp in HANGUL:
            continue
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            assert 1 <= len(parts) <= 2, (hex(cp), parts)
            decomps.append((cp, parts[0], parts[1] if len(parts) == 2 else 0))
    index = {cp: i for i, (cp, _, _) in enumerate(decomps)}
    compose = []
    for cp, a, b in decomps:
        # a primary composite is what NFC makes of its own decomposition
        if b and unicodedata.normalize("NFC", chr(a) + chr(b)) == chr(cp):
            compose.append(index[cp])
    compose.sort(key=lambda i: (decomps[i][1], decomps[i][2]))
    full = max(len(unicodedata.normalize("NFD", chr(cp))) for cp, _, _ in decomps)
    if full > MAX_FULL:
        sys.exit("a full decomposition of %d code points: raise ZZ_NFC_MAX_FULL in nfc.c" % full)
    cccs = []
    for cp in range(MAX_CP + 1):
        c = unicodedata.combining(chr(cp))
        if not c:
            continue
        if cccs and cccs[-1][1] == cp - 1 and cccs[-1][2] == c:
            cccs[-1][1] = cp
        else:
            cccs.append([cp, cp, c])
    return decomps, compose, cccs


def rows(items, per_line):
    return ["   " + "".join(" " + x for x in items[i:i + per_line]) for i in range(0, len(items), per_line)]


def render():
    decomps, compose, cccs = tables()
    parts = generated_header("nfc_tables.c", "gen_nfc_tables.py", "canonical decompositions, the primary",
                             "composites and the canonical combining classes NFC needs (nfc_impl.h).",
                             "nfc_impl.h") + [
        "",
        "/* clang-format off */",
        "const zz_nfc_decomp zz_nfc_decomps[ZZ_NFC_N_DECOMPS] = {",
    ]
    parts += rows(["{0x%X, 0x%X, 0x%X}," % d for d in decomps], 5)
    parts += ["};", "", "const uint16_t zz_nfc_compose[ZZ_NFC_N_COMPOSE] = {"]
    parts += rows(["%d," % i for i in compose], 16)
    parts += ["};", "", "const zz_nfc_ccc zz_nfc_cccs[ZZ_NFC_N_CCCS] = {"]
    parts += rows(["{0x%X, 0x%X, %d}," % tuple(r) for r in cccs], 6)
    parts += ["};", "/* clang-format on */", ""]
    sizes = "#define ZZ_NFC_N_DECOMPS %d\n#define ZZ_NFC_N_COMPOSE %d\n#define ZZ_NFC_N_CCCS %d\n" % (
        len(decomps), len(compose), len(cccs))
    return "\n".join(parts), sizes


def main():
    text, sizes = render()
    header = os.path.join(ROOT, "runtime", "text", "nfc_impl.h")
    with open(header, encoding="utf-8") as f:
        if sizes not in f.read():
            sys.exit("%s must define the table sizes as:\n%s" % (header, sizes))
    write_or_check(text, "nfc_tables.c", __doc__)


if __name__ == "__main__":
    main()
