/* must.h — the fuzz targets' invariant check: says which one failed, then
 * aborts (a crash libFuzzer and fuzz/replay.c both report). */
#ifndef RN_FUZZ_MUST_H
#define RN_FUZZ_MUST_H

#include <stdio.h>
#include <stdlib.h>

#define MUST(cond) do { \
    if (!(cond)) { \
      fprintf(stderr, "fuzz: %s:%d: broken: %s\n", __FILE__, __LINE__, #cond); \
      abort(); \
    } \
  } while (0)

#endif
