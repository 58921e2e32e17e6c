/* store_file.c — data.mdb read as a file, before LMDB maps it: its map
 * size, and whether every page its newest transaction reaches lies inside
 * it. Mapping a file cut short of a page its trees reach dies of SIGBUS at
 * the first read of that page, and a writer committing over it makes the
 * damage permanent.
 *
 * LMDB's layout (lmdb 0.9, 64-bit hosts), as far as this file needs it:
 *     meta page (pages 0 and 1; LMDB uses the one with the larger txnid):
 *           |page header (16)|u32 magic|u32 version|u64 address|u64 mapsize|
 *           |MDB_db free|MDB_db main|u64 last_pgno|u64 txnid|
 *           (the free tree's pad holds the page size)
 *     page: |u64 pgno|u16 pad|u16 flags|u16 lower|u16 upper|u16 ptrs[]…|
 *     node: |u16 lo|u16 hi|u16 flags|u16 ksize|key|data|
 *           a branch node's child: lo | hi << 16 | flags << 32;
 *           a leaf node's data size: lo | hi << 16, its flags F_BIGDATA
 *           (data: the u64 pgno of its overflow pages), F_SUBDATA (data:
 *           an MDB_db record), F_DUPDATA alone (data: a sub-page inside
 *           the node, reaching no other page)
 *     MDB_db (48 bytes): |u32 pad|u16 flags|u16 depth|u64 branch|u64 leaf|
 *           |u64 overflow|u64 entries|u64 root| (root ~0: an empty tree)
 *
 * No page past last_pgno is reachable, so a file holding it is whole
 * without a walk. A shorter file is common (the pages a transaction
 * allocated and freed again are never written) and is walked: the free
 * tree, the main tree (one F_SUBDATA node per named database) and every
 * named database's tree. A tree is read down to its branch pages, their
 * children checked by number, unless its leaves can reach further pages
 * (it has overflow pages, or sorted duplicates) or the walk is deep
 * (runnel verify). Every page read is counted: a damaged tree reaching a
 * page twice cannot make the walk run for ever. Another process may
 * commit meanwhile (a reader's open): the walk is believed only when the
 * newest meta page did not change under it. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_AT 16
#define META_MAGIC 0xBEEFC0DEu
#define META_MAPSIZE 16
#define META_PSIZE 24
#define META_FREE_DB 24
#define META_MAIN_DB 72
#define META_LAST_PGNO 120
#define META_TXNID 128
#define META_LEN 136

#define PAGE_HDR 16
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_LEAF2 0x20
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02
#define NODE_HDR 8
#define DB_LEN 48
#define DB_DEPTH 6
#define DB_OVERFLOW 24
#define DB_ROOT 40
#define DB_DUPSORT 0x04 /* MDB_DUPSORT, in an MDB_db's flags */
#define MAX_DEPTH 32    /* LMDB's cursor stack */
#define WALK_TRIES 3    /* walks a committing writer may spoil before the check gives up */

