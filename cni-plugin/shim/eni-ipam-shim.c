/*
 * eni-ipam-shim: the CNI binary `eni-ipam` (installed by ipamd, ipamd/startup/cni-install.ts).
 *
 * All CNI logic is TypeScript. This program only carries one invocation to ipamd's CNI
 * exec socket, which runs the plugin code in-process (ipamd/cni-exec), and relays the
 * answer, so a pod ADD does not pay for a Node start. Wire format: the docstring of
 * ipamd/cni-exec/protocol.ts (the one description of it; keep both sides in step).
 *
 * 1. Reads stdin (the network config) and finds the socket in its top-level
 *    "execSocket" string (default DEFAULT_EXEC_SOCKET; "" = do not use it).
 * 2. Connects. If that fails (ipamd down or not started: ENOENT, ECONNREFUSED, ...),
 *    nothing was sent: it execs the Node plugin `eni-ipam.cjs` beside its own binary
 *    with the same environment and the same stdin bytes (so VERSION, and DEL with ipamd
 *    down, work exactly as the Node plugin does). Same when the config cannot be
 *    scanned, or when ipamd answers "F" (run it yourself; sent before doing anything).
 * 3. Otherwise it sends the request and writes ipamd's stdout/stderr bytes and exit code.
 *    After the request was sent it never falls back: a dropped connection, a malformed
 *    or late answer is CNI error 11 (try again later) on stdout, exit 1, so an ADD can
 *    never run twice.
 *
 * Build: gcc -O2 -static (scripts/bundle-plugin.mjs). Linux only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_EXEC_SOCKET "/var/run/eni-ipam/cni-exec.sock"
#define NODE_PLUGIN_NAME "eni-ipam.cjs"
#define MAX_STDIN (8u << 20)          /* protocol.ts MAX_STDIN_BYTES */
#define MAX_RESPONSE (64u << 20)
#define RESPONSE_TIMEOUT_MS 110000    /* longer than any verb's deadlines at ipamd */
#define TRY_AGAIN 11                  /* CNI "try again later" */

extern char **environ;

struct buf { char *p; size_t len, cap; };

static void put(struct buf *b, const void *d, size_t n) {
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

static void put_u32(struct buf *b, uint32_t v) {
  unsigned char x[4] = { v >> 24, v >> 16, v >> 8, v };
  put(b, x, 4);
}

static void put_field(struct buf *b, const void *d, size_t n) { put_u32(b, (uint32_t)n); put(b, d, n); }

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) { if (errno == EINTR) continue; return -1; }
    p += w; n -= (size_t)w;
  }
  return 0;
}

/* ---- a small, careful scan of the top level of a JSON object (RFC 8259) ---- */

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

/*
 * Finds the top-level member `key` whose value is a string. Returns 1 (copied to out,
 * last occurrence wins as in JSON.parse), 0 (absent or not a string), -1 (not a JSON
 * object, or a key/value with escapes this scan does not decode, or too long).
 */
static int top_level_string(const char *json, size_t n, const char *key, char *out, size_t outsz) {
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
    const char *v = p;
    if (!(p = skip_value(p, e, 0))) return -1;
    if (match) {
      if (*v != '"') found = 0;
      else {
        size_t vlen = (size_t)(p - 1 - (v + 1));
        if (memchr(v + 1, '\\', vlen) || vlen >= outsz) return -1;
        memcpy(out, v + 1, vlen);
        out[vlen] = '\0';
        found = 1;
      }
    }
    p = ws(p, e);
    if (p < e && *p == ',') { p = ws(p + 1, e); continue; }
    if (p < e && *p == '}') return ws(p + 1, e) == e ? found : -1;
    return -1;
  }
}

/* ---- outcomes ---- */

static char cni_version[16] = "1.1.0";

static void json_str(struct buf *b, const char *s) {
  put(b, "\"", 1);
  for (; *s; s++) {
    char esc[8];
    if (*s == '"' || *s == '\\') { esc[0] = '\\'; esc[1] = *s; put(b, esc, 2); }
    else if ((unsigned char)*s < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", (unsigned char)*s); put(b, esc, 6); }
    else put(b, s, 1);
  }
  put(b, "\"", 1);
}

/* Prints the CNI error object (spec "Error") and exits 1. */
static void cni_error(int code, const char *msg, const char *details) {
  struct buf b = {0};
  char num[16];
  put(&b, "{\"cniVersion\":", 14);
  json_str(&b, cni_version);
  snprintf(num, sizeof num, ",\"code\":%d", code);
  put(&b, num, strlen(num));
  put(&b, ",\"msg\":", 7);
  json_str(&b, msg);
  put(&b, ",\"details\":", 11);
  json_str(&b, details);
  put(&b, "}", 1);
  write_all(1, b.p, b.len);
  exit(1);
}

/* Execs the Node plugin beside this binary with the same env and the same stdin bytes. */
static void run_node_plugin(const struct buf *in, const char *why) {
  char self[PATH_MAX], plugin[PATH_MAX + 16];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) cni_error(TRY_AGAIN, "cannot find the eni-ipam Node plugin", strerror(errno));
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) slash[1] = '\0';
  snprintf(plugin, sizeof plugin, "%s%s", slash ? self : "./", NODE_PLUGIN_NAME);
  if (getenv("ENI_IPAM_SHIM_DEBUG")) fprintf(stderr, "eni-ipam: running %s: %s\n", plugin, why);
  int fd = memfd_create("eni-ipam-stdin", 0);
  if (fd < 0 || write_all(fd, in->p ? in->p : "", in->len) < 0 || lseek(fd, 0, SEEK_SET) < 0 || dup2(fd, 0) < 0)
    cni_error(TRY_AGAIN, "cannot pass stdin to the eni-ipam Node plugin", strerror(errno));
  if (fd != 0) close(fd);
  char *argv[] = { plugin, NULL };
  execv(plugin, argv);
  cni_error(TRY_AGAIN, "cannot run the eni-ipam Node plugin", strerror(errno));
}

