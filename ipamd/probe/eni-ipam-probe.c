/*
 * eni-ipam-probe: the DaemonSet's readiness and liveness probe, a small static binary so a
 * probe starts no JavaScript runtime (docs/design.md#17-probes-without-node). It makes the
 * same one call as ipamd/probe.ts, `grpc.health.v1.Health/Check` on ipamd's Unix socket
 * (https://github.com/grpc/grpc/blob/master/doc/health-checking.md), over the least of
 * HTTP/2 (RFC 9113) a gRPC call needs (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md):
 * the client preface, an empty SETTINGS, one HEADERS frame (HPACK, RFC 7541: static-table
 * indexes and literals without indexing or Huffman coding, which every decoder accepts),
 * one DATA frame ending the stream. Of the answer it reads DATA frames only (the
 * HealthCheckResponse, field 1 = status) and acks the server's SETTINGS and PINGs; it never
 * decodes the server's headers, so a call that ends without a message (a gRPC error such
 * as NOT_FOUND for an unknown --service) is "no health status".
 *
 * Exit codes and arguments are ipamd/probe.ts's:
 *   0 SERVING; 1 another status (NOT_SERVING, UNKNOWN, SERVICE_UNKNOWN);
 *   2 no answer: no socket, a socket nobody listens on (left by a crash), a connection
 *     closed or reset, no reply within --timeout (a hung ipamd), a gRPC error;
 *   3 bad arguments (the message names the argument and what is accepted).
 * --socket PATH (absolute, default /var/run/eni-ipam/ipamd.sock), --service NAME (default
 * "", at most 100 bytes), --timeout MS (whole call, 1..60000, default 5000). One line on
 * stdout (exit 0) or stderr (otherwise) says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_SERVING = 0, EXIT_NOT_SERVING = 1, EXIT_UNREACHABLE = 2, EXIT_USAGE = 3 };
enum { F_DATA = 0, F_HEADERS = 1, F_RST = 3, F_SETTINGS = 4, F_PING = 6, F_GOAWAY = 7 };
enum { FL_END_STREAM = 1, FL_ACK = 1, FL_END_HEADERS = 4, FL_PADDED = 8 };

static const char *sock_path = "/var/run/eni-ipam/ipamd.sock";
static const char *service = "";
static long timeout_ms = 5000;
static struct timespec deadline;

static void finish(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void finish(int code, const char *fmt, ...) {
  FILE *f = code == EXIT_SERVING ? stdout : stderr;
  va_list ap;
  va_start(ap, fmt);
  if (code == EXIT_USAGE) fputs("eni-ipam-probe: ", f);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  exit(code);
}

/* Parses argv as probe.ts does; exits 3 naming the bad argument. */
static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    const char *eq = strchr(a, '=');
    size_t alen = eq ? (size_t)(eq - a) : strlen(a);
    if (eq) v = eq + 1;
    else if (i + 1 < argc) v = argv[i + 1];
    int known = (alen == 8 && !strncmp(a, "--socket", 8)) || (alen == 9 && !strncmp(a, "--service", 9)) ||
                (alen == 9 && !strncmp(a, "--timeout", 9));
    if (!known) finish(EXIT_USAGE, "unknown argument \"%s\": expected --socket, --service or --timeout", a);
    if (!v) finish(EXIT_USAGE, "%.*s needs a value", (int)alen, a);
    if (!eq) i++;
    if (a[2] == 's' && a[3] == 'o') sock_path = v;
    else if (a[2] == 's') service = v;
    else {
      char *end;
      errno = 0;
      long t = strtol(v, &end, 10);
      if (!*v || *end || errno || v[0] == '-' || v[0] == '+' || t < 1 || t > 60000)
        finish(EXIT_USAGE, "--timeout \"%s\" is invalid: expected a whole number of ms from 1 to 60000", v);
      timeout_ms = t;
    }
  }
  if (sock_path[0] != '/')
    finish(EXIT_USAGE, "--socket \"%s\" is invalid: expected an absolute path to ipamd's Unix socket", sock_path);
  if (strlen(sock_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    finish(EXIT_USAGE, "--socket \"%s\" is invalid: longer than a Unix socket path may be (107 bytes)", sock_path);
  if (strlen(service) > 100) finish(EXIT_USAGE, "--service is invalid: at most 100 bytes");
}

/* Milliseconds left before the deadline (0 when past it). */
static int left_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long ms = (deadline.tv_sec - now.tv_sec) * 1000 + (deadline.tv_nsec - now.tv_nsec) / 1000000;
  return ms > 0 ? (int)ms : 0;
}

