/* test_read.c — a C host reading and listening (issue 14): rn_get, row
 * cursors in key order, consolidated and unsubscribed subscribers, column
 * defaults and renames in rn_column_def, rn_drop and rn_undeclared. Uses
 * only runnel.h and msgpack-c, as a host does. */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runnel.h"

typedef struct mp { msgpack_sbuffer sb; msgpack_packer pk; } mp;

static void mp_begin(mp *m, int pairs)
{
  msgpack_sbuffer_init(&m->sb);
  msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
  msgpack_pack_map(&m->pk, (size_t)pairs);
}
static void mp_str(mp *m, const char *s) { msgpack_pack_str_with_body(&m->pk, s, strlen(s)); }

/* {id = id, name = name} (name NULL: only the id) */
static int push(rn_pipeline *p, rn_rel *r, rn_op op, int64_t id, const char *name)
{
  mp m;
  mp_begin(&m, name ? 2 : 1);
  mp_str(&m, "id");
  msgpack_pack_int64(&m.pk, id);
  if (name) { mp_str(&m, "name"); mp_str(&m, name); }
  int rc = rn_push(p, r, op, m.sb.data, m.sb.size);
  msgpack_sbuffer_destroy(&m.sb);
  return rc;
}

/* The value of column col in a row map, as text ("null" for nil, "?" if absent). */
static void field(const void *row, size_t len, const char *col, char *out, size_t outlen)
{
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  snprintf(out, outlen, "?");
  if (msgpack_unpack_next(&u, row, len, NULL) == MSGPACK_UNPACK_SUCCESS && u.data.type == MSGPACK_OBJECT_MAP) {
    for (uint32_t i = 0; i < u.data.via.map.size; i++) {
      const msgpack_object_kv *kv = &u.data.via.map.ptr[i];
      if (kv->key.via.str.size != strlen(col) || memcmp(kv->key.via.str.ptr, col, strlen(col)) != 0) continue;
      if (kv->val.type == MSGPACK_OBJECT_STR) snprintf(out, outlen, "%.*s", (int)kv->val.via.str.size, kv->val.via.str.ptr);
      else if (kv->val.type == MSGPACK_OBJECT_NIL) snprintf(out, outlen, "null");
      else msgpack_object_print_buffer(out, outlen, kv->val);
    }
  }
  msgpack_unpacked_destroy(&u);
}

static const char *const key[] = { "id" };

static rn_pipeline *open_at(const char *dir)
{
  rn_open_opts o = { .path = dir };
  rn_pipeline *p = NULL;
  CHECK(rn_pipeline_open(&o, &p, NULL, 0) == 0);
  return p;
}

static rn_rel *players(rn_pipeline *p)
{
  static const rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL }, { "name", "string", 0, NULL, 0, NULL } };
  rn_rel *r = NULL;
  CHECK(rn_declare_table(p, "players", cols, 2, key, 1, &r) == 0);
  return r;
}

static void test_get_and_cursor(void)
{
  rn_pipeline *p = open_at(NULL);
  rn_rel *r = players(p);
  CHECK(push(p, r, RN_OP_INSERT, 3, "cy") == 0);
  CHECK(push(p, r, RN_OP_INSERT, -1, "ann") == 0);
  CHECK(push(p, r, RN_OP_INSERT, 2, "bob") == 0);
  mp k;
  mp_begin(&k, 1);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, 2);
  const void *row;
  size_t len;
  uint64_t id = 0;
  char text[64];
  CHECK(rn_get(p, r, k.sb.data, k.sb.size, &row, &len, &id) == 0);
  CHECK(row != NULL && id == 3);
  field(row, len, "name", text, sizeof text);
  CHECK(strcmp(text, "bob") == 0);
  msgpack_sbuffer_destroy(&k.sb);
  mp_begin(&k, 1);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, 9);
  CHECK(rn_get(p, r, k.sb.data, k.sb.size, &row, &len, NULL) == 0 && row == NULL);
  msgpack_sbuffer_destroy(&k.sb);
  mp_begin(&k, 1);
  mp_str(&k, "nope");
  msgpack_pack_int64(&k.pk, 9);
  CHECK(rn_get(p, r, k.sb.data, k.sb.size, &row, &len, NULL) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: unknown column \"nope\"") == 0);
  msgpack_sbuffer_destroy(&k.sb);

  /* key order: -1, 2, 3; inside a group the cursor sees the group's changes */
  CHECK(rn_begin(p) == 0);
  CHECK(push(p, r, RN_OP_INSERT, 0, "zed") == 0);
  rn_cursor *c = NULL;
  CHECK(rn_cursor_open(p, r, &c) == 0);
  char names[64] = "";
  int done = 0;
  while (rn_cursor_next(c, &row, &len, &id, &done) == 0 && !done) {
    field(row, len, "name", text, sizeof text);
    strcat(names, text);
    strcat(names, " ");
  }
  CHECK(done == 1);
  CHECK(strcmp(names, "ann zed bob cy ") == 0);
  rn_cursor_close(c);
  CHECK(rn_commit(p) == 0);
  CHECK(rn_cursor_open(p, NULL, &c) == RN_EINVAL);
  rn_cursor_close(NULL);
  rn_pipeline_close(p);
}

typedef struct heard { int n; char log[512]; } heard;

static int on_event(void *ctx, const rn_event *ev)
{
  heard *h = ctx;
  char name[32] = "-";
  if (ev->row) field(ev->row, ev->row_len, "name", name, sizeof name);
  else if (ev->old) field(ev->old, ev->old_len, "name", name, sizeof name);
  static const char *const verbs[] = { "", "I", "U", "D" };
  size_t off = strlen(h->log);
  snprintf(h->log + off, sizeof h->log - off, "%s%llu:%s ", verbs[ev->verb], (unsigned long long)ev->id, name);
  h->n++;
  return 0;
}