static void netns_id(const char *path, char *out, size_t outsz) {
  struct stat st;
  if (!path || !*path) out[0] = '\0';
  else if (stat(path, &st) != 0) snprintf(out, outsz, "!%s", errno == ENOENT ? "ENOENT" : "error");
  else snprintf(out, outsz, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

static uint32_t get_u32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Reads the whole response (until EOF) within the deadline. Returns 0, or -1 with errno. */
static int read_response(int fd, struct buf *r) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    long left = RESPONSE_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) { errno = ETIMEDOUT; return -1; }
    if (pr < 0) return -1;
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return 0;
    if (r->len + (size_t)n > MAX_RESPONSE) { errno = EMSGSIZE; return -1; }
    put(r, chunk, (size_t)n);
  }
}

int main(void) {
  struct buf in = {0};
  char chunk[65536];
  for (;;) { /* stdin: the network configuration */
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (in.len + (size_t)n > MAX_STDIN) run_node_plugin(&in, "stdin larger than the exec protocol allows"); /* unreachable in practice */
    put(&in, chunk, (size_t)n);
  }
  char ver[sizeof cni_version];
  if (top_level_string(in.p ? in.p : "", in.len, "cniVersion", ver, sizeof ver) == 1 && ver[0] && strspn(ver, "0123456789.") == strlen(ver))
    strcpy(cni_version, ver);

  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int found = top_level_string(in.p ? in.p : "", in.len, "execSocket", addr.sun_path, sizeof addr.sun_path);
  if (found < 0) run_node_plugin(&in, "config not scanned (not a plain JSON object)");
  if (found == 0) strcpy(addr.sun_path, DEFAULT_EXEC_SOCKET);
  if (addr.sun_path[0] != '/') run_node_plugin(&in, "execSocket is empty or not an absolute path");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) run_node_plugin(&in, strerror(errno));

  /* Connected: from here on, never fall back unless ipamd answers "F". */
  struct buf req = {0}, env = {0};
  char self_ns[64], pod_ns[64];
  for (char **e = environ; *e; e++)
    if (strncmp(*e, "CNI_", 4) == 0) put(&env, *e, strlen(*e) + 1);
  netns_id("/proc/self/ns/net", self_ns, sizeof self_ns);
  netns_id(getenv("CNI_NETNS"), pod_ns, sizeof pod_ns);
  put(&req, "EIX1", 4);
  put_field(&req, env.p, env.len);
  put_field(&req, in.p, in.len);
  put_field(&req, self_ns, strlen(self_ns));
  put_field(&req, pod_ns, strlen(pod_ns));
  signal(SIGPIPE, SIG_IGN);
  if (write_all(fd, req.p, req.len) < 0) cni_error(TRY_AGAIN, "lost the connection to ipamd while sending, try again later", strerror(errno));

  struct buf r = {0};
  if (read_response(fd, &r) < 0) cni_error(TRY_AGAIN, "no answer from ipamd, try again later", strerror(errno));
  const unsigned char *p = (const unsigned char *)r.p;
  if (r.len < 5 || memcmp(p, "EIX1", 4) != 0) cni_error(TRY_AGAIN, "ipamd closed the connection without an answer, try again later", "outcome unknown; the runtime retries");
  if (p[4] == 'F' && r.len >= 9 && 9 + (size_t)get_u32(p + 5) == r.len) {
    char why[512];
    size_t n = get_u32(p + 5) < sizeof why - 1 ? get_u32(p + 5) : sizeof why - 1;
    memcpy(why, p + 9, n);
    why[n] = '\0';
    close(fd);
    run_node_plugin(&in, why);
  }
  if (p[4] == 'R' && r.len >= 13) {
    uint32_t code = get_u32(p + 5), olen = get_u32(p + 9);
    if (13 + (size_t)olen + 4 <= r.len) {
      uint32_t elen = get_u32(p + 13 + olen);
      if (17 + (size_t)olen + elen == r.len) {
        write_all(2, r.p + 17 + olen, elen);
        if (write_all(1, r.p + 13, olen) < 0) return 1;
        return code > 255 ? 1 : (int)code;
      }
    }
  }
  cni_error(TRY_AGAIN, "malformed answer from ipamd, try again later", "outcome unknown; the runtime retries");
  return 1;
}
