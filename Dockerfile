# The ringrep binaries: ringrep-source, ringrep-applier, ringrep-binlog, ringrep-demo.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bins \
 && mkdir /out \
 && cp target/release/ringrep-source target/release/ringrep-applier \
       target/release/ringrep-binlog target/release/ringrep-demo /out/

FROM debian:bookworm-slim
# librdkafka is built in, linked against the system OpenSSL (TLS and SASL to Kafka).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/ /usr/local/bin/
VOLUME /data
EXPOSE 3306
CMD ["ringrep-source", "serve", "--data-dir", "/data"]
