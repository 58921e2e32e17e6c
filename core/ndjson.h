/* ndjson.h — NDJSON sinks and input (the formats are in ndjson.c). */
#ifndef RN_NDJSON_H
#define RN_NDJSON_H

#include <stdio.h>

#include "pipeline.h"

/* Appends v (a value of column c, or NULL for "any") as JSON text. */
void rn_json_value(msgpack_sbuffer *b, const msgpack_object *v, const rn_column *c);

/* Appends one JSON line for a row of s (key_only: only the key columns of a
 * keyed s). verb_field NULL: no verb. id_field NULL: no id; else the
 * string id after the verb. -1 if row is not a row of s. */
int rn_ndjson_line(const rn_schema *s, const char *row, size_t len, bool key_only, const char *verb_field,
                   const char *verb, const char *id_field, const char *id, msgpack_zone *z, msgpack_sbuffer *out);

/* Refuses (RN_EINVAL, naming both) a verb field named like a column of
 * rel: the name would be in each line twice, and a reader keeps one of the
 * two (the verb, or the value, is lost). 0 when verb_field is NULL or free. */
int rn_ndjson_verb_clash(rn_pipeline *p, const rn_rel *rel, const char *verb_field);

/* Refuses (RN_EINVAL) an id field named like a column of rel or like the
 * verb field; 0 when id_field is NULL or free. */
int rn_ndjson_id_clash(rn_pipeline *p, const rn_rel *rel, const char *verb_field, const char *id_field);

/* The same two checks at a delivery, for the columns rel has there: a
 * group that waited across a change of columns goes out in those it was
 * committed with (outbox.c (11)), which the declaration did not check.
 * *checked: the columns last found free (a sink's own), spared the check
 * next time. Fails the delivery naming group seq and the sink (sink:
 * "ndjson", "jetstream"; target: its file or subject, or NULL); the
 * group waits. */
int rn_ndjson_fields_free(const rn_rel *rel, uint64_t seq, const char *sink, const char *target,
                          const char *verb_field, const char *id_field, const rn_schema **checked, rn_err *e);

/* A durable sink writing rel's changes to f (closed with the sink when own;
 * release(release_ctx) is called when the sink goes, for a caller that
 * keeps f alive). Its groups wait in memory: a crash loses the ones not
 * written yet, never writes one twice. id_field: NULL, or the field each
 * line names its change in, "<state id>:<seq>:<n>". */
int rn_ndjson_sink(rn_pipeline *p, rn_rel *rel, FILE *f, bool own, const char *verb_field, const char *id_field,
                   rn_free_fn release, void *release_ctx);

/* A durable sink appending rel's changes to the file at path, exactly
 * once across crashes: the groups after the last one recorded are found
 * in the file (written before a crash) or appended; lines another state
 * wrote are never cut (ndjson.c, "Ownership"). */
int rn_ndjson_sink_path(rn_pipeline *p, rn_rel *rel, const char *path, const char *verb_field,
                        const char *id_field);

/* A change's "rel", "op" and "row" values from its map form {rel, op, row}
 * (NULL where absent), as an NDJSON input line holds it; other: its first
 * field of another name (NULL if none), which is ignored but named when a
 * field is missing: a misspelt "rwo". */
void rn_change_fields(const msgpack_object *obj, const msgpack_object **rel, const msgpack_object **op,
                      const msgpack_object **row, const msgpack_object **other);

/* Applies one change from its rel (a relation's name), op ("insert",
 * "update", "upsert" or "delete") and row values (other: as
 * rn_change_fields gives it, or NULL): any of them missing or
 * of the wrong type, an unknown relation or op, or a bad row fails the
 * group. Returns 0 or an RN_E… code (p->err says why). */
int rn_apply_change(rn_pipeline *p, const msgpack_object *rel, const msgpack_object *op, const msgpack_object *row,
                    const msgpack_object *other);

/* rn_apply_change when the caller has looked rel up already: r is the
 * relation it names, or NULL (none, or rel is not a string). */
int rn_apply_change_to(rn_pipeline *p, rn_rel *r, const msgpack_object *rel, const msgpack_object *op,
                       const msgpack_object *row, const msgpack_object *other);

/* ---- changes read from JSON text (json_change.c) ---- */
/* The relation named exactly (length and bytes), or NULL. */
rn_rel *rn_rel_named(const rn_pipeline *p, const char *name, size_t len);

/* rn_apply_change for a change read from JSON text: an int column given a
 * number with a fraction part or exponent beyond ±2^53 (not exact) fails
 * the group, naming the relation and the column. */
int rn_apply_json_change(rn_pipeline *p, const msgpack_object *rel, const msgpack_object *op,
                         const msgpack_object *row, const msgpack_object *other);

/* After rn_json_parse refused a change's text (p->err says why): a number
 * out of range (beyond int64, or a double's range) is said again naming
 * the relation and the column; any other reason is left as it is. */
void rn_json_change_refused(rn_pipeline *p, const char *line, size_t len);

/* After rn_json_parse refused a change's text for a value it could not
 * read (bytes that are not UTF-8, a lone surrogate escape, NaN, a column
 * name holding a NUL): the message is prefixed with the relation and the
 * column ("t: column \"s\": malformed JSON …") when the line, that value
 * set aside, names them; left as it is otherwise. */
void rn_json_change_unread(rn_pipeline *p, const char *line, size_t len);

/* Applies one NDJSON input line {rel, op, row}, decoded into z: a line
 * that is not JSON, or whose change is bad, fails the group (a duplicate
 * key in a row names the relation). Returns 0 or an RN_E… code (p->err
 * says why). */
int rn_ndjson_apply_line(rn_pipeline *p, const char *line, size_t len, msgpack_zone *z);

typedef struct rn_run_opts {
  size_t batch;           /* lines per group (0: 1000) */
  bool skip;              /* bad lines go to rejects; otherwise the first stops the run */
  FILE *rejects;          /* may be NULL */
  bool progress;          /* rows/s on stderr, when it is a terminal */
  const char *name;       /* the input's name in messages */
  uint64_t max_rejects;   /* with skip: more rejected lines than this stop the run (0: no bound) */
} rn_run_opts;

typedef struct rn_run_stats {
  uint64_t lines, applied, rejected, groups;
} rn_run_stats;

/* Applies every line of in. On a bad line without skip: the group holding
 * it is rolled back, the groups before it stay committed, and the error
 * says "name:line: reason". */
int rn_run_ndjson(rn_pipeline *p, FILE *in, const rn_run_opts *o, rn_run_stats *st);

#endif
