# The ringrep binaries: ringrep-source, ringrep-applier, ringrep-binlog, ringrep-demo.
#
#   docker build -t ringrep:latest .        # compiles them in rust:1.89-bookworm, runs on
#                                           # debian:bookworm-slim (both pulled from a registry)
#
# Without a registry, .ci/images builds the same file with
#   --build-arg BUILD_IMAGE=ringrep-base:bookworm --build-arg BASE_IMAGE=ringrep-base:bookworm
#   --build-arg BINARIES=prebuilt
# on a Debian base image it makes with debootstrap, the build context being a folder holding the
# four binaries it built with `cargo build --release --locked --bins`.
#
# One line of stages, each needed by the next: the classic builder (docker-compose 1.x, no
# buildx) builds every stage before the target, BuildKit only what the target needs; both build
# the same thing here.
ARG BUILD_IMAGE=rust:1.89-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
LABEL ringrep.stage=build
# build: compile the workspace (the build context is the repository);
# prebuilt: take the four binaries from the build context's top level.
ARG BINARIES=build
WORKDIR /src
COPY . .
RUN set -e; \
    bins="ringrep-source ringrep-applier ringrep-binlog ringrep-demo"; \
    mkdir /out; \
    case "$BINARIES" in \
      build) cargo build --release --locked --bins; \
             for b in $bins; do cp "target/release/$b" /out/; done ;; \
      prebuilt) for b in $bins; do cp "$b" /out/; done ;; \
      *) echo "BINARIES is build or prebuilt, not '$BINARIES'" >&2; exit 1 ;; \
    esac

FROM ${BASE_IMAGE}
# librdkafka is built in, linked against the system OpenSSL (TLS and SASL to Kafka). A base
# that already has both (.ci/images' own) needs no package lists.
RUN if ! dpkg -s libssl3 ca-certificates >/dev/null 2>&1; then \
      apt-get update \
      && apt-get install -y --no-install-recommends libssl3 ca-certificates \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /out/ /usr/local/bin/
VOLUME /data
EXPOSE 3306
CMD ["ringrep-source", "serve", "--data-dir", "/data"]