static void test_consolidated_and_unsubscribed(void)
{
  rn_pipeline *p = open_at(NULL);
  rn_rel *r = players(p);
  heard all = { 0, "" }, net = { 0, "" }, gone = { 0, "" };
  CHECK(rn_subscribe(p, r, on_event, &all) == 0);
  CHECK(rn_subscribe_flags(p, r, RN_SUBSCRIBE_CONSOLIDATE, on_event, NULL, &net) == 0);
  CHECK(rn_subscribe(p, r, on_event, &gone) == 0);
  CHECK(push(p, r, RN_OP_INSERT, 1, "ann") == 0);
  CHECK(rn_unsubscribe(p, r, on_event, &gone) == 0);
  CHECK(rn_unsubscribe(p, r, on_event, &gone) == RN_ENOTFOUND);
  CHECK(rn_begin(p) == 0);
  CHECK(rn_unsubscribe(p, r, on_event, &all) == RN_EMISUSE);
  CHECK(push(p, r, RN_OP_INSERT, 2, "bob") == 0);   /* insert + update: one INSERT of the final row */
  CHECK(push(p, r, RN_OP_UPDATE, 2, "bo") == 0);
  CHECK(push(p, r, RN_OP_INSERT, 3, "cy") == 0);    /* insert + delete: nothing */
  CHECK(push(p, r, RN_OP_DELETE, 3, NULL) == 0);
  CHECK(push(p, r, RN_OP_DELETE, 1, NULL) == 0);    /* delete + insert of a key: one UPDATE */
  CHECK(push(p, r, RN_OP_INSERT, 1, "anna") == 0);
  CHECK(rn_commit(p) == 0);
  CHECK(strcmp(all.log, "I1:ann I2:bob U2:bo I3:cy D3:cy D1:ann I1:anna ") == 0);
  CHECK(strcmp(net.log, "I1:ann I2:bo U1:anna ") == 0);
  CHECK(strcmp(gone.log, "I1:ann ") == 0);
  CHECK(rn_subscribe_flags(p, r, 4, on_event, NULL, &net) == RN_EINVAL);
  rn_pipeline_close(p);
}

static int count_undeclared(void *ctx, const char *name, const char *kind)
{
  char *out = ctx;
  strcat(out, name);
  strcat(out, ":");
  strcat(out, kind);
  strcat(out, " ");
  return 0;
}

static void test_defaults_renames_and_drop(void)
{
  char dir[] = "/tmp/runnel-read-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  rn_pipeline *p = open_at(dir);
  rn_rel *r = players(p);
  CHECK(push(p, r, RN_OP_INSERT, 1, "ann") == 0);
  static const rn_column_def notes_cols[] = { { "text", "string", 0, NULL, 0, NULL } };
  rn_rel *notes;
  CHECK(rn_declare_table(p, "notes", notes_cols, 1, NULL, 0, &notes) == 0);
  rn_pipeline_close(p);

  p = open_at(dir);
  char level[] = { 0x05 };             /* msgpack 5 */
  char bad[] = { (char)0xc1 };         /* never used in msgpack */
  rn_column_def cols[] = { { "id", "int", 0, NULL, 0, NULL }, { "nick", "string", 0, NULL, 0, "name" },
                           { "level", "int", 0, level, 1, NULL } };
  cols[2].default_value = bad;
  CHECK(rn_declare_table(p, "players", cols, 3, key, 1, &r) == RN_EINVAL);
  CHECK(strcmp(rn_errmsg(p), "players: column \"level\": the default is not one msgpack value") == 0);
  cols[2].default_value = level;
  CHECK(rn_declare_table(p, "players", cols, 3, key, 1, &r) == 0);
  mp k;
  mp_begin(&k, 1);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, 1);
  const void *row;
  size_t len;
  char text[32];
  CHECK(rn_get(p, r, k.sb.data, k.sb.size, &row, &len, NULL) == 0 && row);
  field(row, len, "nick", text, sizeof text);
  CHECK(strcmp(text, "ann") == 0);
  field(row, len, "level", text, sizeof text);
  CHECK(strcmp(text, "5") == 0);
  msgpack_sbuffer_destroy(&k.sb);
  /* an insert without the column takes its default */
  mp_begin(&k, 2);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, 2);
  mp_str(&k, "nick");
  mp_str(&k, "bo");
  CHECK(rn_insert(p, r, k.sb.data, k.sb.size) == 0);
  msgpack_sbuffer_destroy(&k.sb);
  mp_begin(&k, 1);
  mp_str(&k, "id");
  msgpack_pack_int64(&k.pk, 2);
  CHECK(rn_get(p, r, k.sb.data, k.sb.size, &row, &len, NULL) == 0 && row);
  field(row, len, "level", text, sizeof text);
  CHECK(strcmp(text, "5") == 0);
  msgpack_sbuffer_destroy(&k.sb);

  char listed[256] = "";
  CHECK(rn_undeclared(p, count_undeclared, listed) == 0);
  CHECK(strcmp(listed, "notes:table ") == 0);
  CHECK(rn_drop(p, "players") == RN_EMISUSE);
  CHECK(rn_drop(p, "notes") == 0);
  CHECK(rn_drop(p, "notes") == RN_ENOTFOUND);
  listed[0] = '\0';
  CHECK(rn_undeclared(p, count_undeclared, listed) == 0 && listed[0] == '\0');
  rn_pipeline_close(p);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

int main(void)
{
  RUN(test_get_and_cursor);
  RUN(test_consolidated_and_unsubscribed);
  RUN(test_defaults_renames_and_drop);
  return CHECK_REPORT();
}
