/*
 * eni-ipam-shim: the CNI binary `eni-ipam` (installed by ipamd, ipamd/startup/cni-install.ts).
 * It is what the runtime executes on the host, and the host has no Node.js (EKS AMIs,
 * Bottlerocket): every verb is answered here when ipamd cannot take it.
 *
 * All CNI logic is TypeScript and runs inside ipamd: this program carries one invocation
 * to ipamd's CNI exec socket and relays the answer. Wire format: ipamd/cni-exec/protocol.ts
 * (the one description of it; keep both sides in step).
 *
 * 1. Reads stdin (the network config, at most MAX_STDIN bytes: a larger one is CNI error
 *    7, never cut; one that is not a JSON object, or nests over 64 deep, is error 6) and scans its top level for "execSocket" (default DEFAULT_EXEC_SOCKET),
 *    "ipamdWaitSeconds" (ADD's wait for ipamd, default 10, 0-300) and "nodePlugin".
 * 2. VERSION is answered here, from the versions the build passes in (scripts/bundle-plugin.mjs
 *    reads them from cni-plugin/versions.ts, so there is one list).
 * 3. Connects and sends the request; ipamd answers R (ran it: relay stdout, stderr, exit code),
 *    U (not serving, nothing done) or F (cannot run it here, nothing done).
 * 4. ipamd not serving (no socket, connection refused, or U):
 *    - ADD retries the connection until ipamdWaitSeconds have passed (a DaemonSet rolling
 *      update), then CNI error 11 "ipamd is not serving";
 *    - DEL is recorded in the spool (<dir of execSocket>/del-spool, spool.c; ipamd applies
 *      it before its first evidence pass, or as soon as it sees it) and succeeds (exit 0,
 *      no output, as any DEL);
 *    - CHECK and GC: CNI error 11; STATUS: 50 (spec 1.1.0, "plugin not available").
 *    F: DEL is spooled too; STATUS 50; other verbs CNI error 5 with ipamd's reason (it names
 *    the DaemonSet setting that is missing: hostNetwork, hostPID, the /var/run/netns mount).
 * 5. After the request was sent it never runs anything else: a dropped connection, a
 *    malformed or late answer is CNI error 11, so an ADD can never run twice.
 *
 * Developer mode: with a "nodePlugin" path in the config (ipamd writes it only when
 * ENI_IPAM_CNI_EXEC=false), the shim execs that Node plugin (same env and stdin) wherever
 * it would otherwise fail for lack of ipamd (no execSocket, not serving, F). Production
 * configs do not have it: nothing here ever needs Node.
 *
 * Trace (benchmarks, bench/cni-vs-go.ts): with ENI_IPAM_SHIM_TRACE set, an R answer is
 * preceded on stderr by one line `eni-ipam-trace start=<CLOCK_REALTIME µs at main>
 * connected=<µs> sent=<µs> answered=<µs>` (µs from main, CLOCK_MONOTONIC): when the
 * connection was up, the request written, and the whole answer read. Off by default.
 *
 * Build: gcc -O2 -static with -DENI_IPAM_VERSIONS and -DENI_IPAM_LATEST_VERSION
 * (scripts/bundle-plugin.mjs). Linux only.
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
#include "shim.h"

#ifndef ENI_IPAM_VERSIONS
#error "build with scripts/bundle-plugin.mjs: it passes -DENI_IPAM_VERSIONS from cni-plugin/versions.ts"
#endif
#ifndef ENI_IPAM_LATEST_VERSION
#error "build with scripts/bundle-plugin.mjs: it passes -DENI_IPAM_LATEST_VERSION from cni-plugin/versions.ts"
#endif

#define DEFAULT_EXEC_SOCKET "/var/run/eni-ipam/cni-exec.sock"
#define SPOOL_SUBDIR "del-spool"      /* spool.ts SPOOL_DIR_NAME */
#define MAX_STDIN (8u << 20)          /* protocol.ts MAX_STDIN_BYTES */
#define MAX_RESPONSE (64u << 20)
#define RESPONSE_TIMEOUT_MS 110000    /* longer than any verb's deadlines at ipamd */
#define DEFAULT_WAIT_S 10.0           /* ADD's wait for ipamd to serve */
#define MAX_WAIT_S 300.0
#define RETRY_MS 200

enum { INCOMPATIBLE = 1, INVALID_ENV = 4, IO_FAILURE = 5, DECODE = 6, INVALID_CONFIG = 7, TRY_AGAIN = 11, NOT_AVAILABLE = 50 };

extern char **environ;
char cni_version[16] = ENI_IPAM_LATEST_VERSION;

