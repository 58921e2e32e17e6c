/* ndjson.c — NDJSON in and out.
 *
 * Out: a sink writes one JSON object per change, external names as keys
 * (in schema order), the verb in a named field first; a DELETE carries the
 * key columns (a keyless relation's: every column). Strings are escaped by
 * jansson; numbers are written in their shortest form that reads back the
 * same (1.5, not 1.5000000000000000); bytes are base64 strings; structs
 * and maps are objects, lists arrays. A group's lines are written once
 * the LMDB transaction holding the group is durable (a durable sink).
 *
 * In: rn_run_ndjson reads lines {"rel": …, "op": "insert"|"update"|
 * "upsert"|"delete", "row": {…}} and applies them in groups of `batch`.
 * Errors name the input and the line. With skip, a bad line is written to
 * the rejects file (`name:line: reason<TAB>line`) and the rest of its group
 * still applies: a line refused before it wrote anything leaves the group
 * open; one that failed later rolls it back, and the group's other lines
 * are applied again without it. */
#include "ndjson.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jetstream.h"
#include "jscan.h"
#include "json.h"
#include "outbox.h"
#include "row.h"
#include "suggest.h"

/* ---- writing ---- */

static void put(msgpack_sbuffer *b, const char *s, size_t n) { rn_buf_write(b, s, n); }
static void puts_(msgpack_sbuffer *b, const char *s) { put(b, s, strlen(s)); }

static void base64(msgpack_sbuffer *b, const unsigned char *s, size_t n);

static void json_str(msgpack_sbuffer *b, const char *s, size_t n)
{
  if (n == 0) { /* msgpack's empty string may have no bytes (NULL), which jansson refuses */
    puts_(b, "\"\"");
    return;
  }
  json_t *j = json_stringn_nocheck(s, n);
  size_t len = j ? json_dumpb(j, NULL, 0, JSON_ENCODE_ANY) : 0;
  if (j && !len && !rn_utf8_valid(s, n)) {
    /* Not UTF-8, which jansson refuses to dump: such a string is bytes
     * (row.c stores it so now; a state written before holds it as a
     * string), written as bytes are rather than failing the line, and
     * its sink, for good. Checked here only: the usual string pays
     * nothing. */
    json_decref(j);
    base64(b, (const unsigned char *)s, n);
    return;
  }
  char *tmp = len ? malloc(len) : NULL;
  if (tmp && json_dumpb(j, tmp, len, JSON_ENCODE_ANY) == len) put(b, tmp, len);
  else { rn_oom_note(); puts_(b, "null"); } /* out of memory: whatever writes the line fails */
  free(tmp);
  json_decref(j);
}

/* The shortest %g that reads back as the same double. */
static void json_number(msgpack_sbuffer *b, double d)
{
  if (!isfinite(d)) { puts_(b, "null"); return; } /* JSON has no NaN or infinity */
  char tmp[32];
  if (d == floor(d) && fabs(d) < 1e15) { /* whole numbers as 30.0, not 3e+01 */
    snprintf(tmp, sizeof tmp, "%.1f", d);
    puts_(b, tmp);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  puts_(b, tmp);
  if (!strpbrk(tmp, ".eEn")) puts_(b, ".0"); /* a float stays a float */
}

static void base64(msgpack_sbuffer *b, const unsigned char *s, size_t n)
{
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  put(b, "\"", 1);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
    char q[4] = { digits[v >> 18 & 63], digits[v >> 12 & 63], i + 1 < n ? digits[v >> 6 & 63] : '=',
                  i + 2 < n ? digits[v & 63] : '=' };
    put(b, q, 4);
  }
  put(b, "\"", 1);
}


static void json_struct(msgpack_sbuffer *b, const msgpack_object *v, const rn_schema *fields);

static void json_struct(msgpack_sbuffer *b, const msgpack_object *v, const rn_schema *fields)
{
  put(b, "{", 1);
  for (int i = 0; i < fields->ncols; i++) {
    if (i) put(b, ",", 1);
    json_str(b, fields->cols[i].name, fields->cols[i].name_len);
    put(b, ":", 1);
    if ((uint32_t)i < v->via.array.size) rn_json_value(b, &v->via.array.ptr[i], &fields->cols[i]);
    else puts_(b, "null");
  }
  put(b, "}", 1);
}

void rn_json_value(msgpack_sbuffer *b, const msgpack_object *v, const rn_column *c)
{
  char tmp[32];
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: puts_(b, "null"); return;
  case MSGPACK_OBJECT_BOOLEAN: puts_(b, v->via.boolean ? "true" : "false"); return;
  case MSGPACK_OBJECT_POSITIVE_INTEGER: snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v->via.u64); puts_(b, tmp); return;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: snprintf(tmp, sizeof tmp, "%lld", (long long)v->via.i64); puts_(b, tmp); return;
  case MSGPACK_OBJECT_FLOAT32: case MSGPACK_OBJECT_FLOAT64: json_number(b, v->via.f64); return;
  case MSGPACK_OBJECT_STR: json_str(b, v->via.str.ptr, v->via.str.size); return;
  case MSGPACK_OBJECT_BIN: base64(b, (const unsigned char *)v->via.bin.ptr, v->via.bin.size); return;
  case MSGPACK_OBJECT_ARRAY:
    if (c && c->type == RN_T_STRUCT) { json_struct(b, v, c->fields); return; }
    put(b, "[", 1);
    for (uint32_t i = 0; i < v->via.array.size; i++) {
      if (i) put(b, ",", 1);
      rn_json_value(b, &v->via.array.ptr[i], NULL);
    }
    put(b, "]", 1);
    return;
  case MSGPACK_OBJECT_MAP:
    put(b, "{", 1);
    for (uint32_t i = 0; i < v->via.map.size; i++) {
      const msgpack_object *k = &v->via.map.ptr[i].key;
      if (i) put(b, ",", 1);
      if (k->type == MSGPACK_OBJECT_STR) {
        json_str(b, k->via.str.ptr, k->via.str.size);
      } else { /* JSON keys are strings: a number or boolean key is written as text */
        msgpack_sbuffer kb;
        msgpack_sbuffer_init(&kb);
        rn_json_value(&kb, k, NULL);
        json_str(b, kb.data, kb.size);
        msgpack_sbuffer_destroy(&kb);
      }
      put(b, ":", 1);
      rn_json_value(b, &v->via.map.ptr[i].val, NULL);
    }
    put(b, "}", 1);
    return;
  default:
    puts_(b, "null");
  }
}

/* A key's text as a map's writer above writes it, before quoting. */
typedef struct key_text {
  const char *s;
  size_t len;
  size_t at;              /* a key that is no string: its text's offset in the texts buffer */
  uint32_t i;             /* the key's index in the map */
} key_text;

