/*
 * The DEL spool, shim side: when ipamd is not serving, a DEL is recorded as one small
 * file per (network, containerID, ifName) that ipamd applies when it serves again
 * (ipamd/cni-exec/spool.ts has the format and the applier). Written atomically: temp
 * file in the spool dir, write, fsync, rename over the final name, fsync of the dir.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shim.h"

/* Appends `s` with every byte outside [A-Za-z0-9.-] as %XX (so '_' separates fields unambiguously). */
static void pct(struct buf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-') put(b, s, 1);
    else { char x[3] = { '%', hex[c >> 4], hex[c & 15] }; put(b, x, 3); }
  }
}

static int mkdir_p(const char *dir, mode_t mode) {
  if (mkdir(dir, mode) == 0 || errno == EEXIST) return 0;
  if (errno != ENOENT) return -1;
  char parent[4096];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (!slash || slash == parent) return -1;
  *slash = '\0';
  if (mkdir_p(parent, 0750) != 0) return -1;
  return mkdir(dir, mode) == 0 || errno == EEXIST ? 0 : -1;
}

int spool_del(const char *spool_dir, const char *network, const char *container_id, const char *ifname,
              const char *netns, char *why, size_t why_sz) {
  struct buf name = {0}, body = {0}, final = {0}, tmp = {0};
  struct timespec now;
  char num[32];
  put_str(&name, "del_"); pct(&name, network); put_str(&name, "_"); pct(&name, container_id);
  put_str(&name, "_"); pct(&name, ifname); put_str(&name, ".json"); put(&name, "", 1);
  if (name.len > 200) { snprintf(why, why_sz, "spool file name of %zu bytes is too long", name.len); return -1; }
  if (mkdir_p(spool_dir, 0700) != 0) { snprintf(why, why_sz, "cannot create %s: %s", spool_dir, strerror(errno)); return -1; }
  clock_gettime(CLOCK_REALTIME, &now);
  put_str(&body, "{\"version\":1,\"networkName\":"); json_str(&body, network);
  put_str(&body, ",\"containerID\":"); json_str(&body, container_id);
  put_str(&body, ",\"ifName\":"); json_str(&body, ifname);
  put_str(&body, ",\"netns\":"); json_str(&body, netns);
  snprintf(num, sizeof num, "%lld", (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  put_str(&body, ",\"spooledAt\":"); put_str(&body, num);
  put_str(&body, "}\n");
  put_str(&final, spool_dir); put_str(&final, "/"); put_str(&final, name.p); put(&final, "", 1);
  snprintf(num, sizeof num, "%ld", (long)getpid());
  put_str(&tmp, spool_dir); put_str(&tmp, "/.tmp-"); put_str(&tmp, num); put_str(&tmp, "-"); put_str(&tmp, name.p); put(&tmp, "", 1);
  int fd = open(tmp.p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) { snprintf(why, why_sz, "cannot create %s: %s", tmp.p, strerror(errno)); return -1; }
  if (write_all(fd, body.p, body.len) != 0 || fsync(fd) != 0) {
    snprintf(why, why_sz, "cannot write %s: %s", tmp.p, strerror(errno));
    close(fd); unlink(tmp.p);
    return -1;
  }
  close(fd);
  if (rename(tmp.p, final.p) != 0) { snprintf(why, why_sz, "cannot rename to %s: %s", final.p, strerror(errno)); unlink(tmp.p); return -1; }
  int dfd = open(spool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) { snprintf(why, why_sz, "cannot fsync %s: %s", spool_dir, strerror(errno)); if (dfd >= 0) close(dfd); return -1; }
  close(dfd);
  return 0;
}
