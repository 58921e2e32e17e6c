/* fkjoin_floor.c — the LMDB work of the fkjoin benchmark alone, timed: how
 * fast fkjoin's state can be kept in LMDB at all, whatever runs around the
 * calls (issue 13 asks for ≥ 1.3× the plain-Lua fkjoin with the state in
 * LMDB). Built by make all into build/fkjoin_floor; make bench runs both modes.
 *
 *   build/fkjoin_floor FILE.ndjson --runnel-layout|--minimal [--carry=GROUPS] [--load-only] [--dir=DIR]
 *
 * The file (scripts/bench/gen_fkjoin.lua's lines, {"rel":…,"op":…,"row":{…}})
 * is read and parsed first, untimed, into one small struct per change with
 * its row already packed as msgpack the way runnel packs it. Then, timed,
 * the changes are applied as runnel applies them: groups of 1,000 in one
 * LMDB write transaction carried over 256 groups (RN_CARRY_GROUPS), the
 * environment opened MDB_NOSYNC (sync = false; MDB_NOMETASYNC adds nothing
 * to it), not MDB_WRITEMAP. runnel also ends a carried transaction after
 * 0.5 s (RN_CARRY_SECONDS), about every 80 groups at its speed on the full
 * fkjoin file; the floor does not, which favours it: --carry=64 made it
 * 10-15% slower there. Nothing else happens: no events, no result
 * rows, no Lua; the team rows a join reads come from runnel's rowcache,
 * which costs no LMDB call, so they are not read at all.
 *
 * --runnel-layout: the databases, keys, values and LMDB calls per change
 * of runnel's declarative join today (core/table.c, join_state.c,
 * join_apply.c; keys as core/key.c encodes an int: |0x10|be64 v ^ 2^63|):
 *   players, teams  |key| -> |u64 id|u8 flags|row|   (flags 1: live; a
 *                   delete leaves a tombstone |id|0| and the key keeps its id)
 *   ji              |fk key or 0x01 for null|be64 player id| -> |u64 result id|u32 row len|player row|
 *   jr              |player key| -> |u64 result id|u64 0|
 *   a player change: the row found by cursor (MDB_SET) and written through
 *   it (MDB_CURRENT, or a put from the cursor when new); an unchanged row
 *   stops there; a new player's result id put MDB_NOOVERWRITE into jr;
 *   its ji entry read by cursor (MDB_SET) and rewritten in place
 *   (MDB_CURRENT), or deleted there and put under its new fk when the fk
 *   moved; an insert puts the entry (MDB_RESERVE).
 *   a team change: its row as a player's; then the fan-out walks the ji
 *   entries of its key (MDB_SET_RANGE, MDB_NEXT): they hold the player
 *   rows, so it reads nothing else and, ids known, writes nothing.
 *   per group: the counters of the three relations (three puts in meta).
 *
 * --minimal: what any design keeping fkjoin's state in LMDB must do, and
 * nothing more, so that no such design can do less LMDB work per change:
 *   players         |key| -> |row|          teams |key| -> |row|
 *   fk              |fk key|be64 player id| -> empty   (non-null fks only)
 *   a player insert: one put of the row (MDB_NOOVERWRITE: the check an
 *   insert needs is the same descent) and one put of its fk entry; an
 *   update must know the old fk to move the player between teams, so it
 *   reads the row (MDB_SET) and rewrites it there (MDB_CURRENT), and only
 *   when the fk moved deletes one fk entry and puts another; a delete
 *   reads the row (for its fk), deletes it there and deletes its fk entry.
 *   a team insert or delete: one put or delete of its row, blind (nothing
 *   in the old team row is needed); an update reads its row where it
 *   rewrites it (MDB_SET, MDB_CURRENT: one descent, as a blind put) so that
 *   an unchanged team costs no fan-out; the fan-out walks the fk
 *   entries of its key (MDB_SET_RANGE, MDB_NEXT) to find its players,
 *   whose rows are taken to cost nothing (held in memory): the walk is the
 *   least a team change can do to reach them.
 *   No ids, no result-id db, no tombstones, no counters, no copy of the
 *   player row in the index: every call left is one a correct join needs.
 *
 * Prints changes_per_s, the counts of what was applied (to compare with
 * the file and with `runnel inspect` of runnel's state after the same
 * file), and the entries of each database at the end. --load-only stops
 * after loading and opening (callgrind: a full run less this one is the
 * applying alone). The state lives in a fresh directory under $TMPDIR or
 * /tmp (as runnel's own without --state), removed at the end; --dir=DIR
 * keeps it in DIR instead (which must exist and be empty). */