static int cmp_key_text(const void *a, const void *b)
{
  const key_text *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = n ? memcmp(x->s, y->s, n) : 0;
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

int rn_json_keys_clash(const msgpack_object_kv *kv, uint32_t n, uint32_t *x, uint32_t *y)
{
  bool texts = false;
  for (uint32_t i = 0; i < n && !texts; i++) texts = kv[i].key.type != MSGPACK_OBJECT_STR;
  if (!texts) return 0; /* string keys only: unique as values, unique as text */
  key_text *k = malloc(sizeof *k * n);
  if (!k) return -1;
  msgpack_sbuffer b;
  msgpack_sbuffer_init(&b);
  bool oom_before = rn_oom(); /* a flag some earlier failure left is not this walk's */
  for (uint32_t i = 0; i < n; i++) {
    const msgpack_object *o = &kv[i].key;
    size_t at = b.size;
    if (o->type != MSGPACK_OBJECT_STR) rn_json_value(&b, o, NULL);
    k[i] = o->type == MSGPACK_OBJECT_STR ? (key_text){ o->via.str.ptr, o->via.str.size, 0, i }
                                         : (key_text){ NULL, b.size - at, at, i };
  }
  for (uint32_t i = 0; i < n; i++)
    if (!k[i].s) k[i].s = b.data ? b.data + k[i].at : ""; /* the buffer has stopped moving */
  int rc = !oom_before && rn_oom() ? -1 : 0;
  if (!rc) qsort(k, n, sizeof *k, cmp_key_text);
  for (uint32_t i = 1; !rc && i < n; i++)
    if (cmp_key_text(&k[i - 1], &k[i]) == 0) {
      *x = k[i - 1].i < k[i].i ? k[i - 1].i : k[i].i;
      *y = k[i - 1].i < k[i].i ? k[i].i : k[i - 1].i;
      rc = 1;
    }
  msgpack_sbuffer_destroy(&b);
  free(k);
  return rc;
}

int rn_ndjson_line(const rn_schema *s, const char *row, size_t len, bool key_only, const char *verb_field,
                   const char *verb, const char *id_field, const char *id, msgpack_zone *z, msgpack_sbuffer *out)
{
  const msgpack_object *v = rn_row_unpack(row, len, s->ncols, z);
  if (!v) return -1;
  put(out, "{", 1);
  bool first = true;
  if (verb_field) {
    json_str(out, verb_field, strlen(verb_field));
    put(out, ":", 1);
    json_str(out, verb, strlen(verb));
    first = false;
  }
  if (id_field) {
    if (!first) put(out, ",", 1);
    json_str(out, id_field, strlen(id_field));
    put(out, ":", 1);
    json_str(out, id, strlen(id));
    first = false;
  }
  for (int i = 0; i < s->ncols; i++) {
    if (key_only && s->nkey && !s->cols[i].is_key) continue;
    if (!first) put(out, ",", 1);
    first = false;
    json_str(out, s->cols[i].name, s->cols[i].name_len);
    put(out, ":", 1);
    rn_json_value(out, &v[i], &s->cols[i]);
  }
  put(out, "}\n", 2);
  return 0;
}

/* A durable sink (outbox.c): a group's lines are written after the LMDB
 * transaction holding it committed. A sink on a path is named by the
 * file's real path, and its mark keeps the offset just after the last line
 * it wrote for good (its position).
 *
 * Ownership. A state removes or rewrites only lines it wrote itself, and
 * another state (or logrotate) may have touched the file while it was
 * closed. What it wrote itself after its mark can only be the lines of
 * the groups still waiting for it at open (written before a crash took
 * the mark that would have recorded them), from its position on, in
 * order: nothing else writes the file while its flock is held. So at open
 * the waiting groups are checked against the file's bytes at the
 * position rather than cut away: a group found there whole is not
 * written again; one whose lines run to the end of the file is that
 * state's own group cut short by the crash, cut and written again whole.
 * Other lines may follow the position: another state's, written after
 * this one closed; this state then appended its groups after them. So a
 * group not at the position is looked for at each line start after it:
 * found whole, it is not written again and the next group is checked
 * from its end; not found, it stops the check, and every later group is
 * appended at the end (this state writes its groups in order: the later
 * ones never went out either). A group whose first lines are there and then other lines
 * follow cannot be reconciled (cutting would remove another writer's
 * lines, appending would write its first lines twice): the sink says so,
 * naming the file, the relation, the group and the bytes. Content decides
 * (no owner mark lives beside the user's file): a group whose lines
 * another writer appended byte for byte at the position would count as
 * written. No record can close that gap: the state cannot record that
 * its write happened in the same step as the write, and a crash between
 * the two leaves "it wrote, then another writer appended" and "it did
 * not, another writer appended the same bytes" as the same file. Only the
 * lines can tell: with an id field (runnel.ndjson(path, { id = "…" })),
 * every line holds "<state id>:<seq>:<n>", which no other writer's line
 * holds, so the same check matches this state's own lines only.
 *
 * An incomplete last line (no newline) is cut only when it is this
 * state's own: a waiting group whose lines, from a line start after the
 * position, run to the file's end with it (the checks above, and
 * own_tail when other lines follow the position; a crash cut that group
 * short). Any other is another writer's (a program, or another state that
 * crashed mid-write and has not been opened since): the sink neither cuts
 * it nor appends after it (its first line would continue that one). It
 * refuses, naming the file, the line and its bytes: at declaration (at
 * once when no group waits, as no byte after the mark can be its own;
 * else once the waiting groups were checked) and before each run writes
 * (foreign_tail: a program that takes no flock may append one while the
 * sink is open). Its groups wait until the line is ended or removed, or
 * the state that wrote it mends it by declaring its sink again.
 *
 * A file moved or removed (logrotate's rename-and-create, mv, rm) while
 * the sink is open: before each run that has groups to write, the sink
 * compares its path with the file it has open (device and inode). When
 * they differ it syncs the old file (its lines are the groups delivered
 * so far, now covered by the mark), opens the path again (making it), and
 * the outbox records its mark with the new file's position in a
 * transaction of its own before any line goes there (outbox.c, renew), so
 * a crash after the run finds its groups in the new file from that
 * position, never looks for them at the old file's offset.
 *
 * Offsets are the file's own: lines go at the file's end (O_APPEND) and
 * the sink reads where they went, so a file cut shorter (logrotate's
 * copytruncate) between groups or while the state was closed is continued
 * at its new end, never padded with zeros nor cut further. A cut while the
 * sink is open is seen before the next run, as a move is (renew): the
 * mark takes the cut file's end in a transaction of its own before any
 * line goes there (since 0.38).
 *
 * A file shorter than the position at open was cut after the mark: the
 * waiting groups written after the cut are somewhere in it, those written
 * before are in the rotated copy. So each waiting group is looked for at
 * every line start: the first found whole is there (and the groups before
 * it, not found, went out before the cut: none is written again), and the
 * groups after it are checked from its end as above; one whose first lines
 * end the file is cut there and written again whole (the groups before it
 * likewise count as written). Groups none of which is found are written at
 * the end: a group the cut took away cannot be told from one never
 * written, so it may be in the rotated copy and the file both.
 *
 * A file renamed while the state was closed (logrotate's rename-and-create
 * while the process was down after a crash) holds the groups the crash
 * left unconfirmed, at the mark's position. The mark records the file its
 * position is in (device and inode, outbox "of:", since 0.38): when the
 * path names another file now, the file of that identity beside the path
 * (same directory, any name: out.ndjson.1, out.ndjson.old), long enough
 * and with a line starting at the position, is the renamed one. A mark
 * without that record, or whose file is not beside the path (or is the
 * path's, cut shorter than the position: copytruncate leaves a copy), goes
 * by name: a renamed file is then one named the path's name and a
 * rotation's suffix (out.ndjson.1, out.ndjson-20261205, never a copy's
 * such as out.ndjson.bak or out.ndjson~), the latest modified of those
 * long enough, with a line starting at the position. Until the waiting
 * groups are settled the mark keeps that position and file (a crash right
 * after the declaration looks for them there again). The sink checks the
 * waiting groups there, from the position, byte for byte, in order: each
 * found is not written again; one whose first lines end that file (a
 * crash cut it short) is cut there and written whole to the path; at the
 * first not found the rest are looked for in the file at the path as in a
 * cut file (below: copytruncate leaves a copy beside the path too). A
 * renamed file compressed, or moved to another directory, is not found:
 * its groups are written again (with an id field a reader can dedupe).
 * A path that is a symbolic link is resolved once, at the declaration
 * (realpath, which is the sink's key in the state too): "beside the path"
 * is beside the file it resolves to, and its rotations are named after
 * that file (before 0.39 the link's directory and name were searched,
 * where logrotate puts nothing). A link pointed at another file since is
 * another sink, as another path is: the old file's mark stays its own.
 * So while the sink is open it is the resolved path that is compared with
 * the file it has open and opened again ("A file moved or removed"): a
 * link pointed elsewhere meanwhile is not followed (before 0.39 it was,
 * and the old file's mark went on in the new one: a crash then left its
 * waiting group under the old key, written twice or torn and refused).
 *
 * An open file (a caller's FILE: io.stdout, a pipe) keeps its groups in
 * memory (OUTBOX-6). Its lines go out through its descriptor, after the
 * caller's own buffered output, so the sink knows how many bytes of a run
 * went out when a write fails partway (disk full, a non-blocking pipe
 * full): the groups before the failure went out whole and are delivered
 * (kept); the group cut short is never written twice nor left torn where
 * it can be helped. A regular file whose end is still the sink's last byte
 * is cut back to that group's start, and the retry writes it whole. A
 * stream that cannot be cut (a pipe, a terminal, a socket, or a file
 * another writer appended to meanwhile) holds the group's first bytes:
 * the retry writes only the rest, so its reader gets every line once, the
 * torn one completed by the retry; the failure says so, naming the group
 * and the bytes, and so does a close that loses it. A FILE without a
 * descriptor (a memory or cookie stream) is written through stdio so that
 * it, too, tells how much went out (put_stdio), and is treated the same. */
typedef struct nsink {
  FILE *f;                /* a caller's open file, or NULL */
  int fd;                 /* a path sink's descriptor, or -1 */
  int renamed_fd;         /* the file renamed beside the path the waiting groups are looked for in first, or -1
                             (see "A file renamed while the state was closed") */
  bool own;               /* close f when the sink goes */
  char *verb_field;       /* NULL: no verb in the lines */
  char *id_field;         /* NULL: no id in the lines; else each says "<state id>:<seq>:<n>" there */
  const rn_schema *fields_free; /* the columns last found free of the verb and id fields (rn_ndjson_fields_free) */
  char state_id[33];
  msgpack_sbuffer lines;  /* the group's lines, written at its commit */
  msgpack_zone zone;
  uint64_t length;        /* a path sink's position: just after its last line for good */
  uint64_t fd_file[2];    /* fd's device and inode */
  uint64_t mark_file[2];  /* the file the position last given to the outbox is in (nsink_file): the renamed
                             one at declaration while groups wait there, else fd's */
  bool writing;           /* a path sink's current run has written (from run_start to end) */
  uint64_t run_start, end;
  uint64_t kept;          /* the last group put out for good in a run: no failure takes it back */
  uint64_t check_upto;    /* groups up to this seq may be in the file already (0: none) */
  uint64_t check_at;      /* where the next of them would start */
  uint64_t check_end;     /* the file's length at open */
  uint64_t tail_at;       /* where its incomplete last line starts (check_end: none) */
  bool tail_only;         /* other lines follow the position: only the incomplete last line is looked at */
  bool searching;         /* the file was cut shorter than the position: look for the waiting groups anywhere */
  size_t group_at;        /* where the group being staged starts in lines (the earlier ones were not found) */
  struct staged {         /* an open file's groups in lines (its run, or its last 1 MiB of it) */
    uint64_t seq;
    size_t end;           /* just after its text in lines */
    size_t skip;          /* its first bytes, out before (torn_bytes): not in lines */
  } *staged;
  size_t nstaged, capstaged;
  uint64_t torn_seq;      /* an open file that cannot be cut back holds this group's first torn_bytes */
  size_t torn_bytes;
  char *path;             /* a path sink's file and relation, for messages: "link (a link to file)"
                             when the path given is a symbolic link */
  bool link;              /* it is: a message giving a line names the file itself (real) */
  char *real;             /* the path resolved at the declaration (the sink's key): a file moved or removed
                             while open is opened again there, not through a link pointed elsewhere since */
  char *rel_name;
  rn_err conflict;        /* the check found a group it cannot reconcile, or another writer's incomplete line */
  rn_free_fn release;     /* releases the caller's hold on f (a Lua file), or NULL */
  void *release_ctx;
  struct alt {            /* another line format the state recorded for the lines after the mark
                             (OUTBOX-10): a waiting group is looked for in the file in each */
    char *verb_field, *id_field;
    msgpack_sbuffer lines;  /* the group being checked, in that format */
  } alt[8];
  int nalt;
} nsink;

/* A line format as the state records it (OUTBOX-10): msgpack [verb field
 * | nil, id field | nil]. */
static void format_of(const char *verb_field, const char *id_field, msgpack_sbuffer *b)
{
  msgpack_packer pk;
  msgpack_packer_init(&pk, b, rn_buf_write);
  msgpack_pack_array(&pk, 2);
  if (verb_field) msgpack_pack_str_with_body(&pk, verb_field, strlen(verb_field)); else msgpack_pack_nil(&pk);
  if (id_field) msgpack_pack_str_with_body(&pk, id_field, strlen(id_field)); else msgpack_pack_nil(&pk);
}

static void clear_alts(nsink *s)
{
  for (int i = 0; i < s->nalt; i++) msgpack_sbuffer_clear(&s->alt[i].lines);
}

static void free_nsink(void *ctx)
{
  nsink *s = ctx;
  if (s->own && s->f) fclose(s->f);
  if (s->fd >= 0) close(s->fd);
  if (s->renamed_fd >= 0) close(s->renamed_fd);
  if (s->release) s->release(s->release_ctx);
  free(s->verb_field);
  free(s->id_field);
  free(s->path);
  free(s->real);
  free(s->rel_name);
  free(s->staged);
  for (int i = 0; i < s->nalt; i++) {
    free(s->alt[i].verb_field);
    free(s->alt[i].id_field);
    msgpack_sbuffer_destroy(&s->alt[i].lines);
  }
  msgpack_sbuffer_destroy(&s->lines);
  msgpack_zone_destroy(&s->zone);
  free(s);
}

static const char *const verb_names[] = { "", "INSERT", "UPDATE", "DELETE" };

static int nsink_change(void *ctx, rn_rel *rel, const rn_change *c, const rn_sink_info *info, rn_err *e)
{
  nsink *s = ctx;
  bool del = c->verb == RN_DELETE;
  char id[64];
  int rc = rn_ndjson_fields_free(rel, info->seq, "ndjson", s->path, s->verb_field, s->id_field, &s->fields_free, e);
  if (rc) return rc;
  if (s->id_field)
    snprintf(id, sizeof id, "%s:%llu:%llu", s->state_id, (unsigned long long)info->seq, (unsigned long long)info->n);
  rc = rn_ndjson_line(rel->schema, del ? c->old : c->row, del ? c->old_len : c->row_len, del,
                      s->verb_field, verb_names[c->verb], s->id_field, id, &s->zone, &s->lines);
  msgpack_zone_clear(&s->zone);
  for (int i = 0; !rc && info->seq <= s->check_upto && i < s->nalt; i++) { /* as a crashed run may have written it */
    struct alt *a = &s->alt[i];
    if (a->id_field)
      snprintf(id, sizeof id, "%s:%llu:%llu", s->state_id, (unsigned long long)info->seq, (unsigned long long)info->n);
    rc = rn_ndjson_line(rel->schema, del ? c->old : c->row, del ? c->old_len : c->row_len, del,
                        a->verb_field, verb_names[c->verb], a->id_field, id, &s->zone, &a->lines);
    msgpack_zone_clear(&s->zone);
  }
  return rc ? rn_err_set(e, RN_ESTORE, "%s: ndjson: a row could not be decoded", rel->name) : 0;
}

static bool write_all(int fd, const char *data, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= (size_t)w;
  }
  return true;
}

/* Appends the staged lines at the file's end, wherever it is now, and
 * notes where they went (the run's first write notes where it began). */
static bool append_lines(nsink *s)
{
  if (!s->writing) {
    off_t at = lseek(s->fd, 0, SEEK_END);
    if (at < 0) return false;
    s->run_start = s->end = (uint64_t)at;
    s->writing = true;
  }
  bool ok = write_all(s->fd, s->lines.data, s->lines.size);
  off_t at = lseek(s->fd, 0, SEEK_CUR);
  if (at >= 0) s->end = (uint64_t)at;
  return ok && at >= 0;
}

/* One try of put_stdio: *out, how many went. A flush that fails does
 * not say how many of its bytes went (glibc drops the rest of its
 * buffer). A stream with a position says it: the bytes go in one write,
 * and after a failure the position moved by what went. One without goes a
 * byte per flush, each all or nothing (slow, but exact: such a stream is
 * a host's own). */