static struct buf in;                 /* stdin */
static size_t in_total;               /* stdin bytes, including any beyond MAX_STDIN */
static const char *verb = "";
static char node_plugin[PATH_MAX];    /* "" = developer mode off */
static struct sockaddr_un addr = { .sun_family = AF_UNIX };

void cni_error(int code, const char *msg, const char *details) {
  struct buf b = {0};
  char num[16];
  put_str(&b, "{\"cniVersion\":");
  json_str(&b, cni_version);
  snprintf(num, sizeof num, ",\"code\":%d", code);
  put_str(&b, num);
  put_str(&b, ",\"msg\":");
  json_str(&b, msg);
  put_str(&b, ",\"details\":");
  json_str(&b, details);
  put_str(&b, "}");
  write_all(1, b.p, b.len);
  exit(1);
}

static int is_supported(const char *v) {
  char q[24];
  if (strlen(v) > 16) return 0;
  snprintf(q, sizeof q, "\"%s\"", v);
  return strstr(ENI_IPAM_VERSIONS, q) != NULL;
}

/* ENI_IPAM_SHIM_TRACE: µs (CLOCK_MONOTONIC) of main's start, connect, send; 0 = not tracing. */
static long long trace_t0, trace_connected, trace_sent;
static long long trace_realtime_us;

static long long mono_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Developer mode: execs the Node plugin named by "nodePlugin" with the same env and stdin bytes. */
static void run_node_plugin(const char *why) {
  if (getenv("ENI_IPAM_SHIM_DEBUG")) fprintf(stderr, "eni-ipam: running %s: %s\n", node_plugin, why);
  int fd = memfd_create("eni-ipam-stdin", 0);
  if (fd < 0 || write_all(fd, in.p ? in.p : "", in.len) < 0 || lseek(fd, 0, SEEK_SET) < 0 || dup2(fd, 0) < 0)
    cni_error(TRY_AGAIN, "cannot pass stdin to the eni-ipam Node plugin", strerror(errno));
  if (fd != 0) close(fd);
  char *argv[] = { node_plugin, NULL };
  execv(node_plugin, argv);
  cni_error(TRY_AGAIN, "cannot run the eni-ipam Node plugin (nodePlugin in the network config)", strerror(errno));
}

static int valid_name(const char *s) { /* netconf.ts: ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ */
  if (!*s) return 0;
  for (const char *p = s; *p; p++) {
    int alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
    if (!alnum && (p == s || !strchr("_.-", *p))) return 0;
  }
  return 1;
}

