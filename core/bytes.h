/* bytes.h — equality of short byte strings (names, keys) without a call
 * to memcmp: the hot paths compare names and keys of a few words. */
#ifndef RN_BYTES_H
#define RN_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* memcmp(a, b, n) == 0, a word at a time. */
static inline bool rn_same_bytes(const char *a, const char *b, size_t n)
{
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y) return false;
  }
  for (; i < n; i++)
    if (a[i] != b[i]) return false;
  return true;
}

#endif
