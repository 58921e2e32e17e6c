/* suggest.c — "did you mean": the nearest column to a misspelt one (edit
 * distance, as git and cargo suggest commands), and the list of relations
 * an unknown relation's error names. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "json.h"
#include "suggest.h"

enum { NAME_MAX_COMPARED = 64 }; /* longer names are not compared: no suggestion */

/* Levenshtein distance of a and b (both at most NAME_MAX_COMPARED bytes). */
static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
  size_t row[NAME_MAX_COMPARED + 1];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *rn_suggest_column(const rn_schema *s, const char *name, size_t len)
{
  if (!s || len > NAME_MAX_COMPARED) return NULL;
  size_t limit = len / 3 > 1 ? len / 3 : 1;
  const char *best = NULL;
  size_t best_d = limit + 1;
  for (int i = 0; i < s->ncols; i++) { /* the same name in another case first ("ID" for "id"): however long */
    const rn_column *c = &s->cols[i];
    if (c->name_len == len && strncasecmp(c->name, name, len) == 0) return c->name;
  }
  for (int i = 0; i < s->ncols; i++) {
    const rn_column *c = &s->cols[i];
    if (c->name_len > NAME_MAX_COMPARED) continue;
    size_t d = distance(name, len, c->name, c->name_len);
    if (d < best_d && d < len && d < c->name_len) { best_d = d; best = c->name; } /* "a" is no "x" misspelt */
  }
  return best;
}

/* text after msg, cut at a character's start as the message was made
 * (rn_err_escape_into): a name cut in half a character made it no UTF-8. */
static void append(char *msg, size_t cap, const char *text)
{
  size_t used = strlen(msg);
  if (used + 1 < cap) rn_err_escape_into(msg + used, cap - used, text, strlen(text));
}

void rn_suggest_append_column(char *msg, size_t cap, const rn_schema *s, const char *name, size_t len)
{
  const char *near = rn_suggest_column(s, name, len);
  if (!near) return;
  char quoted[256]; /* its control bytes escaped, as the unknown name's are */
  append(msg, cap, " (did you mean ");
  append(msg, cap, rn_json_quote(quoted, sizeof quoted, near, strlen(near)));
  append(msg, cap, "?)");
}

void rn_suggest_append_relations(char *msg, size_t cap, const rn_pipeline *p)
{
  int listed = 0;
  for (int i = 0; i < p->nrels; i++) {
    const rn_rel *r = p->rels[i];
    if (r->kind != RN_REL_TABLE && r->kind != RN_REL_STREAM) continue;
    append(msg, cap, listed++ ? ", " : " (known: ");
    append(msg, cap, r->name);
  }
  append(msg, cap, listed ? ")" : " (none declared)");
}
