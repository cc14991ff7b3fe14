/*
 * eni-ipam-spawn: ipamd's long-lived helper that starts its short-lived children (`ip`,
 * `nsenter`) for it, so ipamd itself never forks. A fork copies the forking process's page
 * tables and leaves copy-on-write faults behind on every page it writes next: 1–3.5 ms per
 * child from a ~90 MiB ipamd, tens of ms from a large process (docs/design.md §16). This
 * helper is a few hundred KiB, so its forks are cheap, and it relays each child's stdin,
 * stdout, stderr and exit status over its own stdin/stdout (ipamd/cni-exec/spawn-helper.ts).
 *
 * Usage: eni-ipam-spawn (no arguments). Frames both ways: a 9-byte header, then `len`
 * bytes of payload; integers in host byte order.
 *
 *   u32 len | u8 type | u32 id | payload
 *
 * Requests (stdin):
 *   'S' spawn:  u32 argc, u32 envc, then argc + envc NUL-terminated strings (argv, then
 *               the environment as NAME=value). argv[0] is looked up in the PATH of that
 *               environment when it has no '/' (execvpe). The child's stdin, stdout and
 *               stderr are pipes; its signal mask and SIGPIPE are reset to defaults.
 *   'W' write:  bytes appended to the child's stdin (dropped once its stdin is closed).
 *   'E' end:    the child's stdin is closed once what was written has gone.
 *   'K' kill:   SIGKILL to the child.
 * Answers (stdout), for one id in this order:
 *   'P' started:  u32 µs the fork and exec took; or 'F' failed: i32 errno, then a message.
 *   'O' / 'R':    a chunk of the child's stdout / stderr.
 *   'X' exited:   i32 exit code, or -signal; sent once the child has exited and both of its
 *                 output pipes reached end of file. The id may then be reused.
 * An 'S' with an id in use, or more than MAX_CHILDREN at once, is answered 'F' (EBUSY,
 * EAGAIN). A malformed frame (length over MAX_FRAME) ends the helper with exit status 2;
 * end of file on stdin ends it (exit 0) after closing every child's stdin. Build:
 * scripts/bundle-plugin.mjs (gcc -O2 -static). Linux only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 256
#define MAX_FRAME (16u << 20)
#define HDR 9

struct child {
  int used, id;
  pid_t pid;
  int in, out, err; /* parent ends; -1 once closed */
  int exited, status;
  int end_asked;      /* close stdin once `pending` is written */
  char *pending;      /* stdin bytes not yet taken by the pipe */
  size_t plen;
};

static struct child kids[MAX_CHILDREN];
static int sigfd = -1;

/* Writes all of `n` bytes to fd 1, retrying short writes; the reader gone ends the helper. */
static void put(const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(1, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(errno == EPIPE ? 0 : 3);
    c += w;
    n -= (size_t)w;
  }
}

static void answer(char type, int id, const void *payload, uint32_t len) {
  char h[HDR];
  uint32_t uid = (uint32_t)id;
  memcpy(h, &len, 4);
  h[4] = type;
  memcpy(h + 5, &uid, 4);
  put(h, HDR);
  if (len) put(payload, len);
}

static void answer_failed(int id, int err, const char *what) {
  char buf[512];
  int32_t e = err;
  memcpy(buf, &e, 4);
  int n = snprintf(buf + 4, sizeof buf - 4, "%s: %s", what, strerror(err));
  if (n < 0) n = 0;
  if ((size_t)n > sizeof buf - 5) n = (int)(sizeof buf - 5);
  answer('F', id, buf, (uint32_t)(4 + n));
}

static struct child *find(int id) {
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (kids[i].used && kids[i].id == id) return &kids[i];
  return NULL;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void close_stdin(struct child *k) {
  close_fd(&k->in);
  free(k->pending);
  k->pending = NULL;
  k->plen = 0;
}

/* The child's side after fork: pipes on 0/1/2, default signals, PATH from its environment, exec. */
static void in_child(char **argv, char **envp, int pin[2], int pout[2], int perr[2], int status) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  if (dup2(pin[0], 0) < 0 || dup2(pout[1], 1) < 0 || dup2(perr[1], 2) < 0) goto fail;
  for (char **e = envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5)) setenv("PATH", *e + 5, 1);
  execvpe(argv[0], argv, envp);