static bool put_stdio_once(FILE *f, const char *data, size_t n, size_t *out)
{
  off_t from = ftello(f);
  if (from < 0) {
    for (*out = 0; *out < n; ++*out)
      if (fputc((unsigned char)data[*out], f) == EOF || fflush(f) != 0) return false;
    return true;
  }
  *out = 0;
  if (fwrite(data, 1, n, f) == n && fflush(f) == 0) {
    *out = n;
    return true;
  }
  int err = errno;
  off_t at = ftello(f);
  *out = at >= from && (uint64_t)(at - from) <= n ? (size_t)(at - from) : 0; /* its position lost: none, as before */
  errno = err;
  return false;
}

/* Writes n bytes to a stream without a descriptor (a memory or cookie
 * stream), its buffer empty; *out: how many went out. Its write function
 * may take fewer bytes than it is given, as write(2) may: stdio calls that
 * a failure, so the rest is tried again while a try moves on (at most n
 * tries); a try that moves nothing is the failure, with EIO when the
 * stream set no errno. The error flag stdio set on the way is cleared
 * when every byte went (unless the stream had it before). */
static bool put_stdio(FILE *f, const char *data, size_t n, size_t *out)
{
  bool had_error = ferror(f) != 0;
  size_t went = 0;
  *out = 0;
  while (*out < n) {
    errno = 0;
    bool ok = put_stdio_once(f, data + *out, n - *out, &went);
    *out += went;
    if (ok) break;
    if (went == 0) {
      if (errno == 0) errno = EIO;
      return false;
    }
  }
  if (!had_error) clearerr(f);
  return true;
}

/* Writes n bytes to the caller's open file f after its own buffered
 * output; *out: how many went out (see "An open file" above). */
static bool put_file(FILE *f, const char *data, size_t n, size_t *out)
{
  *out = 0;
  errno = 0;
  if (fflush(f) != 0) { /* the caller's output first: none of ours went */
    if (errno == 0) errno = EIO;
    return false;
  }
  int fd = fileno(f);
  if (fd < 0) return put_stdio(f, data, n, out);
  bool seekable = lseek(fd, 0, SEEK_CUR) >= 0;
  bool ok = true;
  while (*out < n) {
    ssize_t w = write(fd, data + *out, n - *out);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      ok = false;
      break;
    }
    *out += (size_t)w;
  }
  int err = errno;
  off_t at = seekable ? lseek(fd, 0, SEEK_CUR) : -1;
  if (at >= 0) fseeko(f, at, SEEK_SET); /* stdio's idea of the position follows the descriptor's */
  errno = err;
  return ok;
}

/* Cuts the last `part` bytes written to the caller's file away, if it is a
 * regular file that ends with them (nobody appended since). */
static bool cut_back(FILE *f, size_t part)
{
  int fd = fileno(f);
  struct stat st;
  off_t at = fd >= 0 ? lseek(fd, 0, SEEK_CUR) : -1;
  if (at < (off_t)part || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != at) return false;
  at -= (off_t)part;
  if (ftruncate(fd, at) != 0 || lseek(fd, at, SEEK_SET) != at) return false;
  fseeko(f, at, SEEK_SET);
  return true;
}

/* A write to the caller's file failed after `out` bytes of lines went
 * out: the groups it holds whole are kept; the group it cut short is cut
 * back, or its first bytes noted, so that the retry writes only the rest. */
static int short_write(nsink *s, size_t out, int err, rn_err *e)
{
  size_t i = 0, start = 0;
  while (i < s->nstaged && s->staged[i].end <= out) start = s->staged[i++].end;
  if (i) s->kept = s->staged[i - 1].seq;
  char note[256] = "";
  if (i < s->nstaged) {
    const struct staged *g = &s->staged[i];
    size_t part = out - start, torn = g->skip + part;
    s->torn_seq = 0;
    if (torn && !(g->skip == 0 && cut_back(s->f, part))) {
      s->torn_seq = g->seq;
      s->torn_bytes = torn;
      snprintf(note, sizeof note, " (group %llu: its first %zu bytes were written (they end in a torn line), "
               "and it cannot be cut back: the rest goes out first when its delivery is retried)",
               (unsigned long long)g->seq, torn);
    }
  }
  return rn_err_set(e, RN_EIO, "%s: ndjson: writing: %s%s", s->rel_name, strerror(err), note);
}

/* The length of fd's complete lines (size bytes): a torn last line is
 * not counted. */
static uint64_t complete_length(int fd, uint64_t size)
{
  char buf[4096];
  uint64_t end = size;
  while (end > 0) {
    size_t n = end < sizeof buf ? (size_t)end : sizeof buf;
    if (pread(fd, buf, n, (off_t)(end - n)) != (ssize_t)n) return size;
    for (size_t i = n; i > 0; i--)
      if (buf[i - 1] == '\n') return end - n + i;
    end -= n;
  }
  return 0;
}

/* The line number of the incomplete line that starts at byte `at` (1 +
 * the newlines before it; an error path: it reads the file up to there). */
static uint64_t line_at(int fd, uint64_t at)
{
  char buf[65536];
  uint64_t line = 1;
  for (uint64_t off = 0; off < at;) {
    size_t k = at - off < sizeof buf ? (size_t)(at - off) : sizeof buf;
    ssize_t got = pread(fd, buf, k, (off_t)off);
    if (got <= 0) break;
    for (ssize_t i = 0; i < got; i++) line += buf[i] == '\n';
    off += (uint64_t)got;
  }
  return line;
}

/* The refusal of a file whose last line (from `whole` to `size`) is
 * another writer's incomplete line (see "An incomplete last line"). */
static int foreign_tail_error(rn_err *e, const char *rel_name, const char *path, int fd, uint64_t whole,
                              uint64_t size)
{
  return rn_err_set(e, RN_EIO,
                    "%s: ndjson: %s:%llu: the file ends in an incomplete line (bytes %llu to %llu, no newline) "
                    "that this state did not write (another program's, or another state's cut short by a "
                    "crash): it neither cuts another writer's bytes nor appends its lines to that line; end the "
                    "line with a newline, remove it, or first declare the sink of the state that wrote it",
                    rel_name, path, (unsigned long long)line_at(fd, whole), (unsigned long long)whole,
                    (unsigned long long)size);
}

/* Before a path sink's run writes: the file must end in a whole line
 * (its own torn lines were cut at open: what is left is another's). */
static int foreign_tail(nsink *s, rn_err *e)
{
  struct stat st;
  char last;
  if (fstat(s->fd, &st) != 0 || st.st_size == 0 || pread(s->fd, &last, 1, st.st_size - 1) != 1 || last == '\n')
    return 0; /* what cannot be read is the write's to report */
  uint64_t size = (uint64_t)st.st_size;
  return foreign_tail_error(e, s->rel_name, s->link ? s->real : s->path, s->fd, complete_length(s->fd, size), size);
}

/* Writes the staged lines (after the run's bytes already written). */
static int write_lines(nsink *s, rn_err *e)
{
  size_t n = s->lines.size, out = 0;
  int rc = 0;
  if (n && s->fd >= 0 && !s->writing && (rc = foreign_tail(s, e))) {
    s->conflict = *e; /* the run fails, its groups wait; a declaration delivering them fails too */
  } else if (n && s->fd >= 0 && !append_lines(s)) {
    rc = rn_err_set(e, RN_EIO, "%s: ndjson: %s: writing: %s", s->rel_name, s->path, strerror(errno));
  }
  else if (n && s->fd < 0 && !put_file(s->f, s->lines.data, n, &out)) rc = short_write(s, out, errno, e);
  else if (n && s->fd < 0) {
    if (s->nstaged) s->kept = s->staged[s->nstaged - 1].seq; /* out for good: a failure later in the run cannot take it back */
    s->torn_seq = 0;
  }
  msgpack_sbuffer_clear(&s->lines);
  s->group_at = 0;
  s->nstaged = 0;
  return rc;
}

/* An open file's group seq, its lines staged from group_at: the bytes of
 * it already out (torn_seq) are dropped, and where it ends is noted. */
static int stage_open(nsink *s, uint64_t seq, rn_err *e)
{
  size_t len = s->lines.size - s->group_at;
  size_t skip = seq == s->torn_seq ? (s->torn_bytes < len ? s->torn_bytes : len) : 0;
  if (s->nstaged == s->capstaged) {
    size_t cap = s->capstaged ? s->capstaged * 2 : 16;
    struct staged *a = realloc(s->staged, cap * sizeof *a);
    if (!a) return rn_err_set(e, RN_ENOMEM, "out of memory");
    s->staged = a;
    s->capstaged = cap;
  }
  memmove(s->lines.data + s->group_at, s->lines.data + s->group_at + skip, len - skip);
  s->lines.size -= skip;
  s->staged[s->nstaged++] = (struct staged){ seq, s->lines.size, skip };
  return 0;
}

/* How many of want's n bytes the file holds from at on. */
static size_t same_bytes(int fd, uint64_t at, const char *want, size_t n)
{
  char buf[4096];
  size_t same = 0;
  while (same < n) {
    size_t k = n - same < sizeof buf ? n - same : sizeof buf;
    ssize_t got = pread(fd, buf, k, (off_t)(at + same));
    if (got <= 0) return same;
    for (ssize_t i = 0; i < got; i++, same++)
      if (buf[i] != want[same]) return same;
  }
  return same;
}

/* The length of the whole lines at the start of text's n bytes. */
static size_t whole_lines(const char *text, size_t n)
{
  while (n > 0 && text[n - 1] != '\n') n--;
  return n;
}

static int own_tail(nsink *s, rn_err *e);
static uint64_t next_line(int fd, uint64_t at, uint64_t end);

/* The staged group seq in line format c (-1: its declaration's; else a
 * recorded one, OUTBOX-10). */
static const msgpack_sbuffer *group_lines(const nsink *s, int c)
{
  return c < 0 ? &s->lines : &s->alt[c].lines;
}

/* Group seq, waited at open, was found whole in the file, ending at end:
 * kept for good, not written again; the next waiting group is checked
 * from there. Returns 1. */
static int found_whole(nsink *s, uint64_t seq, uint64_t end)
{
  s->check_at = s->length = end;
  s->kept = seq;
  msgpack_sbuffer_clear(&s->lines);
  return 1;
}

/* The staged group seq, not at the position and other lines there (see
 * the ownership note above): whether it is whole at a line start after
 * them, where this state appended it after another's lines before a
 * crash took its mark. Then it is kept for good and the next waiting
 * group is checked from its end (1); else 0. */
static int found_after(nsink *s, uint64_t seq)
{
  for (uint64_t at = next_line(s->fd, s->check_at, s->check_end); at < s->check_end;
       at = next_line(s->fd, at, s->check_end))
    for (int c = -1; c < s->nalt; c++) { /* its declaration's format, then those recorded (OUTBOX-10) */
      const msgpack_sbuffer *b = group_lines(s, c);
      if (b->size <= s->check_end - at && same_bytes(s->fd, at, b->data, b->size) == b->size)
        return found_whole(s, seq, at + b->size);
    }
  return 0;
}

/* Group seq, staged, waited at open: whether a crash left its lines in
 * the file at check_at (see the ownership note above). 1: they are there
 * (not written again, kept for good); 0: write it (appended at the end;
 * when other lines are there and the file ends in an incomplete line,
 * that line is looked at for this group and the later ones: own_tail);
 * else the error. */
