/*
 * A small, careful scan of the top level of a JSON object (RFC 8259) for the shim: it
 * never builds a tree, never recurses deeper than 64 levels, and refuses what it does
 * not decode (escaped keys or values) instead of guessing. Also the shared byte buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shim.h"

void put(struct buf *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { fputs("eni-ipam: out of memory\n", stderr); exit(1); }
    b->p = p; b->cap = cap;
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}

void put_str(struct buf *b, const char *s) { put(b, s, strlen(s)); }

void json_str(struct buf *b, const char *s) {
  put(b, "\"", 1);
  for (; *s; s++) {
    char esc[8];
    if (*s == '"' || *s == '\\') { esc[0] = '\\'; esc[1] = *s; put(b, esc, 2); }
    else if ((unsigned char)*s < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)*s); put(b, esc, 6); }
    else put(b, s, 1);
  }
  put(b, "\"", 1);
}

int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) { if (errno == EINTR) continue; return -1; }
    p += w; n -= (size_t)w;
  }
  return 0;
}

static const char *ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* p at '"': returns the position after the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *e) {
  for (p++; p < e; p++) {
    if (*p == '\\') { if (++p >= e) return NULL; }
    else if (*p == '"') return p + 1;
    else if ((unsigned char)*p < 0x20) return NULL;
  }
  return NULL;
}

static const char *skip_value(const char *p, const char *e, int depth) {
  p = ws(p, e);
  if (p >= e || depth > 64) return NULL;
  if (*p == '"') return skip_string(p, e);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (p >= e || *p != '"' || !(p = skip_string(p, e))) return NULL;
        p = ws(p, e);
        if (p >= e || *p++ != ':') return NULL;
      }
      if (!(p = skip_value(p, e, depth + 1))) return NULL;
      p = ws(p, e);
      if (p < e && *p == ',') { p = ws(p + 1, e); continue; }
      if (p < e && *p == close) return p + 1;
      return NULL;
    }
  }
  const char *s = p; /* number, true, false, null */
  while (p < e && ((*p && strchr("+-.eE", *p)) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))) p++;
  return p > s ? p : NULL;
}

int json_is_object(const char *json, size_t n) {
  const char *p = ws(json, json + n), *e = json + n;
  if (p >= e || *p != '{') return 0;
  p = skip_value(p, e, 0);
  return p && ws(p, e) == e;
}

/* Finds the last top-level member `key`: 1 with its value span in *v..*ve, 0 absent, -1 unscannable. */
static int top_level_member(const char *json, size_t n, const char *key, const char **v, const char **ve) {
  const char *p = ws(json, json + n), *e = json + n;
  int found = 0;
  if (p >= e || *p++ != '{') return -1;
  p = ws(p, e);
  if (p < e && *p == '}') return ws(p + 1, e) == e ? 0 : -1;
  for (;;) {
    if (p >= e || *p != '"') return -1;
    const char *k = p + 1, *ke = skip_string(p, e);
    if (!ke) return -1;
    size_t klen = (size_t)(ke - 1 - k);
    if (memchr(k, '\\', klen)) return -1; /* an escaped key could spell `key` */
    int match = klen == strlen(key) && memcmp(k, key, klen) == 0;
    p = ws(ke, e);
    if (p >= e || *p++ != ':') return -1;
    p = ws(p, e);
    const char *start = p;
    if (!(p = skip_value(p, e, 0))) return -1;
    if (match) { *v = start; *ve = p; found = 1; }
    p = ws(p, e);
    if (p < e && *p == ',') { p = ws(p + 1, e); continue; }
    if (p < e && *p == '}') return ws(p + 1, e) == e ? found : -1;
    return -1;
  }
}

int top_level_string(const char *json, size_t n, const char *key, char *out, size_t outsz) {
  const char *v, *ve;
  int r = top_level_member(json, n, key, &v, &ve);
  if (r <= 0) return r;
  if (*v != '"') return 0;
  size_t vlen = (size_t)(ve - 1 - (v + 1));
  if (memchr(v + 1, '\\', vlen) || vlen >= outsz) return -1;
  memcpy(out, v + 1, vlen);
  out[vlen] = '\0';
  return 1;
}

int top_level_number(const char *json, size_t n, const char *key, double *out) {
  const char *v, *ve;
  int r = top_level_member(json, n, key, &v, &ve);
  if (r <= 0) return r;
  char tmp[64];
  size_t len = (size_t)(ve - v);
  if (!(*v == '-' || (*v >= '0' && *v <= '9')) || len >= sizeof tmp) return 0;
  memcpy(tmp, v, len);
  tmp[len] = '\0';
  char *end;
  double d = strtod(tmp, &end);
  if (*end != '\0') return 0;
  *out = d;
  return 1;
}