static int valid_ifname(const char *s) { /* veth-name.ts ifNameError: 1-15 bytes, not . or .., no / : or space */
  size_t n = strlen(s);
  if (n == 0 || n > 15 || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
  for (const char *p = s; *p; p++) if (*p == '/' || *p == ':' || (unsigned char)*p <= ' ' || *p == 0x7f) return 0;
  return 1;
}

/* DEL while ipamd cannot take it: validate what the spool needs, record it, succeed. */
static void spool_this_del(const char *cause) {
  char v[64], name[256], dir[sizeof addr.sun_path + 16], why[512];
  int r = top_level_string(in.p ? in.p : "", in.len, "cniVersion", v, sizeof v);
  if (r < 0) cni_error(DECODE, "failed to decode the network configuration", "stdin is not a JSON object the shim can read while ipamd is not serving");
  if (r == 0) cni_error(INVALID_CONFIG, "invalid network configuration", "cniVersion: cniVersion must be a string");
  if (!is_supported(v)) {
    char d[128];
    snprintf(d, sizeof d, "supported: %s", ENI_IPAM_VERSIONS);
    cni_error(INCOMPATIBLE, "unsupported cniVersion", d);
  }
  if (top_level_string(in.p, in.len, "name", name, sizeof name) != 1 || !valid_name(name))
    cni_error(INVALID_CONFIG, "invalid network configuration", "name: must start with a letter or digit and contain only letters, digits, \"_\", \".\" and \"-\"");
  const char *cid = getenv("CNI_CONTAINERID"), *ifn = getenv("CNI_IFNAME"), *ns = getenv("CNI_NETNS");
  if (!cid || !*cid || !ifn || !*ifn)
    cni_error(INVALID_ENV, !cid || !*cid ? (!ifn || !*ifn ? "missing CNI_CONTAINERID, CNI_IFNAME" : "missing CNI_CONTAINERID") : "missing CNI_IFNAME", "required for CNI_COMMAND=DEL");
  if (!valid_name(cid)) cni_error(INVALID_ENV, "invalid CNI_CONTAINERID", "expected [A-Za-z0-9][A-Za-z0-9_.-]*");
  if (!valid_ifname(ifn)) cni_error(INVALID_ENV, "invalid CNI_IFNAME", "expected 1-15 bytes without '/', ':' or whitespace");
  snprintf(dir, sizeof dir, "%s", addr.sun_path);
  char *slash = strrchr(dir, '/');
  snprintf(slash + 1, sizeof dir - (size_t)(slash + 1 - dir), "%s", SPOOL_SUBDIR);
  if (spool_del(dir, name, cid, ifn, ns ? ns : "", why, sizeof why) != 0)
    cni_error(TRY_AGAIN, "ipamd is not serving and the DEL could not be recorded, try again later", why);
  fprintf(stderr, "eni-ipam: ipamd is not serving (%s): DEL of %s/%s recorded in %s for ipamd to apply\n", cause, cid, ifn, dir);
  exit(0);
}

/* ipamd cannot take this invocation now (`cause`): the verb's answer when ipamd is down. */
static void not_serving(const char *cause, double waited_s) {
  char msg[512];
  if (!strcmp(verb, "DEL")) spool_this_del(cause);
  if (!strcmp(verb, "STATUS")) {
    snprintf(msg, sizeof msg, "ipamd is not serving on %s", addr.sun_path);
    cni_error(NOT_AVAILABLE, msg, cause);
  }
  if (!strcmp(verb, "ADD") || !strcmp(verb, "CHECK") || !strcmp(verb, "GC")) {
    if (waited_s > 0) snprintf(msg, sizeof msg, "ipamd is not serving on %s (waited %.1f s), try again later", addr.sun_path, waited_s);
    else snprintf(msg, sizeof msg, "ipamd is not serving on %s, try again later", addr.sun_path);
    cni_error(TRY_AGAIN, msg, cause);
  }
  if (!*verb) cni_error(INVALID_ENV, "missing CNI_COMMAND", "expected ADD, DEL, CHECK, GC, STATUS or VERSION");
  snprintf(msg, sizeof msg, "CNI_COMMAND %.64s is not implemented", verb);
  cni_error(INVALID_ENV, msg, "implemented: VERSION, ADD, DEL, CHECK, GC, STATUS");
}

static void netns_id(const char *path, char *out, size_t outsz) {
  struct stat st;
  if (!path || !*path) out[0] = '\0';
  else if (stat(path, &st) != 0) snprintf(out, outsz, "!%s", errno == ENOENT ? "ENOENT" : "error");
  else snprintf(out, outsz, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
}

static uint32_t get_u32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static void put_u32(struct buf *b, uint32_t v) { unsigned char x[4] = { v >> 24, v >> 16, v >> 8, v }; put(b, x, 4); }
static void put_field(struct buf *b, const void *d, size_t n) { put_u32(b, (uint32_t)n); put(b, d, n); }

/* Reads the whole response (until EOF) within the deadline. Returns 0, or -1 with errno. */
static int read_response(int fd, struct buf *r) {
  long long t0 = now_ms();
  for (;;) {
    long long left = RESPONSE_TIMEOUT_MS - (now_ms() - t0);
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

/* The short reason of an F or U answer (one line for messages). */
static void answer_reason(const struct buf *r, char *why, size_t whysz) {
  const unsigned char *p = (const unsigned char *)r->p;
  size_t n = r->len >= 9 && 9 + (size_t)get_u32(p + 5) == r->len ? get_u32(p + 5) : 0;
  if (n > whysz - 1) n = whysz - 1;
  memcpy(why, r->p + 9, n);
  why[n] = '\0';
}

/*
 * Sends the request on a connected socket and acts on the answer. Returns only for U
 * (ipamd not serving, nothing done), with its reason in `why`.
 */
static void exchange(int fd, const struct buf *req, char *why, size_t whysz) {
  if (trace_t0) trace_connected = mono_us();
  if (write_all(fd, req->p, req->len) < 0) cni_error(TRY_AGAIN, "lost the connection to ipamd while sending, try again later", strerror(errno));
  if (trace_t0) trace_sent = mono_us();
  struct buf r = {0};
  if (read_response(fd, &r) < 0) cni_error(TRY_AGAIN, "no answer from ipamd, try again later", strerror(errno));
  close(fd);
  const unsigned char *p = (const unsigned char *)r.p;
  if (r.len < 5 || memcmp(p, "EIX1", 4) != 0) cni_error(TRY_AGAIN, "ipamd closed the connection without an answer, try again later", "outcome unknown; the runtime retries");
  if (p[4] == 'U' || p[4] == 'F') {
    answer_reason(&r, why, whysz);
    if (p[4] == 'U') return;
    if (*node_plugin) run_node_plugin(why);
    if (!strcmp(verb, "DEL")) spool_this_del(why);
    if (!strcmp(verb, "STATUS")) cni_error(NOT_AVAILABLE, why, "ipamd cannot run CNI invocations from this plugin");
    cni_error(IO_FAILURE, why, "ipamd refused to run this invocation; nothing was done");
  }
  if (p[4] == 'R' && r.len >= 13) {
    uint32_t code = get_u32(p + 5), olen = get_u32(p + 9);
    if (13 + (size_t)olen + 4 <= r.len) {
      uint32_t elen = get_u32(p + 13 + olen);
      if (17 + (size_t)olen + elen == r.len) {
        if (trace_t0)
          fprintf(stderr, "eni-ipam-trace start=%lld connected=%lld sent=%lld answered=%lld\n", trace_realtime_us,
                  trace_connected - trace_t0, trace_sent - trace_t0, mono_us() - trace_t0);
        write_all(2, r.p + 17 + olen, elen);
        if (write_all(1, r.p + 13, olen) < 0) exit(1);
        exit(code > 255 ? 1 : (int)code);
      }
    }
  }
  cni_error(TRY_AGAIN, "malformed answer from ipamd, try again later", "outcome unknown; the runtime retries");
}

int main(void) {
  char chunk[65536];
  if (getenv("ENI_IPAM_SHIM_TRACE")) {
    struct timespec rt;
    trace_t0 = mono_us();
    clock_gettime(CLOCK_REALTIME, &rt);
    trace_realtime_us = (long long)rt.tv_sec * 1000000 + rt.tv_nsec / 1000;
  }
  for (;;) { /* stdin: the network configuration; beyond MAX_STDIN only counted */
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in_total += (size_t)n;
    if (in.len + (size_t)n <= MAX_STDIN) put(&in, chunk, (size_t)n);
  }
  if (!in.p) put(&in, "", 0);
  verb = getenv("CNI_COMMAND") ? getenv("CNI_COMMAND") : "";
  if (!strcmp(verb, "VERSION")) {
    static const char out[] = "{\"cniVersion\":\"" ENI_IPAM_LATEST_VERSION "\",\"supportedVersions\":[" ENI_IPAM_VERSIONS "]}";
    return write_all(1, out, sizeof out - 1) < 0 ? 1 : 0;
  }
  char ver[sizeof cni_version];
  if (in_total <= MAX_STDIN && top_level_string(in.p, in.len, "cniVersion", ver, sizeof ver) == 1 && is_supported(ver)) strcpy(cni_version, ver);
  if (in_total > MAX_STDIN) {
    char d[160];
    snprintf(d, sizeof d, "stdin has %zu bytes; eni-ipam accepts at most %u (8 MiB)", in_total, MAX_STDIN);
    cni_error(INVALID_CONFIG, "network configuration too large", d);
  }
  if (!json_is_object(in.p, in.len))
    cni_error(DECODE, "failed to decode the network configuration", "stdin is not a JSON object (or is nested more than 64 deep)");
  if (top_level_string(in.p, in.len, "nodePlugin", node_plugin, sizeof node_plugin) != 1 || node_plugin[0] != '/') node_plugin[0] = '\0';
  double wait_s = DEFAULT_WAIT_S, w;
  if (top_level_number(in.p, in.len, "ipamdWaitSeconds", &w) == 1 && w >= 0 && w <= MAX_WAIT_S) wait_s = w;
  int found = top_level_string(in.p, in.len, "execSocket", addr.sun_path, sizeof addr.sun_path);
  if (found != 1) strcpy(addr.sun_path, DEFAULT_EXEC_SOCKET); /* absent, or not scannable: ipamd's answer will say what is wrong */
  if (addr.sun_path[0] != '/') {
    if (*node_plugin) run_node_plugin("execSocket is empty");
    cni_error(INVALID_CONFIG, "invalid network configuration", "execSocket: must be the absolute path of ipamd's CNI exec socket (an empty one needs nodePlugin)");
  }

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

  long long t0 = now_ms(), deadline = t0 + (!strcmp(verb, "ADD") ? (long long)(wait_s * 1000) : 0);
  char why[512];
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) cni_error(TRY_AGAIN, "cannot create a socket, try again later", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) exchange(fd, &req, why, sizeof why); /* returns only for U */
    else {
      snprintf(why, sizeof why, "%s: %s", addr.sun_path, strerror(errno));
      close(fd);
    }
    if (*node_plugin) run_node_plugin(why);
    long long left = deadline - now_ms();
    if (left <= 0) not_serving(why, strcmp(verb, "ADD") ? 0 : (double)(now_ms() - t0) / 1000.0);
    struct timespec ts = { 0, (left < RETRY_MS ? left : RETRY_MS) * 1000000L };
    nanosleep(&ts, NULL);
  }
}