static int check_group(nsink *s, uint64_t seq, rn_err *e)
{
  uint64_t there = s->check_end - s->check_at;
  size_t first = 0; /* the most whole lines of it the file holds, in any format */
  bool tail = false;
  for (int c = -1; c < s->nalt; c++) { /* its declaration's format, then those recorded (OUTBOX-10) */
    const msgpack_sbuffer *b = group_lines(s, c);
    size_t same = same_bytes(s->fd, s->check_at, b->data, b->size);
    if (same == b->size) return found_whole(s, seq, s->check_at + b->size);
    tail |= same == there;
    size_t whole = whole_lines(b->data, same);
    if (whole > first) first = whole;
  }
  if (!tail && first == 0 && found_after(s, seq)) return 1;
  uint64_t from = s->check_at, seq_upto = s->check_upto;
  s->check_upto = 0; /* the groups after it are not in the file */
  if (tail) { /* its first lines end the file: its own group, cut short by the crash */
    if (ftruncate(s->fd, (off_t)from) != 0)
      return rn_err_set(e, RN_EIO, "%s: ndjson: cutting %s back to its last group: %s", s->rel_name, s->path,
                        strerror(errno));
    s->length = from;
    return 0;
  }
  if (first == 0 && s->tail_at < s->check_end) { /* another writer's lines; its own torn line may end the file */
    s->check_upto = seq_upto;
    s->tail_only = true;
    return own_tail(s, e);
  }
  if (first == 0) return 0; /* another writer's lines: this group was never written */
  rn_err_set(&s->conflict, RN_EIO,
             "%s: ndjson: %s: bytes %llu to %llu hold the first lines of group %llu of %s, which a crash cut "
             "short, and other lines (another state's or program's) follow them: this state neither cuts lines "
             "it did not write nor writes a line twice; remove those bytes to have group %llu written again whole",
             s->rel_name, s->path, (unsigned long long)from, (unsigned long long)(from + first), (unsigned long long)seq,
             s->rel_name, (unsigned long long)seq);
  s->check_upto = seq; /* says so again at each delivery */
  *e = s->conflict;
  return e->code;
}

/* Where the line after the one at `at` starts (end: none). */
static uint64_t next_line(int fd, uint64_t at, uint64_t end)
{
  char buf[4096];
  while (at < end) {
    size_t k = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
    ssize_t got = pread(fd, buf, k, (off_t)at);
    if (got <= 0) return end;
    const char *nl = memchr(buf, '\n', (size_t)got);
    if (nl) return at + (uint64_t)(nl - buf) + 1;
    at += (uint64_t)got;
  }
  return end;
}

/* The staged group (in any format), other lines having followed the
 * position (check_group): whether its first lines, from a line start
 * after the position, end the file in its incomplete last line (a crash
 * cut it short after this state appended it after another's lines). Then
 * they are cut (it is written again whole) and no later group is looked
 * for; else the next waiting group may be the one. 0 or the error. */
static int own_tail(nsink *s, rn_err *e)
{
  for (int c = -1; c < s->nalt; c++) {
    const char *want = c < 0 ? s->lines.data + s->group_at : s->alt[c].lines.data;
    size_t n = c < 0 ? s->lines.size - s->group_at : s->alt[c].lines.size;
    uint64_t at = s->check_end - s->check_at > n ? s->check_end - n : s->check_at; /* its text reaches the end */
    char before;
    if (at > s->check_at && pread(s->fd, &before, 1, (off_t)at - 1) == 1 && before != '\n')
      at = next_line(s->fd, at, s->check_end);
    for (; at < s->check_end; at = next_line(s->fd, at, s->check_end)) {
      if (same_bytes(s->fd, at, want, n) != s->check_end - at) continue;
      if (ftruncate(s->fd, (off_t)at) != 0)
        return rn_err_set(e, RN_EIO, "%s: ndjson: cutting %s back to its last group: %s", s->rel_name, s->path,
                          strerror(errno));
      s->check_end = s->tail_at = at;
      s->tail_only = false;
      s->check_upto = 0;
      return 0;
    }
  }
  return 0;
}

/* Group seq, staged after the waiting groups not found before it, with
 * the file cut shorter than the position (see the ownership note above):
 * looked for at each line start. 1: found whole (neither it nor those
 * before it is written; the next groups are checked from its end); 0:
 * write what is staged (not found, or its first lines end the file: cut
 * there, it alone is written); else the error. */
static int search_group(nsink *s, uint64_t seq, rn_err *e)
{
  const char *group = s->lines.data + s->group_at;
  size_t n = s->lines.size - s->group_at;
  for (uint64_t at = 0; at < s->check_end; at = next_line(s->fd, at, s->check_end)) {
    for (int c = -1; c < s->nalt; c++) { /* its declaration's format, then those recorded (OUTBOX-10) */
      const char *want = c < 0 ? group : s->alt[c].lines.data;
      size_t wn = c < 0 ? n : s->alt[c].lines.size;
      size_t same = same_bytes(s->fd, at, want, wn);
      if (same == wn) {
        s->searching = false;
        return found_whole(s, seq, at + wn);
      }
      if (same == s->check_end - at) { /* the file ends in a newline: same ends a line */
        s->searching = false;
        s->check_upto = 0;
        if (ftruncate(s->fd, (off_t)at) != 0)
          return rn_err_set(e, RN_EIO, "%s: ndjson: cutting %s back to its last group: %s", s->rel_name, s->path,
                            strerror(errno));
        s->length = at;
        memmove(s->lines.data, group, n);
        s->lines.size = n;
        return 0;
      }
    }
  }
  return 0;
}

/* Group seq, staged, waited at open, the file at the path replaced (see
 * "A file renamed while the state was closed"): looked for in the renamed
 * file at check_at. 1: found whole there (not written again); 0: write it
 * (its first lines ended that file and were cut); else as search_group,
 * which then looks for it and the later groups in the path's file. */
/* The renamed file let go (its flock with it) once no waiting group can be
 * looked for there: the groups found there are kept for good. */
static void drop_renamed(nsink *s)
{
  if (s->renamed_fd >= 0) close(s->renamed_fd);
  s->renamed_fd = -1;
}

static int renamed_group(nsink *s, uint64_t seq, rn_err *e)
{
  const char *group = s->lines.data + s->group_at;
  size_t n = s->lines.size - s->group_at;
  bool cut = false;
  for (int c = -1; c < s->nalt && !cut; c++) { /* its declaration's format, then those recorded (OUTBOX-10) */
    const char *want = c < 0 ? group : s->alt[c].lines.data;
    size_t wn = c < 0 ? n : s->alt[c].lines.size;
    size_t same = same_bytes(s->renamed_fd, s->check_at, want, wn);
    if (same == wn) {
      s->check_at += wn;
      s->kept = seq;
      s->lines.size = s->group_at;
      if (seq >= s->check_upto) drop_renamed(s); /* the last that may be there */
      return 1;
    }
    cut = same > 0 && same == s->check_end - s->check_at;
  }
  int fd = s->renamed_fd;
  s->renamed_fd = -1;
  struct stat st;
  int rc = 0;
  if (cut && ftruncate(fd, (off_t)s->check_at) != 0) /* its own group, cut short by the crash */
    rc = rn_err_set(e, RN_EIO, "%s: ndjson: cutting the renamed file of %s back to its last group: %s", s->rel_name,
                    s->path, strerror(errno));
  close(fd);
  if (rc || cut || fstat(s->fd, &st) != 0) {
    s->check_upto = 0; /* the later groups never went out */
    return rc;
  }
  s->searching = true; /* the later groups may be in the path's file, written after a copytruncate */
  s->check_end = (uint64_t)st.st_size;
  return search_group(s, seq, e);
}

/* A group's lines wait for the end of the run, unless they grow large. */
static int nsink_commit(void *ctx, uint64_t seq, rn_err *e)
{
  nsink *s = ctx;
  int rc = 0;
  if (seq > s->check_upto) drop_renamed(s); /* the waiting groups before it had no lines for it */
  if (seq <= s->check_upto && s->renamed_fd >= 0) rc = renamed_group(s, seq, e);
  else if (seq <= s->check_upto && s->searching) rc = search_group(s, seq, e);
  else if (seq <= s->check_upto && s->tail_only) rc = own_tail(s, e);
  else if (seq <= s->check_upto && s->check_at < s->check_end) rc = check_group(s, seq, e);
  clear_alts(s); /* they hold the one group checked */
  if (rc) return rc == 1 ? 0 : rc;
  if (s->fd < 0 && (rc = stage_open(s, seq, e))) return rc;
  s->group_at = s->lines.size;
  if (s->lines.size < ((size_t)1 << 20)) return 0;
  s->searching = false; /* what is written stays written */
  return write_lines(s, e); /* an open file keeps it (a path sink cuts a failed run back) */
}

static uint64_t nsink_kept(void *ctx) { return ((nsink *)ctx)->kept; }

static int nsink_finish(void *ctx, rn_err *e)
{
  nsink *s = ctx;
  int rc = write_lines(s, e);
  if (!rc && s->writing) s->length = s->end;
  if (!rc) s->writing = false; /* else discard cuts the run away */
  return rc;
}

/* The run failed: a path sink cuts its file back to where the run began
 * (its bytes are the file's end: nothing else writes it while its lock is
 * held), unless the file was cut shorter meanwhile (no zeros). */
static void nsink_discard(void *ctx)
{
  nsink *s = ctx;
  struct stat st;
  msgpack_sbuffer_clear(&s->lines);
  clear_alts(s);
  s->group_at = 0;
  s->nstaged = 0;
  msgpack_zone_clear(&s->zone);
  if (s->fd >= 0 && s->writing && fstat(s->fd, &st) == 0 && (uint64_t)st.st_size >= s->run_start &&
      ftruncate(s->fd, (off_t)s->run_start) != 0) { /* the next open's check finds the group cut short */ }
  s->writing = false;
}

static int nsink_sync(void *ctx, rn_err *e)
{
  nsink *s = ctx;
  if (s->fd >= 0 && fdatasync(s->fd) != 0) return rn_err_set(e, RN_EIO, "syncing: %s", strerror(errno));
  return 0;
}

/* A path sink's position for its mark: the end of its last line for
 * good, in the file it has open (nsink_file says which). */
static uint64_t nsink_position(void *ctx)
{
  nsink *s = ctx;
  memcpy(s->mark_file, s->fd_file, sizeof s->mark_file);
  return s->length;
}

static bool nsink_file(void *ctx, uint64_t id[2])
{
  memcpy(id, ((nsink *)ctx)->mark_file, sizeof ((nsink *)ctx)->mark_file);
  return true;
}

static void file_id(const struct stat *st, uint64_t id[2])
{
  id[0] = (uint64_t)st->st_dev;
  id[1] = (uint64_t)st->st_ino;
}

/* A path sink before a run (see "A file moved or removed" above): 0 when
 * its path still names the file it has open; else 1, and with reopen the
 * old file is synced, the path opened (made) again and locked, and the
 * sink goes on at its end. An error keeps the old file (the run waits). */
static int nsink_renew(void *ctx, bool reopen, rn_err *e)
{
  nsink *s = ctx;
  struct stat open_st, path_st;
  if (s->fd < 0 || fstat(s->fd, &open_st) != 0) return 0;
  if (stat(s->real, &path_st) == 0 && path_st.st_dev == open_st.st_dev && path_st.st_ino == open_st.st_ino) {
    if ((uint64_t)open_st.st_size >= s->length) return 0;
    /* cut shorter than its position while open (copytruncate): the mark
     * takes the cut file's end before a line goes there, so a crash after
     * the run finds the run's groups from there (before 0.38 the mark kept
     * the position in the file before the cut, inside the lines written
     * since, and they were written again) */
    if (!reopen) return 1;
    uint64_t size = (uint64_t)open_st.st_size;
    s->length = s->tail_at = complete_length(s->fd, size);
    s->check_end = size;
    s->check_upto = 0; /* groups a crash left before the cut are not looked for after it */
    s->searching = s->tail_only = false;
    drop_renamed(s);
    return 1;
  }
  if (!reopen) return 1;
  if (fdatasync(s->fd) != 0 && errno != EINVAL)
    return rn_err_set(e, RN_EIO, "%s: ndjson: %s was moved or removed: syncing the lines written to it: %s",
                      s->rel_name, s->path, strerror(errno));
  const char *kind = rn_sink_path_kind(s->real);
  if (kind)
    return rn_err_set(e, RN_EINVAL, "%s: ndjson: %s was replaced by %s, not a regular file: its groups wait until it "
                      "is a regular file again (or none)", s->rel_name, s->path, kind);
  int fd = open(s->real, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    return rn_err_set(e, RN_EIO, "%s: ndjson: %s was moved or removed; opening it again: %s", s->rel_name, s->path,
                      strerror(err));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    close(fd);
    return rn_err_set(e, RN_EMISUSE, "%s: ndjson: %s was moved or removed, and the file now there is another durable "
                      "sink's (one state writes a file at a time)", s->rel_name, s->path);
  }
  close(s->fd); /* its lock goes with it */
  s->fd = fd;
  file_id(&st, s->fd_file);
  drop_renamed(s);
  s->length = s->tail_at = s->check_end = (uint64_t)st.st_size;
  s->check_upto = 0; /* groups a crash left in the old file are not looked for in the new one */
  s->searching = s->tail_only = false;
  s->conflict = (rn_err){ .code = RN_OK }; /* the old file's */
  return 1;
}

