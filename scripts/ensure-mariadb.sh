#!/usr/bin/env bash
# Makes sure a MariaDB the tests can use answers on 127.0.0.1:3306 (root, empty password):
# starts it when installed but stopped, installs it (Debian, as root) when absent.
set -euo pipefail

ping() { mariadb-admin --protocol=tcp -h127.0.0.1 -P3306 -uroot ping >/dev/null 2>&1; }

if ping; then exit 0; fi

if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "MariaDB is not installed and this is not root: install mariadb-server, or point" >&2
        echo "ROOM_SERVICE_TEST_MYSQL_URL at a MariaDB >= 10.6 / MySQL 8 server." >&2
        exit 1
    fi
    echo "Installing mariadb-server..." >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
fi

echo "Starting MariaDB..." >&2
mkdir -p /run/mysqld
chown mysql:mysql /run/mysqld 2>/dev/null || true
start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
for _ in $(seq 1 60); do
    if ping; then break; fi
    sleep 0.5
done
if ! ping; then
    # A fresh install lets root in only through the socket: open TCP access for the tests.
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; FLUSH PRIVILEGES;" 2>/dev/null || true
fi
ping || { echo "MariaDB did not come up on 127.0.0.1:3306" >&2; exit 1; }