static uint16_t u16_at(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t u32_at(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64_at(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* The newer meta page of the file open on fd, copied to m; false when the
 * file is too short for one or is not LMDB's. */
static bool newest_meta(int fd, unsigned char m[META_LEN])
{
  unsigned char m1[META_LEN];
  if (pread(fd, m, META_LEN, META_AT) != META_LEN || u32_at(m) != META_MAGIC) return false;
  uint32_t psize = u32_at(m + META_PSIZE);
  if (psize < 512 || psize > 65536 || (psize & (psize - 1))) return false;
  if (pread(fd, m1, META_LEN, (off_t)psize + META_AT) == META_LEN && u32_at(m1) == META_MAGIC &&
      u64_at(m1 + META_TXNID) > u64_at(m + META_TXNID))
    memcpy(m, m1, META_LEN);
  return true;
}

typedef struct walk {
  int fd;
  uint32_t psize;
  uint64_t size;   /* the file's */
  uint64_t npages; /* whole pages in it */
  uint64_t budget; /* pages still to read: each page of the file once */
  bool deep;
  const char *path;
  rn_err *e;
} walk;

static int damaged(walk *w, const char *what, uint64_t pgno)
{
  return rn_err_set(w->e, RN_ESTORE, "state damaged: %s %s (page %llu; it holds %llu pages of %u bytes)", w->path,
                    what, (unsigned long long)pgno, (unsigned long long)w->npages, w->psize);
}

/* Pages pgno..pgno+count of a tree: inside the file, past the metas. */
static int reach(walk *w, uint64_t pgno, uint64_t count)
{
  if (pgno < 2 || pgno > UINT64_MAX / 65536 - count) return damaged(w, "is damaged: a tree reaches no page", pgno);
  if (pgno + count <= w->npages) return 0;
  return rn_err_set(w->e, RN_ESTORE, "state damaged: %s is truncated (%llu bytes; its last transaction needs %llu)",
                    w->path, (unsigned long long)w->size, (unsigned long long)((pgno + count) * w->psize));
}

static int tree(walk *w, const unsigned char *db, bool main_tree, int level);

/* Page pgno of a tree, height levels above its leaves (0: a leaf page). */
static int page_at(walk *w, uint64_t pgno, int height, bool leaves, int level)
{
  if (level > 3 * MAX_DEPTH) return damaged(w, "is damaged: its trees nest deeper than LMDB's", pgno);
  int rc = reach(w, pgno, 1);
  if (rc) return rc;
  if (w->budget == 0) return damaged(w, "is damaged: its trees reach a page more than once", pgno);
  w->budget--;
  unsigned char *p = malloc(w->psize);
  if (!p) return rn_err_set(w->e, RN_ENOMEM, "out of memory");
  if (pread(w->fd, p, w->psize, (off_t)(pgno * w->psize)) != (ssize_t)w->psize) {
    free(p);
    return damaged(w, "cannot be read", pgno);
  }
  uint16_t flags = u16_at(p + 10), lower = u16_at(p + 12);
  if (u64_at(p) != pgno || !(flags & (height ? P_BRANCH : P_LEAF)) || lower < PAGE_HDR || lower > w->psize) {
    free(p);
    return damaged(w, "is damaged: a tree reaches a page that is not one of its own", pgno);
  }
  unsigned n = flags & P_LEAF2 ? 0 : (lower - PAGE_HDR) / 2u; /* a LEAF2 page holds keys alone */
  for (unsigned i = 0; i < n && !rc; i++) {
    unsigned at = u16_at(p + PAGE_HDR + 2 * i);
    const unsigned char *node = p + at;
    if (at < PAGE_HDR || at > w->psize - NODE_HDR || at + NODE_HDR + u16_at(node + 6) > w->psize) {
      rc = damaged(w, "is damaged: a node lies outside its page", pgno);
      break;
    }
    uint16_t nflags = u16_at(node + 4);
    const unsigned char *data = node + NODE_HDR + u16_at(node + 6);
    size_t room = w->psize - (size_t)(data - p);
    if (height) {
      uint64_t child = u16_at(node) | (uint64_t)u16_at(node + 2) << 16 | (uint64_t)nflags << 32;
      rc = height > 1 || leaves ? page_at(w, child, height - 1, leaves, level + 1) : reach(w, child, 1);
    } else if (nflags & F_BIGDATA) {
      uint32_t dsize = u16_at(node) | (uint32_t)u16_at(node + 2) << 16;
      rc = room < 8 ? damaged(w, "is damaged: a node lies outside its page", pgno)
                    : reach(w, u64_at(data), ((uint64_t)dsize + PAGE_HDR + w->psize - 1) / w->psize);
    } else if (nflags & F_SUBDATA) {
      rc = room < DB_LEN ? damaged(w, "is damaged: a database record lies outside its page", pgno)
                         : tree(w, data, false, level + 1);
    }
  }
  free(p);
  return rc;
}

/* The tree an MDB_db record describes; the main tree's leaves are read
 * always (they hold the named databases). */
static int tree(walk *w, const unsigned char *db, bool main_tree, int level)
{
  uint64_t root = u64_at(db + DB_ROOT);
  uint16_t depth = u16_at(db + DB_DEPTH);
  if (root == ~(uint64_t)0) return 0;
  if (depth == 0 || depth > MAX_DEPTH) return damaged(w, "is damaged: a database record gives its tree no depth", root);
  bool leaves = w->deep || main_tree || u64_at(db + DB_OVERFLOW) || (u16_at(db + 4) & DB_DUPSORT);
  return page_at(w, root, depth - 1, leaves, level);
}

int rn_store_check_file(const char *dir, bool deep, rn_err *e)
{
  if (sizeof(void *) != 8) return 0; /* the layout above is the 64-bit one */
  char data[strlen(dir) + sizeof "/data.mdb"];
  snprintf(data, sizeof data, "%s/data.mdb", dir);
  int fd = open(data, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO named data.mdb would block the open for ever */
  if (fd < 0) return 0; /* absent: LMDB makes it, or says why not */
  int rc = 0;
  struct stat what;
  if (fstat(fd, &what) == 0 && !S_ISREG(what.st_mode) && !S_ISDIR(what.st_mode)) { /* a directory: LMDB says EISDIR */
    close(fd);
    return rn_err_set(e, RN_EIO, "%s: not a runnel state: its data.mdb is %s, not a file", dir,
                      S_ISFIFO(what.st_mode) ? "a FIFO" : S_ISSOCK(what.st_mode) ? "a socket"
                      : S_ISCHR(what.st_mode) ? "a character device" : S_ISBLK(what.st_mode) ? "a block device"
                      : "no regular file");
  }
  for (int tries = 0; tries < WALK_TRIES; tries++) {
    struct stat st;
    unsigned char m[META_LEN], again[META_LEN];
    if (fstat(fd, &st) != 0) break;
    if (st.st_size == 0) {
      rc = rn_err_set(e, RN_ESTORE, "state damaged: %s is empty (0 bytes); if this state never committed a group, "
                      "remove the file to start it anew", data);
      break;
    }
    if (!newest_meta(fd, m)) {
      if (st.st_size < META_AT + META_LEN)
        rc = rn_err_set(e, RN_ESTORE, "state damaged: %s is truncated (%llu bytes): shorter than its meta page",
                        data, (unsigned long long)st.st_size);
      break; /* not LMDB's: mdb_env_open says so */
    }
    walk w = { fd, u32_at(m + META_PSIZE), (uint64_t)st.st_size, 0, 0, deep, data, e };
    w.npages = w.size / w.psize;
    w.budget = w.npages;
    if (!deep && u64_at(m + META_LAST_PGNO) < w.npages) break; /* it holds every page there is */
    rc = tree(&w, m + META_FREE_DB, false, 0);
    if (!rc) rc = tree(&w, m + META_MAIN_DB, true, 0);
    if (!rc || rc == RN_ENOMEM || !newest_meta(fd, again) || memcmp(m, again, META_LEN) == 0) break;
    rc = 0; /* a writer committed under the walk: what it found damaged may be its newer pages */
    rn_err_clear(e);
  }
  close(fd);
  return rc;
}

uint64_t rn_store_file_map(const char *dir)
{
  if (sizeof(void *) != 8) return 0;
  char data[strlen(dir) + sizeof "/data.mdb"];
  snprintf(data, sizeof data, "%s/data.mdb", dir);
  int fd = open(data, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* never blocked by a FIFO */
  unsigned char m[META_LEN];
  struct stat st;
  bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && newest_meta(fd, m);
  if (fd >= 0) close(fd);
  return ok ? u64_at(m + META_MAPSIZE) : 0;
}

int rn_store_file_set_map(int fd, uint64_t map)
{
  if (sizeof(void *) != 8 || !map) return 0;
  unsigned char m[META_LEN];
  if (pread(fd, m, META_LEN, META_AT) != META_LEN || u32_at(m) != META_MAGIC) return EINVAL;
  uint32_t psize = u32_at(m + META_PSIZE);
  if (psize < 512 || psize > 65536 || (psize & (psize - 1))) return EINVAL;
  for (off_t page = 0; page < 2; page++) {
    off_t at = page * (off_t)psize + META_AT;
    if (pread(fd, m, META_LEN, at) != META_LEN || u32_at(m) != META_MAGIC) return EINVAL;
    if (u64_at(m + META_MAPSIZE) <= map || (u64_at(m + META_LAST_PGNO) + 1) * psize > map) continue;
    unsigned char v[8];
    memcpy(v, &map, 8);
    if (pwrite(fd, v, 8, at + META_MAPSIZE) != 8) return errno ? errno : EIO;
  }
  return 0;
}