fail:;
  int32_t e = errno;
  ssize_t ignored = write(status, &e, 4);
  (void)ignored;
  _exit(127);
}

/* 'S': parses argv and the environment from `p`, forks, execs; answers 'P' or 'F'. */
static void spawn_child(int id, const char *p, uint32_t len) {
  if (find(id)) return answer_failed(id, EBUSY, "spawn: id in use");
  struct child *k = NULL;
  for (int i = 0; i < MAX_CHILDREN && !k; i++)
    if (!kids[i].used) k = &kids[i];
  if (!k) return answer_failed(id, EAGAIN, "spawn: too many children");
  uint32_t argc, envc;
  if (len < 8) return answer_failed(id, EINVAL, "spawn: malformed request");
  memcpy(&argc, p, 4);
  memcpy(&envc, p + 4, 4);
  if (argc < 1 || argc > 4096 || envc > 4096) return answer_failed(id, EINVAL, "spawn: malformed request");
  char **v = calloc(argc + envc + 2, sizeof *v);
  if (!v) return answer_failed(id, ENOMEM, "spawn");
  const char *s = p + 8, *end = p + len;
  for (uint32_t i = 0; i < argc + envc; i++) {
    const char *z = memchr(s, 0, (size_t)(end - s));
    if (!z) {
      free(v);
      return answer_failed(id, EINVAL, "spawn: malformed request");
    }
    v[i < argc ? i : i + 1] = (char *)s;
    s = z + 1;
  }
  char **argv = v, **envp = v + argc + 1; /* v[argc] and v[argc + envc + 1] stay NULL */
  int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, st[2] = {-1, -1};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC) || pipe2(st, O_CLOEXEC)) {
    int e = errno;
    int *all[] = {pin, pout, perr, st};
    for (int i = 0; i < 4; i++) close_fd(&all[i][0]), close_fd(&all[i][1]);
    free(v);
    return answer_failed(id, e, "spawn: pipe");
  }
  pid_t pid = fork();
  if (pid == 0) in_child(argv, envp, pin, pout, perr, st[1]);
  int fork_errno = errno;
  close(pin[0]), close(pout[1]), close(perr[1]), close(st[1]);
  int32_t exec_errno = 0;
  if (pid > 0) {
    ssize_t r;
    do r = read(st[0], &exec_errno, 4); while (r < 0 && errno == EINTR);
    if (r != 4) exec_errno = 0; /* end of file: the exec succeeded */
  }
  close(st[0]);
  if (pid < 0 || exec_errno) {
    close(pin[1]), close(pout[0]), close(perr[0]);
    char what[300];
    snprintf(what, sizeof what, "spawn %.256s", argv[0]);
    free(v);
    /* a failed exec's child has exited; the SIGCHLD loop reaps it (no slot: not answered) */
    return answer_failed(id, pid < 0 ? fork_errno : exec_errno, what);
  }
  free(v);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *k = (struct child){.used = 1, .id = id, .pid = pid, .in = pin[1], .out = pout[0], .err = perr[0]};
  fcntl(k->in, F_SETFL, O_NONBLOCK);
  uint32_t us = (uint32_t)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
  answer('P', id, &us, 4);
}

/* Writes what the child's stdin pipe takes now; closes it once drained and asked to. */
static void flush_stdin(struct child *k) {
  while (k->in >= 0 && k->plen) {
    ssize_t w = write(k->in, k->pending, k->plen);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    if (w < 0) return close_stdin(k); /* EPIPE: the child stopped reading; drop the rest */
    memmove(k->pending, k->pending + w, k->plen - (size_t)w);
    k->plen -= (size_t)w;
  }
  if (k->end_asked && k->in >= 0 && !k->plen) close_stdin(k);
}

