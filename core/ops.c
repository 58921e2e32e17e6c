/* ops.c — the operators by kind (ops.h): one line per kind. */
#include "ops.h"

static const rn_rel_ops *const operators[] = {
  [RN_REL_TABLE] = &rn_table_ops,
  [RN_REL_STREAM] = &rn_stream_ops,
  [RN_REL_FILTER] = &rn_filter_ops,
  [RN_REL_MAP] = &rn_map_ops,
  [RN_REL_CDC] = &rn_cdc_ops,
  [RN_REL_JOIN] = &rn_join_ops,
  [RN_REL_AGGREGATE] = &rn_aggregate_ops,
  [RN_REL_LOOKUP] = &rn_lookup_ops,
  [RN_REL_DISTINCT] = &rn_distinct_ops,
  [RN_REL_TOP] = &rn_top_ops,
  [RN_REL_INDEX] = &rn_index_ops,
};

const rn_rel_ops *rn_rel_ops_of(rn_relkind kind)
{
  return operators[kind];
}

const char *rn_relkind_name(int64_t kind)
{
  size_t n = sizeof operators / sizeof operators[0];
  return kind >= 0 && (uint64_t)kind < n && operators[kind] ? operators[kind]->name : "?";
}