#include <errno.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GROUP 1000       /* changes per group, as fkjoin.lua */
#define CARRY_GROUPS 256 /* groups per LMDB write transaction: RN_CARRY_GROUPS (--carry=N) */
#define KEY_LEN 9        /* an encoded int key: |0x10|be64| (core/key.c) */
#define KEY_INT 0x10
#define KEY_NULL 0x01

enum { PLAYERS, TEAMS, NRELS };
enum { INSERT, UPDATE, DELETE, NOPS };
static const char *const rel_names[NRELS] = { "players", "teams" };
static const char *const op_names[NOPS] = { "insert", "update", "delete" };

/* One change as loaded: its row packed into the arena (none for a delete). */
typedef struct change {
  int64_t id;       /* the row's key */
  int64_t fk;       /* players: team_id, when has_fk */
  uint32_t row;     /* offset of the packed row in the arena */
  uint16_t row_len; /* 0: a delete */
  uint8_t rel, op;
  bool has_fk;      /* players: team_id is not null */
} change;

typedef struct load {
  change *changes;
  size_t n;
  char *arena;      /* the packed rows */
  size_t arena_len, arena_cap;
} load;

/* What the applying did, printed for the sanity check. */
typedef struct counts {
  uint64_t applied[NRELS][NOPS]; /* changes of each kind */
  uint64_t unchanged[NRELS];     /* updates that left the row's bytes as they were */
  uint64_t fanout;               /* index entries the team changes walked */
  int64_t live[NRELS];           /* rows at the end */
} counts;

/* The environment, its databases and the state a mode keeps besides LMDB. */
typedef struct floor_db {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi rows[NRELS], index, result_ids, meta;
  MDB_cursor *rows_cur[NRELS], *index_cur; /* runnel's: one each per write transaction */
  bool minimal;
  unsigned carry_groups;                   /* groups per write transaction */
  uint64_t next_id[NRELS], next_result_id; /* runnel's counters */
  char *valbuf;                            /* a value being built */
  counts c;
} floor_db;

static void die(const char *what, int rc)
{
  fprintf(stderr, "fkjoin_floor: %s: %s\n", what, mdb_strerror(rc));
  exit(1);
}

static void check(int rc, const char *what)
{
  if (rc) die(what, rc);
}

/* ---- loading: the fixed line shape of gen_fkjoin.lua ---- */

static void bad_line(const char *path, size_t line, const char *why)
{
  fprintf(stderr, "%s:%zu: %s\n", path, line, why);
  exit(1);
}

