/* test_ops.c — every relation kind has its operator (ops.h), and the
 * operations each provides are the ones its kind has. */
#include "check.h"
#include "ops.h"

#include <string.h>

static void test_every_kind_has_an_operator(void)
{
  for (int k = RN_REL_TABLE; k <= RN_REL_DISTINCT; k++) CHECK(rn_rel_ops_of((rn_relkind)k) != NULL);
  CHECK(rn_rel_ops_of(RN_REL_JOIN) == &rn_join_ops);
  CHECK(rn_rel_ops_of(RN_REL_AGGREGATE) == &rn_aggregate_ops);
}

/* Derived kinds take changes from their inputs; sources, CDC (built at
 * commit) and lookups (read by joins) take none. */
static void test_apply_is_for_derived_kinds(void)
{
  static const struct { rn_relkind kind; bool apply, scan; } kinds[] = {
    { RN_REL_TABLE, false, true }, { RN_REL_STREAM, false, false }, { RN_REL_FILTER, true, true },
    { RN_REL_MAP, true, true }, { RN_REL_CDC, false, false }, { RN_REL_JOIN, true, true },
    { RN_REL_AGGREGATE, true, true }, { RN_REL_LOOKUP, false, false }, { RN_REL_DISTINCT, true, true },
  };
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    const rn_rel_ops *ops = rn_rel_ops_of(kinds[i].kind);
    CHECK((ops->apply != NULL) == kinds[i].apply);
    CHECK((ops->scan != NULL) == kinds[i].scan);
  }
}

/* Only sources are replayed (reapply); cdc seals (its images) and map (a
 * keyed map's key claims, mapkey.h); an operator with state of its own
 * frees it. */
static void test_seal_reapply_free(void)
{
  for (int k = RN_REL_TABLE; k <= RN_REL_DISTINCT; k++) {
    const rn_rel_ops *ops = rn_rel_ops_of((rn_relkind)k);
    CHECK((ops->reapply != NULL) == (k == RN_REL_TABLE || k == RN_REL_STREAM));
    CHECK((ops->seal != NULL) == (k == RN_REL_CDC || k == RN_REL_MAP));
    CHECK((ops->free != NULL) == (k != RN_REL_TABLE && k != RN_REL_STREAM));
    CHECK(ops->name != NULL && strcmp(rn_relkind_name(k), ops->name) == 0);
  }
}

int main(void)
{
  RUN(test_every_kind_has_an_operator);
  RUN(test_apply_is_for_derived_kinds);
  RUN(test_seal_reapply_free);
  return CHECK_REPORT();
}