static void unreachable(const char *why) __attribute__((noreturn));
static void unreachable(const char *why) {
  finish(EXIT_UNREACHABLE, "ipamd is not serving on %s: %s", sock_path, why);
}

static void timed_out(void) __attribute__((noreturn));
static void timed_out(void) {
  char why[96];
  snprintf(why, sizeof why, "DEADLINE_EXCEEDED: no answer within %ld ms (ipamd hung or overloaded)", timeout_ms);
  unreachable(why);
}

/* Waits for `events` on fd until the deadline; exits 2 when it passes. */
static void wait_fd(int fd, short events) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int ms = left_ms();
    if (ms == 0) timed_out();
    int n = poll(&p, 1, ms);
    if (n > 0) return;
    if (n < 0 && errno != EINTR) unreachable(strerror(errno));
  }
}

static void send_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_fd(fd, POLLOUT);
    } else {
      unreachable(w < 0 ? strerror(errno) : "connection closed while sending");
    }
  }
}

static void recv_all(int fd, unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      wait_fd(fd, POLLIN);
    } else {
      unreachable(r < 0 ? strerror(errno) : "UNAVAILABLE: connection closed before an answer");
    }
  }
}

/* Appends a 9-byte frame header (RFC 9113 §4.1) to out. */
static size_t frame_header(unsigned char *out, size_t len, int type, int flags, uint32_t stream) {
  out[0] = (unsigned char)(len >> 16), out[1] = (unsigned char)(len >> 8), out[2] = (unsigned char)len;
  out[3] = (unsigned char)type, out[4] = (unsigned char)flags;
  out[5] = (unsigned char)(stream >> 24), out[6] = (unsigned char)(stream >> 16);
  out[7] = (unsigned char)(stream >> 8), out[8] = (unsigned char)stream;
  return 9;
}

/* HPACK literal without indexing, name from static-table index `idx` (< 15), raw value (< 127 bytes). */
static size_t hpack_lit(unsigned char *out, int idx, const char *value) {
  size_t n = strlen(value), o = 0;
  out[o++] = (unsigned char)idx;
  out[o++] = (unsigned char)n;
  memcpy(out + o, value, n);
  return o + n;
}

/* The whole request: preface, SETTINGS, HEADERS and DATA of stream 1. Returns its length. */
static size_t build_request(unsigned char *out) {
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  size_t o = 0;
  memcpy(out, preface, 24), o = 24;
  o += frame_header(out + o, 0, F_SETTINGS, 0, 0);
  unsigned char h[256];
  size_t hn = 0;
  h[hn++] = 0x83;                                        /* :method POST (static 3) */
  h[hn++] = 0x86;                                        /* :scheme http (static 6) */
  hn += hpack_lit(h + hn, 4, "/grpc.health.v1.Health/Check"); /* :path (static 4) */
  hn += hpack_lit(h + hn, 1, "localhost");               /* :authority (static 1) */
  h[hn++] = 0x0f, h[hn++] = 0x10;                        /* content-type (static 31 = 15 + 16) */
  h[hn++] = 16, memcpy(h + hn, "application/grpc", 16), hn += 16;
  h[hn++] = 0x00, h[hn++] = 2, memcpy(h + hn, "te", 2), hn += 2; /* te: trailers (new name) */
  h[hn++] = 8, memcpy(h + hn, "trailers", 8), hn += 8;
  o += frame_header(out + o, hn, F_HEADERS, FL_END_HEADERS, 1);
  memcpy(out + o, h, hn), o += hn;
  /* DATA: gRPC message prefix (uncompressed, u32 length) + HealthCheckRequest{service = 1}. */
  size_t sl = strlen(service), msg = sl ? 2 + sl : 0;
  o += frame_header(out + o, 5 + msg, F_DATA, FL_END_STREAM, 1);
  out[o++] = 0, out[o++] = 0, out[o++] = 0, out[o++] = 0, out[o++] = (unsigned char)msg;
  if (sl) out[o++] = 0x0a, out[o++] = (unsigned char)sl, memcpy(out + o, service, sl), o += sl;
  return o;
}

static const char *status_name(uint64_t s) {
  static const char *names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  return s < 4 ? names[s] : "UNKNOWN";
}