static const rn_outbox_ops nsink_ops = { nsink_change, nsink_commit, nsink_finish, nsink_discard, nsink_sync,
                                         nsink_position, NULL, nsink_kept, nsink_renew,
                                         true, /* a log: each group in the columns it was committed with */
                                         nsink_file };

static nsink *new_nsink(const char *verb_field, const char *id_field)
{
  nsink *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->fd = s->renamed_fd = -1;
  msgpack_sbuffer_init(&s->lines);
  if (!msgpack_zone_init(&s->zone, 4096)) { free(s); return NULL; }
  if ((verb_field && !(s->verb_field = strdup(verb_field))) || (id_field && !(s->id_field = strdup(id_field)))) {
    free_nsink(s);
    return NULL;
  }
  return s;
}

int rn_ndjson_id_clash(rn_pipeline *p, const rn_rel *rel, const char *verb_field, const char *id_field)
{
  if (!id_field) return 0;
  if (verb_field && strcmp(verb_field, id_field) == 0)
    return rn_err_set(&p->err, RN_EINVAL, "%s: the id field \"%s\" is also the verb field: name them apart",
                      rel->name, id_field);
  if (rn_schema_slot(rel->schema, id_field, strlen(id_field)) < 0) return 0;
  return rn_err_set(&p->err, RN_EINVAL,
                    "%s: the id field \"%s\" is also a column of %s, so each line would hold \"%s\" twice: name "
                    "another field ({ id = \"…\" })", rel->name, id_field, rel->name, id_field);
}

int rn_ndjson_fields_free(const rn_rel *rel, uint64_t seq, const char *sink, const char *target,
                          const char *verb_field, const char *id_field, const rn_schema **checked, rn_err *e)
{
  if (rel->schema == *checked) return 0;
  const char *f = verb_field && rn_schema_slot(rel->schema, verb_field, strlen(verb_field)) >= 0 ? verb_field
                  : id_field && rn_schema_slot(rel->schema, id_field, strlen(id_field)) >= 0 ? id_field
                  : NULL;
  if (!f) {
    *checked = rel->schema;
    return 0;
  }
  const char *kind = f == verb_field ? "verb" : "id";
  return rn_err_set(e, RN_EINVAL,
                    "%s: %s%s%s: group %llu waits in the columns it was committed with, and its column \"%s\" is "
                    "the sink's %s field: each line would hold \"%s\" twice; declare the sink with another %s field "
                    "until the waiting groups are out",
                    rel->name, sink, target ? ": " : "", target ? target : "", (unsigned long long)seq, f, kind, f,
                    kind);
}

/* The checks of both kinds of NDJSON sink, and the state's id for lines
 * that carry one (read before the sink acts on its file). */
static int check_fields(rn_pipeline *p, const rn_rel *rel, const char *verb_field, const char *id_field,
                        char state_id[33])
{
  if (p->state != RN_IDLE) return rn_outbox_sink_check(p, rel, NULL); /* says sinks are added outside groups */
  int rc = rn_check_not_lookup(p, rel->name, "sink", rel); /* before a file is made */
  if (!rc) rc = rn_ndjson_verb_clash(p, rel, verb_field);
  if (!rc) rc = rn_ndjson_id_clash(p, rel, verb_field, id_field);
  if (!rc && id_field) rc = rn_state_id(p, state_id);
  return rc;
}

int rn_ndjson_verb_clash(rn_pipeline *p, const rn_rel *rel, const char *verb_field)
{
  if (!verb_field || rn_schema_slot(rel->schema, verb_field, strlen(verb_field)) < 0) return 0;
  return rn_err_set(&p->err, RN_EINVAL,
                    "%s: the verb field \"%s\" is also a column of %s, so each line or message would hold \"%s\" "
                    "twice: name another field ({ verb = \"…\" }) or leave the verb out (verb = false)",
                    rel->name, verb_field, rel->name, verb_field);
}

int rn_ndjson_sink(rn_pipeline *p, rn_rel *rel, FILE *f, bool own, const char *verb_field, const char *id_field,
                   rn_free_fn release, void *release_ctx)
{
  char state_id[33] = "";
  int rc = check_fields(p, rel, verb_field, id_field, state_id);
  nsink *s = rc ? NULL : new_nsink(verb_field, id_field);
  if (s && !(s->rel_name = strdup(rel->name))) {
    free_nsink(s);
    s = NULL;
  }
  if (!s) {
    if (own) fclose(f);
    if (release) release(release_ctx);
    return rc ? rc : rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  }
  memcpy(s->state_id, state_id, sizeof state_id);
  s->f = f;
  s->own = own;
  s->release = release;
  s->release_ctx = release_ctx;
  return rn_outbox_sink_add(p, rel, NULL, "NDJSON sink on an open file", false, &nsink_ops, s, free_nsink, 0, 0);
}

/* One durable sink per file at a time: a sink's lines after its mark are
 * told from others' by where they are (ndjson.c, "Ownership"), which
 * holds only while no one else appends. An exclusive flock, held while fd
 * is open (a filesystem without flock goes unguarded). */
static int lock_file(rn_pipeline *p, const rn_rel *rel, int fd, const char *path, const struct stat *st)
{
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) return 0;
  uint64_t id[2];
  file_id(st, id);
  const char *mine = rn_outbox_sink_on_file(p, id); /* a hard link to this pipeline's own sink's file */
  if (mine)
    return rn_err_set(&p->err, RN_EINVAL, "%s: ndjson: %s is the file of this pipeline's %s, by another name: "
                      "two sinks cannot write one file", rel->name, path, mine);
  return rn_err_set(&p->err, RN_EMISUSE,
                    "%s: ndjson: %s is the file of another durable sink (of another state, in this process "
                    "or another): one state writes a file at a time (in turn, each appends after the other's lines)",
                    rel->name, path);
}

/* Whether suffix (what follows the path's name) is one a rotation gives:
 * a separator (. - _) and then digits and separators, with a digit:
 * ".1", "-20261205", "-2026-12-05_10", ".1733400000". A user's copy
 * (".bak", "~", ".orig", ".prev", an editor's ".~1~") is not one: it
 * holds the file's bytes too, and a group found there, or cut there,
 * would be taken from the wrong file (nothing records which file the
 * path was: the choice is by name, length and mtime). */
static bool rotation_suffix(const char *suffix)
{
  bool digit = false;
  if (!*suffix || !strchr(".-_", *suffix)) return false; /* strchr finds the terminator too */
  for (const char *c = suffix + 1; *c; c++) {
    if (*c >= '0' && *c <= '9') digit = true;
    else if (!strchr(".-_", *c)) return false;
  }
  return digit;
}

/* file, a regular file (not a link), open for reading and cutting when it
 * can hold the waiting groups from position (at least that long, a line
 * starting there) and no durable sink has it (flock, held while it is
 * open); else -1. *st: its status. */
static int renamed_candidate(const char *file, uint64_t position, struct stat *st)
{
  char before = '\n';
  int fd = lstat(file, st) == 0 && S_ISREG(st->st_mode) ? open(file, O_RDWR | O_CLOEXEC | O_NOFOLLOW) : -1;
  if (fd < 0) return -1;
  if (!(flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) && /* not a live sink's file */
      fstat(fd, st) == 0 && S_ISREG(st->st_mode) && (uint64_t)st->st_size >= position &&
      (position == 0 || pread(fd, &before, 1, (off_t)position - 1) == 1) && before == '\n')
    return fd;
  close(fd);
  return -1;
}

static uint64_t file_length(int fd, uint64_t otherwise)
{
  struct stat st;
  return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : otherwise;
}

/* The file renamed beside path (see "A file renamed while the state was
 * closed"), open for reading and cutting, or -1: path is the sink's path
 * resolved (realpath: through a symbolic link, the file it names, whose
 * rotation logrotate makes beside it, not beside the link); in path's
 * directory, a
 * renamed_candidate for position that is, with id, the file of that
 * device and inode under any other name; without, one named path's name
 * and a rotation's suffix, the latest modified of such. */
static int renamed_file(const char *path, uint64_t position, const uint64_t *id)
{
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dlen = slash ? (size_t)(slash - path) + 1 : 0, blen = strlen(base);
  char dirname[PATH_MAX], file[PATH_MAX];
  if (blen == 0 || dlen + 1 >= sizeof dirname) return -1;
  memcpy(dirname, slash ? path : ".", slash ? dlen : 1);
  dirname[slash ? dlen : 1] = 0;
  DIR *d = opendir(dirname);
  if (!d) return -1;
  int best = -1;
  struct timespec best_at = { 0, 0 };
  for (struct dirent *de; (de = readdir(d));) {
    struct stat st;
    uint64_t at[2];
    if ((id ? !strcmp(de->d_name, base)
            : strncmp(de->d_name, base, blen) != 0 || !rotation_suffix(de->d_name + blen)) ||
        (size_t)snprintf(file, sizeof file, "%.*s%s", (int)dlen, path, de->d_name) >= sizeof file)
      continue;
    if (id && (lstat(file, &st) != 0 || (file_id(&st, at), at[0] != id[0] || at[1] != id[1])))
      continue;
    int fd = renamed_candidate(file, position, &st);
    if (fd >= 0 && id) { /* the file itself */
      best = fd;
      break;
    }
    if (fd >= 0 && (best < 0 || st.st_mtim.tv_sec > best_at.tv_sec ||
                    (st.st_mtim.tv_sec == best_at.tv_sec && st.st_mtim.tv_nsec > best_at.tv_nsec))) {
      if (best >= 0) close(best);
      best = fd;
      best_at = st.st_mtim;
    } else if (fd >= 0) {
      close(fd);
    }
  }
  closedir(d);
  return best;
}

/* A sink given a symbolic link writes the file the link named at its
 * declaration (s->real), which the link may stop naming: its messages name
 * both. False when out of memory. */
static bool name_link(nsink *s)
{
  struct stat st;
  if (lstat(s->path, &st) != 0 || !S_ISLNK(st.st_mode)) return true;
  size_t n = strlen(s->path) + strlen(s->real) + 16;
  char *shown = malloc(n);
  if (!shown) return false;
  snprintf(shown, n, "%s (a link to %s)", s->path, s->real);
  free(s->path);
  s->path = shown;
  s->link = true;
  return true;
}

/* Where a path sink starts (see the ownership note above): with a mark
 * whose position the file still reaches, the groups waiting now are
 * checked against the file from there. An incomplete last line is left to
 * those checks (one of them cuts it if it is this state's own); with no
 * group waiting it cannot be: refused. real: the path resolved, where a
 * renamed file is looked for. */
