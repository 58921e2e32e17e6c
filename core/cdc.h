/* cdc.h — change-data-capture images of a table-like relation.
 *
 * rel:cdc{ preimage, postimage, format } is a stream built at commit from
 * its input's log of the group (never per delta: see the seed
 * cdc-pre-post-images.txt). For the rows the group touched, in the order
 * first touched:
 *
 *   format "log" (ScyllaDB's layout), one stream event per log row:
 *     |cdc$seq|cdc$batch_seq_no|cdc$operation|cdc$id|columns…|cdc$deleted_<c>…|
 *     (1) preimages (operation 0), if enabled: the row before the group —
 *         key plus the columns the group modified (preimage = true), or
 *         every column ("full"); nulls when the row did not exist;
 *     (2) one delta per change, in order: 2 insert (all columns), 1 update
 *         (key plus changed columns; set to null: null and
 *         cdc$deleted_<c> = true), 3 delete (key columns);
 *     (3) postimages (operation 9), if enabled, of the rows that exist at
 *         the end of the group: every column, every delta applied.
 *   format "debezium": per change |op c/u/d|before|after|source{relation,seq,id}|
 *   format "flink": per change half |rowkind +I/-U/+U/-D|columns…|
 *
 * cdc$deleted_<c> exists for each nullable non-key column. A keyless
 * relation has no key columns: cdc$id names the row. */
#ifndef RN_CDC_H
#define RN_CDC_H

#include "pipeline.h"

typedef enum rn_cdc_format { RN_CDC_LOG, RN_CDC_DEBEZIUM, RN_CDC_FLINK } rn_cdc_format;

typedef struct rn_cdc_opts {
  int preimage;           /* 0 none, 1 modified columns, 2 every column */
  bool postimage;
  rn_cdc_format format;
} rn_cdc_opts;

int rn_declare_cdc(rn_pipeline *p, const char *name, rn_rel *in, const rn_cdc_opts *opts,
                   rn_rel **out);

#endif
