/**
 * The workload image of the cluster tests: a static C TCP server on :8080, IPv6 and IPv4
 * (one socket, v4-mapped; IPv4 alone where the pod has no IPv6) (one forked
 * child per connection) that answers each line with `<the pod's hostname> <the line>`,
 * so a client learns which pod answered (a Service's backend). Built like the pause image:
 * no registry, no Dockerfile.
 */
import { buildStaticCImage, type PauseImage } from '../pause-image.js';

/** The image reference the workload pods use. */
export const ECHO_IMAGE_REF = 'registry.local/eni-ipam/echo:test';
/** Its port. */
export const ECHO_PORT = 8080;

const ECHO_C = `#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static void on_term(int s) { (void)s; _exit(0); }
int main(void) {
  char host[256] = "?", buf[4096], out[4400];
  gethostname(host, sizeof host - 1);
  signal(SIGCHLD, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  /* Both families on one socket (IPv4 as v4-mapped); IPv4 only where IPv6 is off. */
  int one = 1, zero = 0, s = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(${ECHO_PORT}), .sin6_addr = IN6ADDR_ANY_INIT };
  struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(${ECHO_PORT}) };
  if (s >= 0) {
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(s, (struct sockaddr *)&a6, sizeof a6)) { close(s); s = -1; }
  }
  if (s < 0) {
    s = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a4, sizeof a4)) { perror("bind"); return 1; }
  }
  if (listen(s, 64)) { perror("listen"); return 1; }
  for (;;) {
    int c = accept(s, 0, 0);
    if (c < 0) continue;
    if (fork() == 0) {
      close(s);
      ssize_t n;
      while ((n = read(c, buf, sizeof buf - 1)) > 0) {
        buf[n] = 0;
        int m = snprintf(out, sizeof out, "%s %s", host, buf);
        if (write(c, out, (size_t)m) < 0) break;
      }
      _exit(0);
    }
    close(c);
  }
}
`;

/** Builds (or reuses from cache) the echo image. @throws Error when gcc or tar fail. */
export function buildEchoImage(): Promise<PauseImage> {
  return buildStaticCImage({ name: 'echo', source: ECHO_C, ref: ECHO_IMAGE_REF });
}