static const char *skip_space(const char *p)
{
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

/* A string without escapes at p; *end after its closing quote. */
static bool read_string(const char *p, const char **s, size_t *len, const char **end)
{
  if (*p != '"') return false;
  const char *q = ++p;
  while (*q && *q != '"' && *q != '\\' && *q != '\n') q++;
  if (*q != '"') return false;
  *s = p;
  *len = (size_t)(q - p);
  *end = q + 1;
  return true;
}

/* One value of a row: an int, null or a string (no escapes). */
typedef struct value { int kind; int64_t i; const char *s; size_t len; } value;
enum { V_NONE, V_INT, V_NULL, V_STR };

static bool read_value(const char *p, value *v, const char **end)
{
  if (*p == '"') { v->kind = V_STR; return read_string(p, &v->s, &v->len, end); }
  if (strncmp(p, "null", 4) == 0) { v->kind = V_NULL; *end = p + 4; return true; }
  char *e;
  errno = 0;
  v->i = strtoll(p, &e, 10);
  if (e == p || errno || *e == '.' || *e == 'e' || *e == 'E') return false;
  v->kind = V_INT;
  *end = e;
  return true;
}

static unsigned char *put_be(unsigned char *p, uint64_t v, int n)
{
  for (int i = n - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
  return p + n;
}

/* msgpack's smallest form of an int, as runnel's rows hold it (core/row.c). */
static unsigned char *pack_int(unsigned char *p, int64_t i)
{
  if (i >= 0 && i < 128) { *p++ = (unsigned char)i; return p; }
  if (i >= 0 && i < 256) { *p++ = 0xcc; return put_be(p, (uint64_t)i, 1); }
  if (i >= 0 && i < 65536) { *p++ = 0xcd; return put_be(p, (uint64_t)i, 2); }
  if (i >= 0 && i <= UINT32_MAX) { *p++ = 0xce; return put_be(p, (uint64_t)i, 4); }
  if (i >= 0) { *p++ = 0xcf; return put_be(p, (uint64_t)i, 8); }
  if (i >= -32) { *p++ = (unsigned char)(int8_t)i; return p; }
  if (i >= -128) { *p++ = 0xd0; return put_be(p, (uint64_t)i, 1); }
  if (i >= -32768) { *p++ = 0xd1; return put_be(p, (uint64_t)i, 2); }
  if (i >= INT32_MIN) { *p++ = 0xd2; return put_be(p, (uint64_t)i, 4); }
  *p++ = 0xd3;
  return put_be(p, (uint64_t)i, 8);
}

static unsigned char *pack_value(unsigned char *p, const value *v)
{
  if (v->kind == V_INT) return pack_int(p, v->i);
  if (v->kind != V_STR) { *p++ = 0xc0; return p; } /* nil */
  if (v->len < 32) *p++ = (unsigned char)(0xa0 | v->len);
  else { *p++ = 0xd9; *p++ = (unsigned char)v->len; }
  memcpy(p, v->s, v->len);
  return p + v->len;
}

/* The row's columns in declaration order (fkjoin.lua's tables). */
static const char *const columns[NRELS][4] = { { "id", "name", "team_id", "score" },
                                               { "id", "name", "region", NULL } };

static int column_of(int rel, const char *name, size_t len)
{
  for (int i = 0; i < 4 && columns[rel][i]; i++)
    if (strlen(columns[rel][i]) == len && memcmp(columns[rel][i], name, len) == 0) return i;
  return -1;
}

/* Reads {"k":v,...} at p into vals by column; NULL when it is not one. */
static const char *read_row(const char *p, int rel, value *vals)
{
  if (*p++ != '{') return NULL;
  for (p = skip_space(p); *p != '}';) {
    const char *name;
    size_t len;
    if (!read_string(p, &name, &len, &p)) return NULL;
    p = skip_space(p);
    if (*p++ != ':') return NULL;
    int col = column_of(rel, name, len);
    value v;
    if (col < 0 || !read_value(skip_space(p), &v, &p)) return NULL;
    vals[col] = v;
    p = skip_space(p);
    if (*p == ',') p = skip_space(p + 1);
    else if (*p != '}') return NULL;
  }
  return p + 1;
}

/* Appends the row of vals (ncols columns) to the arena; its offset. */
static uint32_t pack_row(load *L, const value *vals, int ncols, uint16_t *len)
{
  size_t room = 1 + (size_t)ncols * (9 + 2 + 255);
  if (L->arena_len + room > L->arena_cap) {
    L->arena_cap = (L->arena_cap + room) * 2;
    if (!(L->arena = realloc(L->arena, L->arena_cap))) die("loading", ENOMEM);
  }
  unsigned char *start = (unsigned char *)L->arena + L->arena_len, *p = start;
  *p++ = (unsigned char)(0x90 | ncols); /* a fixarray */
  for (int i = 0; i < ncols; i++) p = pack_value(p, &vals[i]);
  uint32_t at = (uint32_t)L->arena_len;
  *len = (uint16_t)(p - start);
  L->arena_len += *len;
  return at;
}

static int name_index(const char *const *names, int n, const char *s, size_t len)
{
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
  return -1;
}

/* Reads one line into c; NULL, or why it cannot. */
static const char *parse_line(const char *p, load *L, change *c)
{
  value vals[4] = { { 0 } };
  int rel = -1, op = -1;
  bool has_row = false;
  if (*p++ != '{') return "not an object";
  for (p = skip_space(p); *p != '}';) {
    const char *name, *s;
    size_t len, slen;
    if (!read_string(p, &name, &len, &p)) return "a field name expected";
    p = skip_space(p);
    if (*p++ != ':') return "':' expected";
    p = skip_space(p);
    if (len == 3 && memcmp(name, "row", 3) == 0) {
      if (rel < 0) return "\"rel\" must come before \"row\"";
      if (!(p = read_row(p, rel, vals))) return "a row of ints, nulls and strings without escapes expected";
      has_row = true;
    } else if (!read_string(p, &s, &slen, &p)) {
      return "a string expected";
    } else if (len == 3 && memcmp(name, "rel", 3) == 0) {
      if ((rel = name_index(rel_names, NRELS, s, slen)) < 0) return "rel must be players or teams";
    } else if (len == 2 && memcmp(name, "op", 2) == 0) {
      if ((op = name_index(op_names, NOPS, s, slen)) < 0) return "op must be insert, update or delete";
    }
    p = skip_space(p);
    if (*p == ',') p = skip_space(p + 1);
    else if (*p != '}') return "',' or '}' expected";
  }
  if (rel < 0 || op < 0 || !has_row) return "rel, op and row expected";
  if (vals[0].kind != V_INT) return "an int id expected";
  *c = (change){ .id = vals[0].i, .rel = (uint8_t)rel, .op = (uint8_t)op };
  if (op == DELETE) return NULL;
  int ncols = rel == PLAYERS ? 4 : 3;
  for (int i = 1; i < ncols; i++) {
    bool fk = rel == PLAYERS && i == 2, str = !fk && i < 3;
    if (!(str ? vals[i].kind == V_STR : vals[i].kind == V_INT || (fk && vals[i].kind == V_NULL)))
      return "a full row expected (players: id, name, team_id or null, score; teams: id, name, region)";
  }
  c->has_fk = rel == PLAYERS && vals[2].kind == V_INT;
  c->fk = c->has_fk ? vals[2].i : 0;
  c->row = pack_row(L, vals, ncols, &c->row_len);
  return NULL;
}

/* Reads the whole file into L. */
static void load_file(const char *path, load *L)
{
  FILE *in = fopen(path, "rb");
  if (!in) { perror(path); exit(1); }
  size_t cap = 1 << 20, len = 0, got;
  char *text = malloc(cap + 1);
  while (text && (got = fread(text + len, 1, cap - len, in)) > 0)
    if ((len += got) == cap) text = realloc(text, (cap *= 2) + 1);
  if (!text) die("loading", ENOMEM);
  fclose(in);
  text[len] = '\0';
  size_t cap_changes = 1024, line = 0;
  L->changes = malloc(cap_changes * sizeof *L->changes);
  for (char *p = text, *nl; p < text + len; p = nl + 1) {
    line++;
    if (!(nl = strchr(p, '\n'))) nl = text + len;
    *nl = '\0';
    if (*skip_space(p) == '\0') continue;
    if (L->n == cap_changes) L->changes = realloc(L->changes, (cap_changes *= 2) * sizeof *L->changes);
    if (!L->changes) die("loading", ENOMEM);
    const char *why = parse_line(skip_space(p), L, &L->changes[L->n]);
    if (why) bad_line(path, line, why);
    L->n++;
  }
  free(text);
}

/* ---- the state: keys, stored rows ---- */

static void be64_put(char *out, uint64_t u)
{
  for (int i = 0; i < 8; i++) out[i] = (char)(u >> (56 - 8 * i));
}

/* An int key as core/key.c encodes it. */
static void key_of(int64_t v, char out[KEY_LEN])
{
  out[0] = KEY_INT;
  be64_put(out + 1, (uint64_t)v ^ (1ULL << 63));
}

/* An index key: |fk key, or KEY_NULL alone|be64 player id|; its length. */
static size_t index_key(bool has_fk, int64_t fk, uint64_t pid, char out[KEY_LEN + 8])
{
  size_t n = 1;
  if (has_fk) key_of(fk, out), n = KEY_LEN;
  else out[0] = KEY_NULL;
  be64_put(out + n, pid);
  return n + 8;
}

/* The length of the msgpack int or fixstr/str8 at p (the forms pack_row writes). */
static size_t item_len(const unsigned char *p)
{
  unsigned char b = *p;
  if (b < 0x80 || b >= 0xe0 || b == 0xc0) return 1;
  if (b >= 0xa0 && b <= 0xbf) return 1 + (b & 31u);
  switch (b) {
  case 0xd9: return 2 + p[1];
  case 0xcc: case 0xd0: return 2;
  case 0xcd: case 0xd1: return 3;
  case 0xce: case 0xd2: return 5;
  default: return 9; /* 0xcf, 0xd3 */
  }
}

/* A stored player row's team_id (its third column): the old fk a change
 * moves the player from. */
static void row_fk(const char *row, bool *has_fk, int64_t *fk)
{
  const unsigned char *p = (const unsigned char *)row + 1; /* past the fixarray head */
  p += item_len(p);                                         /* id */
  p += item_len(p);                                         /* name */
  *has_fk = *p != 0xc0;
  if (!*has_fk) return;
  size_t n = item_len(p);
  if (n == 1) { *fk = (int8_t)*p; return; }
  uint64_t u = 0;
  for (size_t i = 1; i < n; i++) u = (u << 8) | p[i];
  bool sign = *p >= 0xd0; /* int8..int64: sign-extend */
  if (sign && n < 9 && (u >> (8 * (n - 1) - 1))) u |= ~0ULL << (8 * (n - 1));
  *fk = (int64_t)u;
}

static void fail_change(const change *c, const char *why)
{
  fprintf(stderr, "fkjoin_floor: %s %s of id %lld: %s\n", rel_names[c->rel], op_names[c->op],
          (long long)c->id, why);
  exit(1);
}

/* ---- --runnel-layout ---- */

/* Writes |id|flags|row| (row NULL: a tombstone) at the key the cursor was
 * put on: over the entry found, or a new one from where the search left it. */
static void runnel_write_row(floor_db *f, int rel, MDB_val *k, uint64_t id, const char *row, size_t len, bool found)
{
  memcpy(f->valbuf, &id, 8);
  f->valbuf[8] = row ? 1 : 0;
  if (row) memcpy(f->valbuf + 9, row, len);
  MDB_val v = { 9 + (row ? len : 0), f->valbuf };
  check(mdb_cursor_put(f->rows_cur[rel], k, &v, found ? MDB_CURRENT : 0), rel_names[rel]);
}

/* A source table's change as table.c makes it: the key found by cursor,
 * the row written there. false: the update left the row as it was. */
static bool runnel_table_change(floor_db *f, const change *c, const char *row, MDB_val *k,
                                uint64_t *id, bool *old_has_fk, int64_t *old_fk)
{
  MDB_val v;
  int rc = mdb_cursor_get(f->rows_cur[c->rel], k, &v, MDB_SET);
  if (rc && rc != MDB_NOTFOUND) die(rel_names[c->rel], rc);
  bool found = rc == 0, live = found && (((char *)v.mv_data)[8] & 1);
  const char *old = live ? (char *)v.mv_data + 9 : NULL;
  if (c->op == INSERT ? live : !live) fail_change(c, live ? "the key exists" : "no such key");
  if (c->op == UPDATE && v.mv_size - 9 == c->row_len && memcmp(old, row, c->row_len) == 0) return false;
  if (old && c->rel == PLAYERS) row_fk(old, old_has_fk, old_fk);
  if (found) memcpy(id, v.mv_data, 8);
  else *id = f->next_id[c->rel]++;
  runnel_write_row(f, c->rel, k, *id, c->op == DELETE ? NULL : row, c->row_len, found);
  return true;
}

/* Puts a new ji entry |rid|len|row| (MDB_RESERVE, then filled). */
static void runnel_index_put(floor_db *f, const char *ik, size_t iklen, uint64_t rid, const char *row, uint32_t len)
{
  MDB_val k = { iklen, (void *)ik }, v = { 12 + (size_t)len, NULL };
  check(mdb_put(f->txn, f->index, &k, &v, MDB_RESERVE), "ji");
  memcpy(v.mv_data, &rid, 8);
  memcpy((char *)v.mv_data + 8, &len, 4);
  memcpy((char *)v.mv_data + 12, row, len);
}

/* A new player's result id: one put into jr, which finds an old one. */
static uint64_t runnel_result_id(floor_db *f, MDB_val *pkey)
{
  uint64_t fresh[2] = { f->next_result_id, 0 }, rid;
  MDB_val v = { sizeof fresh, fresh };
  int rc = mdb_put(f->txn, f->result_ids, pkey, &v, MDB_NOOVERWRITE);
  if (rc == 0) return f->next_result_id++;
  if (rc != MDB_KEYEXIST) die("jr", rc);
  memcpy(&rid, v.mv_data, 8);
  return rid;
}

static void runnel_player(floor_db *f, const change *c, const char *row)
{
  char key[KEY_LEN], ik[KEY_LEN + 8], nk[KEY_LEN + 8];
  key_of(c->id, key);
  MDB_val k = { KEY_LEN, key }, v;
  uint64_t id, rid;
  bool old_has_fk = false;
  int64_t old_fk = 0;
  if (!runnel_table_change(f, c, row, &k, &id, &old_has_fk, &old_fk)) { f->c.unchanged[PLAYERS]++; return; }
  size_t iklen = index_key(c->has_fk, c->fk, id, ik);
  if (c->op == INSERT) {
    rid = runnel_result_id(f, &k);
    runnel_index_put(f, ik, iklen, rid, row, c->row_len);
    return;
  }
  /* The entry under the old fk, read (its result id) and left under the cursor. */
  MDB_val old = { index_key(old_has_fk, old_fk, id, nk), nk };
  check(mdb_cursor_get(f->index_cur, &old, &v, MDB_SET), "ji entry");
  memcpy(&rid, v.mv_data, 8);
  if (c->op == DELETE) { check(mdb_cursor_del(f->index_cur, 0), "ji"); return; }
  if (old_has_fk == c->has_fk && old_fk == c->fk) { /* rewritten in place */
    uint32_t len = c->row_len;
    memcpy(f->valbuf, &rid, 8);
    memcpy(f->valbuf + 8, &len, 4);
    memcpy(f->valbuf + 12, row, len);
    MDB_val nv = { 12 + (size_t)len, f->valbuf };
    check(mdb_cursor_put(f->index_cur, &old, &nv, MDB_CURRENT), "ji");
    return;
  }
  check(mdb_cursor_del(f->index_cur, 0), "ji"); /* the fk moved */
  runnel_index_put(f, ik, iklen, rid, row, c->row_len);
}

/* The ji entries of team key: the players whose results a team change
 * recomputes (their rows are in the entries). */
static void walk_index(floor_db *f, const char *key)
{
  MDB_cursor *cur;
  check(mdb_cursor_open(f->txn, f->index, &cur), "fan-out");
  MDB_val k = { KEY_LEN, (void *)key }, v;
  int rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  for (; rc == 0 && k.mv_size == KEY_LEN + 8 && memcmp(k.mv_data, key, KEY_LEN) == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
    f->c.fanout++;
  if (rc && rc != MDB_NOTFOUND) die("fan-out", rc);
  mdb_cursor_close(cur);
}

static void runnel_team(floor_db *f, const change *c, const char *row)
{
  char key[KEY_LEN];
  key_of(c->id, key);
  MDB_val k = { KEY_LEN, key };
  uint64_t id;
  bool unused_has;
  int64_t unused_fk;
  if (!runnel_table_change(f, c, row, &k, &id, &unused_has, &unused_fk)) { f->c.unchanged[TEAMS]++; return; }
  walk_index(f, key);
}

/* ---- --minimal ---- */

static void minimal_index(floor_db *f, bool put, bool has_fk, int64_t fk, int64_t pid)
{
  if (!has_fk) return; /* a null fk is found by no team change */
  char ik[KEY_LEN + 8];
  MDB_val k = { index_key(true, fk, (uint64_t)pid, ik), ik }, v = { 0, NULL };
  check(put ? mdb_put(f->txn, f->index, &k, &v, 0) : mdb_del(f->txn, f->index, &k, NULL), "fk");
}

/* An update or delete: the row read (for the old fk, or to skip an
 * unchanged row) and written or deleted where it was found. false: unchanged. */
static bool minimal_rewrite(floor_db *f, const change *c, const char *row, MDB_val *k, bool *old_has_fk, int64_t *old_fk)
{
  MDB_cursor *cur = f->rows_cur[c->rel];
  MDB_val v;
  int rc = mdb_cursor_get(cur, k, &v, MDB_SET);
  if (rc == MDB_NOTFOUND) fail_change(c, "no such key");
  check(rc, rel_names[c->rel]);
  if (c->op == UPDATE && v.mv_size == c->row_len && memcmp(v.mv_data, row, c->row_len) == 0) return false;
  if (c->rel == PLAYERS) row_fk(v.mv_data, old_has_fk, old_fk);
  MDB_val nv = { c->row_len, (void *)row };
  check(c->op == DELETE ? mdb_cursor_del(cur, 0) : mdb_cursor_put(cur, k, &nv, MDB_CURRENT), rel_names[c->rel]);
  return true;
}

static void minimal_change(floor_db *f, const change *c, const char *row)
{
  char key[KEY_LEN];
  key_of(c->id, key);
  MDB_val k = { KEY_LEN, key }, v = { c->row_len, (void *)row };
  bool old_has_fk = false;
  int64_t old_fk = 0;
  if (c->op == INSERT) {
    int rc = mdb_put(f->txn, f->rows[c->rel], &k, &v, MDB_NOOVERWRITE);
    if (rc == MDB_KEYEXIST) fail_change(c, "the key exists");
    check(rc, rel_names[c->rel]);
  } else if (c->rel == TEAMS && c->op == DELETE) {
    int rc = mdb_del(f->txn, f->rows[TEAMS], &k, NULL); /* blind: nothing of the old row is needed */
    if (rc == MDB_NOTFOUND) fail_change(c, "no such key");
    check(rc, "teams");
  } else if (!minimal_rewrite(f, c, row, &k, &old_has_fk, &old_fk)) {
    f->c.unchanged[c->rel]++;
    return;
  }
  if (c->rel == TEAMS) { walk_index(f, key); return; }
  bool moved = c->op == DELETE || old_has_fk != c->has_fk || old_fk != c->fk;
  if (c->op != INSERT && moved) minimal_index(f, false, old_has_fk, old_fk, c->id);
  if (c->op != DELETE && moved) minimal_index(f, true, c->has_fk, c->fk, c->id);
}

/* ---- applying ---- */

static void apply_change(floor_db *f, const load *L, const change *c)
{
  const char *row = L->arena + c->row;
  if (f->minimal) minimal_change(f, c, row);
  else if (c->rel == PLAYERS) runnel_player(f, c, row);
  else runnel_team(f, c, row);
  f->c.applied[c->rel][c->op]++;
}

/* Per group, runnel saves each changed relation's counters (group.c). */
static void save_counters(floor_db *f)
{
  static const char *const names[3] = { "players", "teams", "players.join" };
  for (int i = 0; i < 3; i++) {
    uint64_t val[2] = { i < NRELS ? f->next_id[i] : f->next_result_id, 0 };
    MDB_val k = { strlen(names[i]), (void *)names[i] }, v = { sizeof val, val };
    check(mdb_put(f->txn, f->meta, &k, &v, 0), "meta");
  }
}

static void begin(floor_db *f)
{
  check(mdb_txn_begin(f->env, NULL, 0, &f->txn), "begin");
  for (int r = 0; r < NRELS; r++) check(mdb_cursor_open(f->txn, f->rows[r], &f->rows_cur[r]), "cursor");
  check(mdb_cursor_open(f->txn, f->index, &f->index_cur), "cursor");
}

/* Groups of GROUP changes, one write transaction per CARRY_GROUPS of them
 * (its cursors closed by its commit). */
static void apply_all(floor_db *f, const load *L)
{
  size_t groups = 0;
  begin(f);
  for (size_t g = 0; g < L->n; g += GROUP) {
    for (size_t i = g; i < L->n && i < g + GROUP; i++) apply_change(f, L, &L->changes[i]);
    if (!f->minimal) save_counters(f);
    if (++groups % f->carry_groups == 0 || g + GROUP >= L->n) {
      check(mdb_txn_commit(f->txn), "commit");
      if (g + GROUP < L->n) begin(f);
    }
  }
}

static void open_db(MDB_txn *txn, const char *name, MDB_dbi *dbi)
{
  check(mdb_dbi_open(txn, name, MDB_CREATE, dbi), name);
}

static void open_env(floor_db *f, const char *dir)
{
  check(mdb_env_create(&f->env), "env");
  check(mdb_env_set_maxdbs(f->env, 8), "env");
  check(mdb_env_set_mapsize(f->env, (size_t)4 << 30), "env");
  check(mdb_env_open(f->env, dir, MDB_NOSYNC | MDB_NOTLS, 0644), dir); /* runnel's flags, sync = false */
  MDB_txn *txn;
  check(mdb_txn_begin(f->env, NULL, 0, &txn), "begin");
  open_db(txn, "players", &f->rows[PLAYERS]);
  open_db(txn, "teams", &f->rows[TEAMS]);
  open_db(txn, f->minimal ? "fk" : "ji", &f->index);
  if (!f->minimal) open_db(txn, "jr", &f->result_ids);
  if (!f->minimal) open_db(txn, "meta", &f->meta);
  check(mdb_txn_commit(txn), "commit");
  f->next_id[PLAYERS] = f->next_id[TEAMS] = f->next_result_id = 1;
  if (!(f->valbuf = malloc(12 + 65536))) die("setup", ENOMEM);
}

static size_t entries(MDB_txn *txn, MDB_dbi dbi)
{
  MDB_stat st;
  check(mdb_stat(txn, dbi, &st), "stat");
  return st.ms_entries;
}

static void report(floor_db *f, const load *L, double seconds)
{
  printf("floor_mode: %s\n", f->minimal ? "minimal" : "runnel-layout");
  printf("changes: %zu\n", L->n);
  printf("changes_per_s: %.0f\n", (double)L->n / seconds);
  for (int r = 0; r < NRELS; r++) {
    counts *c = &f->c;
    c->live[r] = (int64_t)(c->applied[r][INSERT] - c->applied[r][DELETE]);
    printf("%s: inserts %llu updates %llu (unchanged %llu) deletes %llu; live %lld\n", rel_names[r],
           (unsigned long long)c->applied[r][INSERT], (unsigned long long)c->applied[r][UPDATE],
           (unsigned long long)c->unchanged[r], (unsigned long long)c->applied[r][DELETE], (long long)c->live[r]);
  }
  printf("fanout_entries: %llu\n", (unsigned long long)f->c.fanout);
  MDB_txn *txn;
  check(mdb_txn_begin(f->env, NULL, MDB_RDONLY, &txn), "begin");
  printf("entries: players %zu teams %zu %s %zu", entries(txn, f->rows[PLAYERS]),
         entries(txn, f->rows[TEAMS]), f->minimal ? "fk" : "ji", entries(txn, f->index));
  if (!f->minimal) printf(" jr %zu", entries(txn, f->result_ids));
  printf("\n");
  mdb_txn_abort(txn);
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *made_dir; /* removed at exit, failures too */

static void remove_state(void)
{
  const char *dir = made_dir;
  char path[4200];
  snprintf(path, sizeof path, "%s/data.mdb", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/lock.mdb", dir);
  unlink(path);
  rmdir(dir);
}

/* A fresh directory for the state, as runnel makes one without --state. */
static char *fresh_dir(void)
{
  const char *tmp = getenv("TMPDIR");
  static char dir[4096];
  snprintf(dir, sizeof dir, "%s/fkjoin-floor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) { perror(dir); exit(1); }
  made_dir = dir;
  atexit(remove_state);
  return dir;
}

int main(int argc, char **argv)
{
  const char *path = NULL, *keep_dir = NULL;
  int mode = -1;
  bool load_only = false;
  long carry = CARRY_GROUPS;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runnel-layout") == 0) mode = 0;
    else if (strcmp(argv[i], "--minimal") == 0) mode = 1;
    else if (strcmp(argv[i], "--load-only") == 0) load_only = true;
    else if (strncmp(argv[i], "--dir=", 6) == 0) keep_dir = argv[i] + 6;
    else if (strncmp(argv[i], "--carry=", 8) == 0) carry = strtol(argv[i] + 8, NULL, 10);
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else mode = -2;
  }
  if (!path || mode < 0 || carry < 1 || carry > 1 << 20) {
    fprintf(stderr, "usage: fkjoin_floor FILE.ndjson --runnel-layout|--minimal [--carry=GROUPS] [--load-only] [--dir=DIR]\n");
    return 2;
  }
  load L = { 0 };
  load_file(path, &L);
  floor_db f = { .minimal = mode == 1, .carry_groups = (unsigned)carry };
  const char *dir = keep_dir ? keep_dir : fresh_dir();
  open_env(&f, dir);
  double seconds = 0;
  if (!load_only) {
    double t0 = now();
    apply_all(&f, &L);
    seconds = now() - t0;
    report(&f, &L, seconds);
  }
  mdb_env_close(f.env);
  free(f.valbuf);
  free(L.changes);
  free(L.arena);
  return 0;
}