static void request(char type, int id, const char *p, uint32_t len) {
  if (type == 'S') return spawn_child(id, p, len);
  struct child *k = find(id);
  if (!k) return; /* a child that already exited: nothing to do */
  if (type == 'K') {
    if (!k->exited) kill(k->pid, SIGKILL);
  } else if (type == 'E') {
    k->end_asked = 1;
    flush_stdin(k);
  } else if (type == 'W' && k->in >= 0 && len) {
    char *n = realloc(k->pending, k->plen + len);
    if (!n) return close_stdin(k);
    memcpy(n + k->plen, p, len);
    k->pending = n;
    k->plen += len;
    flush_stdin(k);
  }
}

/* Reads one chunk of a child's stdout or stderr and relays it; end of file closes it. */
static void relay(struct child *k, int *fd, char type) {
  char buf[65536];
  ssize_t r = read(*fd, buf, sizeof buf);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (r <= 0) return close_fd(fd);
  answer(type, k->id, buf, (uint32_t)r);
}

static void reap(void) {
  struct signalfd_siginfo si;
  while (read(sigfd, &si, sizeof si) > 0) {
  }
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
    for (int i = 0; i < MAX_CHILDREN; i++)
      if (kids[i].used && kids[i].pid == pid && !kids[i].exited) {
        kids[i].exited = 1;
        kids[i].status = status;
      }
}

/* Answers 'X' for every child that exited with both output pipes at end of file. */
static void finish(void) {
  for (int i = 0; i < MAX_CHILDREN; i++) {
    struct child *k = &kids[i];
    if (!k->used || !k->exited || k->out >= 0 || k->err >= 0) continue;
    int32_t code = WIFEXITED(k->status) ? WEXITSTATUS(k->status) : -WTERMSIG(k->status);
    close_stdin(k);
    answer('X', k->id, &code, 4);
    k->used = 0;
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd < 0) return perror("eni-ipam-spawn: signalfd"), 1;
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  char *in = NULL;
  size_t have = 0, cap = 0;
  int eof = 0;
  struct pollfd fds[2 + 3 * MAX_CHILDREN];
  struct child *owner[2 + 3 * MAX_CHILDREN];
  while (!eof) {
    int n = 0;
    fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
    for (int i = 0; i < MAX_CHILDREN; i++) {
      struct child *k = &kids[i];
      if (!k->used) continue;
      if (k->out >= 0) owner[n] = k, fds[n++] = (struct pollfd){.fd = k->out, .events = POLLIN};
      if (k->err >= 0) owner[n] = k, fds[n++] = (struct pollfd){.fd = k->err, .events = POLLIN};
      if (k->in >= 0 && k->plen) owner[n] = k, fds[n++] = (struct pollfd){.fd = k->in, .events = POLLOUT};
    }
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      return perror("eni-ipam-spawn: poll"), 1;
    }
    for (int i = 2; i < n; i++) {
      if (!fds[i].revents) continue;
      struct child *k = owner[i];
      if (fds[i].fd == k->out) relay(k, &k->out, 'O');
      else if (fds[i].fd == k->err) relay(k, &k->err, 'R');
      else if (fds[i].fd == k->in) {
        if (fds[i].revents & (POLLERR | POLLHUP)) close_stdin(k);
        else flush_stdin(k);
      }
    }
    if (fds[1].revents) reap();
    if (fds[0].revents) {
      if (cap - have < 65536) {
        cap = cap * 2 + 65536;
        char *g = realloc(in, cap);
        if (!g) return perror("eni-ipam-spawn"), 1;
        in = g;
      }
      ssize_t r = read(0, in + have, cap - have);
      if (r < 0 && errno != EINTR && errno != EAGAIN) return perror("eni-ipam-spawn: read"), 1;
      if (r == 0) eof = 1;
      if (r > 0) have += (size_t)r;
      size_t off = 0;
      while (have - off >= HDR) {
        uint32_t len, id;
        memcpy(&len, in + off, 4);
        memcpy(&id, in + off + 5, 4);
        if (len > MAX_FRAME) return fprintf(stderr, "eni-ipam-spawn: frame of %u bytes\n", len), 2;
        if (have - off < HDR + len) break;
        request(in[off + 4], (int)id, in + off + HDR, len);
        off += HDR + len;
      }
      memmove(in, in + off, have - off);
      have -= off;
    }
    finish();
  }
  for (int i = 0; i < MAX_CHILDREN; i++)
    if (kids[i].used) close_stdin(&kids[i]);
  return 0;
}