static int place_sink(rn_pipeline *p, rn_rel *rel, nsink *s, const rn_outbox_mark *m, uint64_t size,
                      const char *real)
{
  uint64_t whole = complete_length(s->fd, size);
  bool waiting = m->found && m->delivered < p->seq;
  if (whole < size && !waiting)
    return foreign_tail_error(&p->err, rel->name, s->link ? s->real : s->path, s->fd, whole, size);
  s->length = s->tail_at = whole;
  s->check_end = size; /* the checks compare the incomplete line too */
  memcpy(s->mark_file, s->fd_file, sizeof s->mark_file);
  if (waiting && m->has_file && (s->fd_file[0] != m->file[0] || s->fd_file[1] != m->file[1]) &&
      (s->renamed_fd = renamed_file(real, m->position, m->file)) >= 0) {
    s->check_at = m->position; /* the file the mark's position is in, renamed: its groups are there */
    s->check_end = file_length(s->renamed_fd, m->position);
    s->check_upto = p->seq;
    memcpy(s->mark_file, m->file, sizeof s->mark_file);
  } else if (m->found && m->position <= whole) {
    s->length = s->check_at = m->position;
    s->check_upto = p->seq;
  } else if (waiting && (s->renamed_fd = renamed_file(real, m->position, NULL)) >= 0) {
    struct stat st;
    s->check_at = m->position; /* the file was renamed: its groups are looked for there first */
    s->check_end = file_length(s->renamed_fd, m->position);
    s->check_upto = p->seq;
    if (fstat(s->renamed_fd, &st) == 0) file_id(&st, s->mark_file);
  } else if (m->found) { /* cut shorter after the mark */
    s->searching = true;
    s->check_upto = p->seq;
  }
  return 0;
}

/* The line formats the state recorded with the mark (OUTBOX-10) other than
 * own (the declaration's, as format_of packs it): a waiting group's lines
 * are looked for in each. A record that does not read adds none (as a
 * state before 0.23: the declaration's format alone). -1: out of memory. */
static int recorded_formats(nsink *s, const rn_outbox_mark *m, const char *own, size_t olen)
{
  msgpack_zone z;
  msgpack_object o;
  size_t off = 0;
  if (!m->formats_len) return 0;
  if (!rn_zone_init(&z, 1024)) return -1;
  int rc = 0;
  if (rn_unpack((const char *)m->formats, m->formats_len, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS &&
      o.type == MSGPACK_OBJECT_ARRAY)
    for (uint32_t i = 0; !rc && i < o.via.array.size && s->nalt < 8; i++) {
      const msgpack_object *b = &o.via.array.ptr[i], *f;
      msgpack_object fo;
      size_t foff = 0;
      if (b->type != MSGPACK_OBJECT_BIN || (b->via.bin.size == olen && !memcmp(b->via.bin.ptr, own, olen)))
        continue;
      if (rn_unpack(b->via.bin.ptr, b->via.bin.size, &foff, &z, &fo) != MSGPACK_UNPACK_SUCCESS ||
          fo.type != MSGPACK_OBJECT_ARRAY || fo.via.array.size != 2)
        continue;
      f = fo.via.array.ptr;
      if ((f[0].type != MSGPACK_OBJECT_STR && f[0].type != MSGPACK_OBJECT_NIL) ||
          (f[1].type != MSGPACK_OBJECT_STR && f[1].type != MSGPACK_OBJECT_NIL))
        continue;
      struct alt *a = &s->alt[s->nalt];
      memset(a, 0, sizeof *a);
      msgpack_sbuffer_init(&a->lines);
      s->nalt++;
      if ((f[0].type == MSGPACK_OBJECT_STR && !(a->verb_field = strndup(f[0].via.str.ptr, f[0].via.str.size))) ||
          (f[1].type == MSGPACK_OBJECT_STR && !(a->id_field = strndup(f[1].via.str.ptr, f[1].via.str.size))))
        rc = -1;
    }
  rn_zone_destroy(&z);
  return rc;
}

int rn_ndjson_sink_path(rn_pipeline *p, rn_rel *rel, const char *path, const char *verb_field,
                        const char *id_field)
{
  char state_id[33] = "";
  if (check_fields(p, rel, verb_field, id_field, state_id)) return p->err.code;
  const char *kind = rn_sink_path_kind(path);
  if (kind) /* its lines could not be read back after a crash: no exactly once */
    return rn_err_set(&p->err, RN_EINVAL,
                      "%s: ndjson: %s is %s, not a regular file: a sink on a path writes each group once by reading "
                      "its file back after a crash, which needs a regular file; give it an open file instead "
                      "(runnel.ndjson(io.stdout), or io.open(path, \"a\")), whose waiting groups are kept in memory",
                      rel->name, path, kind);
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) return rn_err_set(&p->err, RN_EIO, "%s: ndjson: cannot open %s: %s", rel->name, path, strerror(errno));
  nsink *s = new_nsink(verb_field, id_field);
  if (!s) { close(fd); return rn_err_set(&p->err, RN_ENOMEM, "out of memory"); }
  memcpy(s->state_id, state_id, sizeof state_id);
  s->fd = fd;
  char real[PATH_MAX], *name = NULL;
  rn_outbox_mark m;
  struct stat st;
  int rc = 0;
  if (!(s->path = strdup(path)) || !(s->rel_name = strdup(rel->name)))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  else if (!realpath(path, real) || fstat(fd, &st) != 0)
    rc = rn_err_set(&p->err, RN_EIO, "%s: ndjson: %s: %s", rel->name, path, strerror(errno));
  else if (!(s->real = strdup(real)) || !(name = malloc(2 * strlen(real) + 32)) || !name_link(s))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (!rc) {
    sprintf(name, RN_SINK_NDJSON "%s", real);
    rc = rn_outbox_sink_check(p, rel, name); /* before the file is cut: it may be a live sink's */
  }
  if (!rc) rc = lock_file(p, rel, fd, s->path, &st);
  if (!rc) rc = rn_outbox_mark_read(p, name, NULL, &m);
  if (!rc) file_id(&st, s->fd_file);
  if (!rc) rc = place_sink(p, rel, s, &m, (uint64_t)st.st_size, real);
  if (rc) {
    free(name);
    free_nsink(s);
    return rc;
  }
  msgpack_sbuffer fmt;
  msgpack_sbuffer_init(&fmt);
  rn_oom_clear();
  format_of(verb_field, id_field, &fmt);
  if (rn_oom() || (m.found && m.delivered < p->seq && recorded_formats(s, &m, fmt.data, fmt.size)))
    rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory");
  if (rc) {
    msgpack_sbuffer_destroy(&fmt);
    free(name);
    free_nsink(s);
    return rc;
  }
  /* without a mark: a new sink, the groups before it are not its own */
  char *label = name + strlen(name) + 1; /* the file, not its key in the state */
  sprintf(label, "durable sink to %s", real);
  /* waiting groups looked for in a renamed file: the mark keeps its
   * position and file (s->mark_file) until they are settled, so a crash
   * before then looks for them there again, not at the new file's end.
   * Otherwise the position is in the file at the path (a file cut shorter
   * than the mark is searched whole, and its end is where the groups not
   * found go: a later check starts there) */
  rc = rn_outbox_sink_add_formatted(p, rel, name, label, false, &nsink_ops, s, free_nsink,
                                    m.found ? m.delivered : p->seq, s->renamed_fd >= 0 ? m.position : s->length,
                                    fmt.data, fmt.size);
  msgpack_sbuffer_destroy(&fmt);
  free(name);
  /* the waiting groups were delivered (and checked) just now: a group the
   * check cannot reconcile fails the declaration too (the sink stays, its
   * groups wait, each delivery says so again, until the file is mended);
   * so does an incomplete last line the checks did not find its own */
  if (!rc && !s->conflict.code) foreign_tail(s, &s->conflict);
  if (!rc && s->conflict.code) rc = rn_err_keep(&p->err, s->conflict.code, s->conflict.msg);
  return rc;
}

/* ---- reading ---- */

/* A change's "rel", "op" and "row" values from its map form (NULL where
 * absent; of a key given twice, the last: the JSON parser refuses those). */
void rn_change_fields(const msgpack_object *obj, const msgpack_object **rel, const msgpack_object **op,
                      const msgpack_object **row, const msgpack_object **other)
{
  *rel = *op = *row = *other = NULL;
  if (obj->type != MSGPACK_OBJECT_MAP) return;
  for (uint32_t i = 0; i < obj->via.map.size; i++) {
    const msgpack_object *k = &obj->via.map.ptr[i].key, *v = &obj->via.map.ptr[i].val;
    if (k->type != MSGPACK_OBJECT_STR) continue;
    if (k->via.str.size == 3 && memcmp(k->via.str.ptr, "rel", 3) == 0) *rel = v;
    else if (k->via.str.size == 2 && memcmp(k->via.str.ptr, "op", 2) == 0) *op = v;
    else if (k->via.str.size == 3 && memcmp(k->via.str.ptr, "row", 3) == 0) *row = v;
    else if (!*other) *other = k;
  }
}

/* The relation named exactly (length and bytes: a name with a NUL byte
 * names none), or NULL. */
static bool named(const char *cname, const char *name, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if (cname[i] != name[i] || !cname[i]) return false; /* !cname[i]: cname is shorter */
  return !cname[len];
}

static rn_rel *find_rel(const rn_pipeline *p, const char *name, size_t len)
{
  for (int i = 0; i < p->nrels; i++)
    if (named(p->rels[i]->name, name, len)) return p->rels[i];
  return NULL;
}

rn_rel *rn_rel_named(const rn_pipeline *p, const char *name, size_t len) { return find_rel(p, name, len); }

/* The nesting depth of v (a scalar: 0), counted no further than max + 1. */
static int json_depth(json_t *v, int max)
{
  if (!json_is_object(v) && !json_is_array(v)) return 0;
  if (max < 0) return 1;
  int d = 0;
  size_t n = json_is_array(v) ? json_array_size(v) : 0;
  void *it = json_object_iter(v); /* NULL for an array */
  for (size_t i = 0; (it || i < n) && d <= max; i++) {
    json_t *x = it ? json_object_iter_value(it) : json_array_get(v, i);
    if (it) it = json_object_iter_next(v, it);
    int c = json_depth(x, max - 1);
    if (c > d) d = c;
  }
  return d + 1;
}

/* line with every container nested deeper than keep replaced by an empty
 * one ([] or {}), into a malloc'd copy (*n bytes): jansson refuses values
 * nested more than 2048 deep, and the cut copy still says which column
 * held one (nested keep deep, past RN_JSCAN_MAX_DEPTH). NULL: no memory. */
static char *cut_deep(const char *line, size_t len, int keep, size_t *n)
{
  char *out = malloc(len + 2); /* + 2: an unclosed container cut at the end */
  if (!out) return NULL;
  size_t o = 0;
  int depth = 0, cut = 0; /* cut: the depth of the container being left out, or 0 */
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < len; i++) {
    char c = line[i];
    bool opens = !in_string && (c == '[' || c == '{'), closes = !in_string && (c == ']' || c == '}');
    if (in_string) {
      bool after_backslash = escaped;
      escaped = !after_backslash && c == '\\';
      in_string = after_backslash || c != '"';
    } else {
      in_string = c == '"';
    }
    if (opens && ++depth > keep && !cut) {
      cut = depth;
      out[o++] = c;
      out[o++] = c == '[' ? ']' : '}'; /* two bytes for the container's at least two */
      continue;
    }
    if (closes && depth-- == cut) {
      cut = 0;
      continue;
    }
    if (!cut) out[o++] = c;
  }
  *n = o;
  return out;
}

/* The known relation a line that failed to parse names in "rel", read
 * leniently (jansson, its values nested up to 2048 deep: deeper ones cut
 * short), so that its error can say which relation it was for; with col,
 * also the "row" column whose value is nested deepest, quoted into
 * col[cap] ("" when none is too deep). */
