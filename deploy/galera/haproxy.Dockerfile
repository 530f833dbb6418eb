# HAProxy with the MariaDB client its Galera check runs (docker-compose.galera.yml).
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy mariadb-client \
    && rm -rf /var/lib/apt/lists/*
COPY haproxy.cfg /etc/haproxy/haproxy.cfg
COPY galera-check.sh /usr/local/bin/galera-check.sh
EXPOSE 3306
CMD ["haproxy", "-f", "/etc/haproxy/haproxy.cfg", "-db"]
