# The eni-ipam image for users who build with Docker or buildah against a registry.
# `npm run image` builds the same layout without Docker (an OCI archive from Debian packages
# and npm); both take the Debian package list from image/debian-packages.txt and the app +
# Node runtime from the same staging step (scripts/image/stage.mjs), and
# test/integration/image.test.ts checks that this file and the archive agree.
#
#   npm ci && npm run build && node scripts/image/stage.mjs   # writes build/image/stage/
#   docker build -t <registry>/eni-ipam:0.2.0 .               # or: buildah bud -t ... .
FROM debian:bookworm-slim
COPY image/debian-packages.txt /tmp/debian-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(sed -e 's/#.*//' /tmp/debian-packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/debian-packages.txt
# /usr/local/bin/node (pinned in image/node-runtime.json) and /app (dist, production node_modules,
# proto, config, bin/ipamd).
COPY build/image/stage/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /app
USER 0:0
ENTRYPOINT ["/app/bin/ipamd"]