static rn_rel *rel_named_in(const rn_pipeline *p, const char *line, size_t len, char *col, size_t cap)
{
  size_t cut_len;
  char *cut = cut_deep(line, len, 2 * RN_JSCAN_MAX_DEPTH, &cut_len);
  json_t *j = cut ? json_loadb(cut, cut_len, JSON_ALLOW_NUL, NULL) : NULL;
  free(cut);
  json_t *rel = json_object_get(j, "rel"), *row = json_object_get(j, "row");
  rn_rel *r = json_is_string(rel) ? find_rel(p, json_string_value(rel), json_string_length(rel)) : NULL;
  if (col) {
    col[0] = 0;
    int deepest = 0;
    const char *k;
    json_t *x;
    json_object_foreach(json_is_object(row) ? row : NULL, k, x) {
      int d = json_depth(x, RN_JSCAN_MAX_DEPTH);
      /* a column's value sits two levels in (the change, its row): one
       * nested MAX - 1 deep or more can pass the limit */
      if (d > deepest && d >= RN_JSCAN_MAX_DEPTH - 1) {
        deepest = d;
        rn_json_quote(col, cap, k, strlen(k));
      }
    }
  }
  json_decref(j);
  return r;
}

int rn_ndjson_apply_line(rn_pipeline *p, const char *line, size_t len, msgpack_zone *z)
{
  msgpack_object obj;
  rn_err_clear(&p->err);
  if (rn_json_parse(line, len, &obj, z, &p->err)) {
    size_t lead = 0; /* JSON's spaces before the value */
    while (lead < len && (line[lead] == ' ' || line[lead] == '\t' || line[lead] == '\r' || line[lead] == '\n')) lead++;
    if (len - lead >= 3 && memcmp(line + lead, "\xEF\xBB\xBF", 3) == 0) /* rn_run_ndjson skips one at byte 0 only */
      return rn_group_fail(p, RN_EINVAL, lead ? "a UTF-8 byte order mark (BOM) follows the spaces that start the line: "
                                                "only the first bytes of the input may be one"
                                              : "a UTF-8 byte order mark (BOM) starts the line: only the first line of "
                                                "the input may start with one");
    if (len - lead >= 2 && (memcmp(line + lead, "\xFF\xFE", 2) == 0 || memcmp(line + lead, "\xFE\xFF", 2) == 0))
      return rn_group_fail(p, RN_EINVAL, "a UTF-16 byte order mark (BOM) starts the line: NDJSON input is UTF-8");
    static const char dup[] = "duplicate key ", dup_rel[] = "duplicate key \"rel\" ", deep[] = "JSON nested more than ";
    bool is_dup = strncmp(p->err.msg, dup, strlen(dup)) == 0 && strncmp(p->err.msg, dup_rel, strlen(dup_rel)) != 0;
    bool is_deep = strncmp(p->err.msg, deep, strlen(deep)) == 0;
    char col[RN_NAME_MAX + 3] = "";
    rn_rel *r = is_dup || is_deep ? rel_named_in(p, line, len, is_deep ? col : NULL, sizeof col) : NULL;
    if (r && col[0])
      rn_err_set(&p->err, RN_EINVAL, "%s: column %s: value nested more than %d deep", r->name, col, RN_JSCAN_MAX_DEPTH);
    else if (r)
      rn_err_prefix(&p->err, r->name);
    else if (strncmp(p->err.msg, "malformed JSON", 14) == 0)
      rn_json_change_unread(p, line, len);
    else
      rn_json_change_refused(p, line, len);
    const char *cr = memchr(line, '\r', len);
    if (cr && cr + 1 < line + len && cr[1] != '\n') { /* CRLF is read as a line end: a lone CR is not (old Mac files) */
      size_t at = strlen(p->err.msg);
      snprintf(p->err.msg + at, sizeof p->err.msg - at, ": the line holds a carriage return (CR) not followed by a line "
               "feed (LF): NDJSON lines end with LF or CRLF");
    }
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  const msgpack_object *rel, *op, *row, *other;
  rn_change_fields(&obj, &rel, &op, &row, &other);
  return rn_apply_json_change(p, rel, op, row, other);
}

/* Applies one input line. Returns 0 or an RN_E… code (p->err says why). */
static int apply_line(rn_pipeline *p, const char *line, size_t len)
{
  return rn_ndjson_apply_line(p, line, len, &p->scratch);
}

/* The JSON name of v's type. */
static const char *json_kind(const msgpack_object *v)
{
  switch (v->type) {
  case MSGPACK_OBJECT_NIL: return "null";
  case MSGPACK_OBJECT_BOOLEAN: return "a boolean";
  case MSGPACK_OBJECT_STR: return "a string";
  case MSGPACK_OBJECT_ARRAY: return "an array";
  case MSGPACK_OBJECT_MAP: return "an object";
  case MSGPACK_OBJECT_BIN: return "bytes";             /* msgpack input (JetStream, the C API) */
  case MSGPACK_OBJECT_EXT: return "a msgpack extension value";
  default: return "a number";
  }
}

#define CHANGE_SHAPE "expected {\"rel\": name, \"op\": \"insert\"|\"update\"|\"upsert\"|\"delete\", \"row\": {…}}"

/* Fails the group naming the fields of {rel, op, row} a change lacks
 * (after "name: " when its relation is known) and its first field of
 * another name, likely the missing one misspelt (unknown fields are
 * otherwise ignored); none of the three: the shape. */
static int missing_fields(rn_pipeline *p, const rn_rel *r, bool rel, bool op, bool row, const msgpack_object *other)
{
  const char *names[3];
  int n = 0;
  if (!rel) names[n++] = "\"rel\"";
  if (!op) names[n++] = "\"op\"";
  if (!row) names[n++] = "\"row\"";
  char quoted[RN_NAME_MAX + 3], hint[RN_NAME_MAX + 48] = "";
  if (other && other->type == MSGPACK_OBJECT_STR)
    snprintf(hint, sizeof hint, " (the change has an unknown field %s)",
             rn_json_quote(quoted, sizeof quoted, other->via.str.ptr, other->via.str.size));
  if (n == 3) rn_err_set(&p->err, RN_EINVAL, CHANGE_SHAPE); /* not a change at all ([1], {}) */
  else
    rn_err_set(&p->err, RN_EINVAL, "%s%smissing %s%s%s%s: " CHANGE_SHAPE, r ? r->name : "", r ? ": " : "",
               names[0], n == 2 ? " and " : "", n == 2 ? names[1] : "", hint);
  return rn_group_fail(p, RN_EINVAL, p->err.msg);
}

/* Applies one change from its rel, op and row values (NULL or of the wrong
 * type: an error). Returns 0 or an RN_E… code, the group failed (p->err
 * says why). */
int rn_apply_change(rn_pipeline *p, const msgpack_object *rel, const msgpack_object *op, const msgpack_object *row,
                    const msgpack_object *other)
{
  rn_rel *r = rel && rel->type == MSGPACK_OBJECT_STR ? find_rel(p, rel->via.str.ptr, rel->via.str.size) : NULL;
  return rn_apply_change_to(p, r, rel, op, row, other);
}

int rn_apply_change_to(rn_pipeline *p, rn_rel *r, const msgpack_object *rel, const msgpack_object *op,
                       const msgpack_object *row, const msgpack_object *other)
{
  if (!rel) return missing_fields(p, NULL, false, op, row, other);
  if (rel->type != MSGPACK_OBJECT_STR) {
    rn_err_set(&p->err, RN_EINVAL, "\"rel\" must be a string (a relation's name), got %s", json_kind(rel));
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  char quoted[256];
  if (!r) {
    rn_err_set(&p->err, RN_EINVAL, "unknown relation %s",
               rn_json_quote(quoted, sizeof quoted, rel->via.str.ptr, rel->via.str.size));
    rn_suggest_append_relations(p->err.msg, sizeof p->err.msg, p);
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  if (!op || !row) return missing_fields(p, r, true, op, row, other);
  if (op->type != MSGPACK_OBJECT_STR) {
    rn_err_set(&p->err, RN_EINVAL, "%s: \"op\" must be a string (insert, update, upsert, delete), got %s", r->name,
               json_kind(op));
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  static const char *const ops[] = { "insert", "update", "upsert", "delete" }; /* 6 bytes each */
  rn_op o = 0;
  for (int i = 0; i < 4 && op->via.str.size == 6; i++)
    if (memcmp(op->via.str.ptr, ops[i], 6) == 0) o = (rn_op)(i + 1);
  if (!o) {
    rn_err_set(&p->err, RN_EINVAL, "%s: unknown op %s (insert, update, upsert, delete)", r->name,
               rn_json_quote(quoted, sizeof quoted, op->via.str.ptr, op->via.str.size));
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  if (row->type != MSGPACK_OBJECT_MAP) { /* said in JSON's words: rn_push_object would say "msgpack map", "table" */
    rn_err_set(&p->err, RN_EINVAL, "%s: \"row\" must be an object of column values, got %s", r->name, json_kind(row));
    return rn_group_fail(p, RN_EINVAL, p->err.msg);
  }
  return rn_push_object(p, r, o, row);
}

typedef struct pending {  /* the open group's good lines, for a re-run in skip mode */
  char **lines;
  size_t *lens;
  size_t n, cap;
} pending;

static int keep_line(pending *g, const char *line, size_t len)
{
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 64;
    char **lines = realloc(g->lines, cap * sizeof *lines);
    if (lines) g->lines = lines;
    size_t *lens = lines ? realloc(g->lens, cap * sizeof *lens) : NULL;
    if (lens) g->lens = lens;
    if (!lines || !lens) return RN_ENOMEM;
    g->cap = cap;
  }
  if (!(g->lines[g->n] = malloc(len ? len : 1))) return RN_ENOMEM;
  memcpy(g->lines[g->n], line, len);
  g->lens[g->n++] = len;
  return 0;
}

static void drop_lines(pending *g)
{
  for (size_t i = 0; i < g->n; i++) free(g->lines[i]);
  g->n = 0;
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Writes s with its control characters escaped (\n, \t, \u001f…), so
 * a message quoting a user's name cannot break a line-based file. */
static void put_escaped_line(FILE *f, const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '\n') fputs("\\n", f);
    else if (c == '\t') fputs("\\t", f);
    else if (c == '\r') fputs("\\r", f);
    else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
}

/* One reject, one line: `name:line: reason<TAB>line`. 0, or the errno of
 * a write that failed (a full disk): the line would be lost in silence. */
static int reject(const rn_run_opts *o, uint64_t line_no, const char *why, const char *line, size_t len)
{
  if (!o->rejects) return 0;
  clearerr(o->rejects); /* an error of the file's before this run is not this line's */
  put_escaped_line(o->rejects, o->name);
  fprintf(o->rejects, ":%llu: ", (unsigned long long)line_no);
  put_escaped_line(o->rejects, why);
  fputc('\t', o->rejects);
  fwrite(line, 1, len, o->rejects); /* the line as it came, NUL bytes too (it holds no newline) */
  fputc('\n', o->rejects);
  errno = 0;
  if (fflush(o->rejects) == 0 && !ferror(o->rejects)) return 0;
  return errno ? errno : EIO;
}

/* Whether text holds only JSON whitespace (or nothing). */
static bool blank(const char *text, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return false;
  return true;
}

/* Commits the open group, which holds input lines first to last. A
 * group refused at its commit (an in-group sink or callback raised) is
 * rolled back whole, and the error names its lines: a commit cannot tell
 * which line's change was refused. */
static int commit_lines(rn_pipeline *p, const rn_run_opts *o, uint64_t first, uint64_t last)
{
  int rc = rn_commit(p);
  if (!rc) return 0;
  char why[RN_ERRMSG_MAX];
  snprintf(why, sizeof why, "%s", p->err.msg);
  if (first == last) return rn_err_set(&p->err, rc, "%s:%llu: %s", o->name, (unsigned long long)last, why);
  return rn_err_set(&p->err, rc, "%s:%llu: the group of lines %llu to %llu was rolled back: %s", o->name,
                    (unsigned long long)first, (unsigned long long)first, (unsigned long long)last, why);
}

/* Input lines, read as getline reads them, except that a stream (a pipe,
 * a terminal) that pauses is seen to pause even in the middle of a line:
 * stdio's buffer may hold the start of a line whose end is not written
 * yet, and getline would wait inside it, holding back the complete lines
 * before it. Only glibc says what its buffer holds; elsewhere a read never
 * counts as waiting. */
typedef struct line_in {
  FILE *in;
  char *text;         /* the line read (NUL after it), or the part read so far */
  size_t cap, len;    /* len: the bytes of a line not read whole yet (0 between lines) */
} line_in;

enum { LINE_WAITS = -2, LINE_NOMEM = -3 };

/* Room for n more bytes and a NUL in r->text. */
static bool line_room(line_in *r, size_t n)
{
  if (r->len + n + 1 <= r->cap) return true;
  size_t cap = r->cap ? r->cap : 256;
  while (cap < r->len + n + 1) cap *= 2;
  char *grown = realloc(r->text, cap);
  if (!grown) return false;
  r->text = grown;
  r->cap = cap;
  return true;
}

#ifdef __GLIBC__
/* Moves what stdio's buffer holds of the line into r->text, through its
 * newline if it holds one (true then): no read. */
static bool take_buffered(line_in *r, int *nomem)
{
  FILE *in = r->in;
  size_t have = (size_t)(in->_IO_read_end - in->_IO_read_ptr);
  const char *nl = have ? memchr(in->_IO_read_ptr, '\n', have) : NULL;
  size_t take = nl ? (size_t)(nl - in->_IO_read_ptr) + 1 : have;
  if (!take) return false;
  if (!line_room(r, take)) return *nomem = 1, false;
  r->len += fread(r->text + r->len, 1, take, in); /* take <= have: from the buffer */
  return nl != NULL;
}

/* Whether in's descriptor has nothing to read now (its buffer is empty). */
static bool would_wait(FILE *in)
{
  struct pollfd fd = { .fd = fileno(in), .events = POLLIN };
  return fd.fd >= 0 && poll(&fd, 1, 0) == 0;
}
#endif

/* The next line of r->in into r->text: its length with its newline (none
 * at the end of the input, or where a read failed: ferror says which),
 * -1 when nothing is left, LINE_NOMEM. With report_wait, LINE_WAITS before
 * a read that would wait (the part of a line read stays in r: call again). */
static ssize_t read_line(line_in *r, bool report_wait)
{
#ifdef __GLIBC__
  if (!report_wait && !r->len) return getline(&r->text, &r->cap, r->in);
  int nomem = 0;
  while (!take_buffered(r, &nomem)) { /* the buffer is empty now: the next byte needs a read */
    if (nomem) return LINE_NOMEM;
    if (report_wait && would_wait(r->in)) return LINE_WAITS;
    int c = getc(r->in);
    if (c == EOF && !r->len) return -1;
    if (c == EOF) break;
    if (!line_room(r, 1)) return LINE_NOMEM;
    r->text[r->len++] = (char)c;
    if (c == '\n') break;
  }
  ssize_t n = (ssize_t)r->len;
  r->text[r->len] = '\0';
  r->len = 0;
  return n;
#else
  (void)report_wait;
  return getline(&r->text, &r->cap, r->in);
#endif
}

/* Commits the open group of lines (its N lines read, or the input paused
 * or ended); st counts it. */
static int commit_group(rn_pipeline *p, const rn_run_opts *o, uint64_t first, uint64_t last, rn_run_stats *st)
{
  int rc = commit_lines(p, o, first, last);
  if (!rc) st->groups++;
  return rc;
}

int rn_run_ndjson(rn_pipeline *p, FILE *in, const rn_run_opts *o, rn_run_stats *st)
{
  memset(st, 0, sizeof *st);
  if (p->state != RN_IDLE) return rn_err_set(&p->err, RN_EMISUSE, "run: not inside a group or a callback");
  struct stat is, rs;
  bool known = fstat(fileno(in), &is) == 0;
  bool stream = known && !S_ISREG(is.st_mode); /* a pipe, a terminal: it may pause */
  /* Rejects written into the file being read would be read again, each
   * rejected once more with a longer line: a run that never ends. */
  if (known && S_ISREG(is.st_mode) && o->rejects && fstat(fileno(o->rejects), &rs) == 0 &&
      rs.st_dev == is.st_dev && rs.st_ino == is.st_ino)
    return rn_err_set(&p->err, RN_EINVAL, "run: the rejects file is the input itself");
  size_t batch = o->batch ? o->batch : 1000;
  line_in lines = { in, NULL, 0, 0 };
  size_t in_group = 0;
  uint64_t group_first = 0, group_last = 0; /* the open group's first and last lines */
  ssize_t got;
  pending kept = { NULL, NULL, 0, 0 };
  int rc = 0;
  double started = now(), shown = started;
  bool progress = o->progress && isatty(STDERR_FILENO);
  p->tolerate_bad_input = o->skip;
  bool stopped = false; /* rn_interrupt_runs: as at the end of the input, then RN_EINTR */
  bool incomplete = false; /* a line the input stopped in the middle of (a read failed, an interrupt) */
  bool paused = false;     /* what was read is committed for the wait of the read going on */
  clearerr(in); /* an error of the file's before this run is not this run's */
  rn_interrupt_run_begins();
  for (;;) {
    if (rc || (stopped = rn_interrupt_taken())) break;
    /* Input that pauses (a producer writing now and then), between two
     * lines or inside one: what was read whole is committed, and carried
     * groups written, before the read waits, so that no line waits for
     * the next one to be applied and seen. */
    if ((got = read_line(&lines, stream && !paused && (in_group || p->carried))) == LINE_WAITS) {
      paused = true; /* until a line comes: the read waits then */
      if (in_group && (rc = commit_group(p, o, group_first, group_last, st))) break;
      in_group = 0;
      drop_lines(&kept);
      if (p->carried && (rc = rn_flush(p))) break;
      continue;
    }
    if (got == LINE_NOMEM) { rc = rn_err_set(&p->err, RN_ENOMEM, "out of memory"); break; }
    bool failed = ferror(in); /* the read ended on an error (one look: ferror takes the stream's lock) */
#ifdef __GLIBC__
    /* A read a signal cut short whose handler did not ask to stop (a
     * host's handler installed without SA_RESTART): read on, after the
     * part of a line read so far (read_line goes on from lines.len). */
    if (failed && errno == EINTR && !(stopped = rn_interrupt_taken())) {
      clearerr(in);
      failed = false;
      if (got > 0 && lines.text[got - 1] != '\n') lines.len = (size_t)got;
      if (got <= 0 || lines.len) continue;
    }
#endif
    if (got < 0) break;
    paused = false;
    char *text = lines.text;
    if (failed && text[got - 1] != '\n') { incomplete = true; break; } /* a read failed inside it */
    st->lines++;
    size_t len = (size_t)got;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) len--;
    if (st->lines == 1 && len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) text += 3, len -= 3; /* a UTF-8 BOM */
    if (blank(text, len)) continue; /* blank lines (spaces and tabs too) are not changes */
    if (!in_group && (rc = rn_begin(p))) break;
    if (!in_group) group_first = st->lines;
    group_last = st->lines;
    in_group++;
    int arc = apply_line(p, text, len);
    if (arc && !o->skip) {
      char why[RN_ERRMSG_MAX];
      snprintf(why, sizeof why, "%s", p->err.msg);
      rc = rn_err_set(&p->err, arc, "%s:%llu: %s", o->name, (unsigned long long)st->lines, why);
      in_group = 0; /* the core rolled the group back */
      break;
    }
    if (arc) {
      st->rejected++;
      int werr = reject(o, st->lines, p->err.msg, text, len);
      if (werr) { /* as max_rejects: the group holding the line is rolled back, the run stops */
        if (p->state == RN_OPEN) rn_rollback(p);
        in_group = 0;
        rc = rn_err_set(&p->err, RN_EIO, "%s:%llu: writing the rejected line to the rejects file: %s", o->name,
                        (unsigned long long)st->lines, strerror(werr));
        break;
      }
      if (o->max_rejects && st->rejected > o->max_rejects) { /* the group holding it is rolled back */
        if (p->state == RN_OPEN) rn_rollback(p); /* first: it clears the error */
        in_group = 0;
        rc = rn_err_set(&p->err, RN_EINVAL, "%s:%llu: more than %llu rejected lines: stopping (max_rejects)", o->name,
                        (unsigned long long)st->lines, (unsigned long long)o->max_rejects);
        break;
      }
      if (p->state == RN_IDLE) { /* it failed after writing: the group is gone; apply its good lines again */
        int lines_in = in_group; /* every line read into it, rejected ones too, count toward its N lines */
        in_group = 0;
        if ((rc = rn_begin(p))) break;
        in_group = lines_in;
        for (size_t i = 0; i < kept.n && !rc; i++) {
          int rrc = apply_line(p, kept.lines[i], kept.lens[i]);
          if (rrc) rc = rn_err_set(&p->err, rrc, "%s: re-applying a group after line %llu failed: %s", o->name,
                                   (unsigned long long)st->lines, p->err.msg);
        }
        if (rc) break;
      }
    } else {
      st->applied++;
      if (o->skip && (rc = keep_line(&kept, text, len))) { rn_err_set(&p->err, rc, "out of memory"); break; }
    }
    if (in_group >= batch) {
      if ((rc = commit_group(p, o, group_first, group_last, st))) break;
      in_group = 0;
      drop_lines(&kept);
    }
    if (progress && st->lines % 4096 == 0 && now() - shown >= 1) {
      shown = now();
      fprintf(stderr, "\r%s: %llu lines, %.0f changes/s   ", o->name, (unsigned long long)st->lines,
              st->applied / (shown - started));
    }
  }
  int read_error = 0; /* the errno of a read that failed */
  if (!rc && !stopped && ferror(in)) {
    read_error = errno; /* a read a signal cut short (no SA_RESTART): the request is read after it */
    if (read_error == EINTR && (stopped = rn_interrupt_taken())) read_error = 0, clearerr(in);
    else if (!st->lines && !incomplete) rc = rn_err_set(&p->err, RN_EIO, "%s: reading: %s", o->name, strerror(read_error));
  }
  if (rc && p->state == RN_OPEN) { /* rn_rollback clears p->err: the reason the run stopped is kept */
    rn_err why = p->err;
    rn_rollback(p);
    p->err = why;
  }
  /* Stopped by an interrupt or a failed read, as at the end of the input:
   * the lines read whole are applied and committed, a line the input
   * stopped inside of is dropped (it was never read whole). */
  if (!rc && p->state == RN_OPEN) rc = commit_group(p, o, group_first, group_last, st);
  const char *dropped = incomplete || lines.len ? ", the incomplete line after it is dropped" : "";
  if (!rc && read_error)
    rc = rn_err_set(&p->err, RN_EIO, "%s: reading after line %llu: %s: the lines up to it are applied and "
                    "committed%s", o->name, (unsigned long long)st->lines, strerror(read_error), dropped);
  if (!rc && stopped)
    rc = rn_err_set(&p->err, RN_EINTR, "%s: interrupted after line %llu: the lines up to it are applied and "
                    "committed%s", o->name, (unsigned long long)st->lines, dropped);
  rn_interrupt_run_ends(stopped);
  p->tolerate_bad_input = false;
  if (progress) /* the summary replaces the progress line (\033[K: what is left of it) */
    fprintf(stderr, "\r%s: %llu lines, %llu applied, %llu rejected, %llu group%s\033[K\n", o->name,
            (unsigned long long)st->lines, (unsigned long long)st->applied,
            (unsigned long long)st->rejected, (unsigned long long)st->groups, st->groups == 1 ? "" : "s");
  drop_lines(&kept);
  free(kept.lines);
  free(kept.lens);
  free(lines.text);
  return rc;
}