/* Field 1 (varint) of a HealthCheckResponse of n bytes; 0 (UNKNOWN) when absent. */
static uint64_t health_status(const unsigned char *m, size_t n) {
  uint64_t status = 0;
  for (size_t i = 0; i < n;) {
    uint64_t key = 0, val = 0;
    for (int sh = 0; i < n && sh < 64; sh += 7) {
      key |= (uint64_t)(m[i] & 0x7f) << sh;
      if (!(m[i++] & 0x80)) break;
    }
    if ((key & 7) != 0) break; /* only varints are expected; stop at anything else */
    for (int sh = 0; i < n && sh < 64; sh += 7) {
      val |= (uint64_t)(m[i] & 0x7f) << sh;
      if (!(m[i++] & 0x80)) break;
    }
    if ((key >> 3) == 1) status = val;
  }
  return status;
}

/* Reads frames until stream 1 ends; exits with the outcome. */
static void read_answer(int fd) {
  static unsigned char msg[4096];
  size_t mlen = 0;
  int have_msg = 0;
  for (;;) {
    unsigned char hd[9], pl[16384];
    recv_all(fd, hd, 9);
    size_t len = (size_t)hd[0] << 16 | (size_t)hd[1] << 8 | hd[2];
    int type = hd[3], flags = hd[4];
    uint32_t stream = ((uint32_t)hd[5] << 24 | (uint32_t)hd[6] << 16 | (uint32_t)hd[7] << 8 | hd[8]) & 0x7fffffff;
    if (len > sizeof pl) unreachable("INTERNAL: a frame larger than the default 16384-byte maximum");
    recv_all(fd, pl, len);
    if (type == F_SETTINGS && !(flags & FL_ACK)) {
      unsigned char ack[9];
      send_all(fd, ack, frame_header(ack, 0, F_SETTINGS, FL_ACK, 0));
    } else if (type == F_PING && !(flags & FL_ACK) && len == 8) {
      unsigned char pong[17];
      frame_header(pong, 8, F_PING, FL_ACK, 0);
      memcpy(pong + 9, pl, 8);
      send_all(fd, pong, 17);
    } else if (type == F_GOAWAY) {
      unreachable("UNAVAILABLE: ipamd sent GOAWAY (shutting down)");
    } else if (stream == 1 && type == F_RST) {
      unreachable("UNAVAILABLE: ipamd reset the call");
    } else if (stream == 1 && type == F_DATA) {
      size_t off = 0, pad = 0;
      if (flags & FL_PADDED) {
        if (len < 1 || pl[0] >= len) unreachable("INTERNAL: bad DATA padding");
        pad = pl[0], off = 1;
      }
      size_t n = len - off - pad;
      if (mlen + n > sizeof msg) unreachable("INTERNAL: health answer larger than 4 KiB");
      memcpy(msg + mlen, pl + off, n), mlen += n;
      if (mlen >= 5) {
        size_t want = (size_t)msg[1] << 24 | (size_t)msg[2] << 16 | (size_t)msg[3] << 8 | msg[4];
        if (msg[0] != 0) unreachable("INTERNAL: compressed health answer");
        if (want > sizeof msg - 5) unreachable("INTERNAL: health answer larger than 4 KiB");
        if (mlen >= 5 + want) have_msg = 1;
      }
    }
    if (stream == 1 && (type == F_DATA || type == F_HEADERS) && (flags & FL_END_STREAM)) break;
  }
  if (!have_msg) unreachable("no health status in the answer (a gRPC error, e.g. an unknown --service)");
  size_t want = (size_t)msg[1] << 24 | (size_t)msg[2] << 16 | (size_t)msg[3] << 8 | msg[4];
  uint64_t s = health_status(msg + 5, want);
  char svc[128] = "";
  if (*service) snprintf(svc, sizeof svc, " (%s)", service);
  finish(s == 1 ? EXIT_SERVING : EXIT_NOT_SERVING, "ipamd health%s: %s on %s", svc, status_name(s), sock_path);
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (timeout_ms % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) deadline.tv_sec++, deadline.tv_nsec -= 1000000000;

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) unreachable(strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, sock_path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    if (errno == EAGAIN) unreachable("UNAVAILABLE: its listen backlog is full (ipamd is not accepting: hung?)");
    if (errno != EINPROGRESS) {
      char why[160];
      snprintf(why, sizeof why, "UNAVAILABLE: connect: %s", strerror(errno));
      unreachable(why);
    }
    wait_fd(fd, POLLOUT);
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
      char why[160];
      snprintf(why, sizeof why, "UNAVAILABLE: connect: %s", strerror(err));
      unreachable(why);
    }
  }
  unsigned char req[512];
  send_all(fd, req, build_request(req));
  read_answer(fd);
}
