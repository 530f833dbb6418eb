#!/bin/sh
# HAProxy's external check of a MariaDB Galera node (docs/DEPLOY-HA.md). HAProxy runs it with
# <proxy address> <proxy port> <server address> <server port>; exit 0 means "send connections".
#
# A node takes connections only while it is in the primary component, Synced
# (wsrep_local_state 4) and ready: one that lost quorum still accepts TCP and the handshake and
# then refuses every query (1047), a joiner is behind, a donor may block its writes. It connects
# as `haproxy_check` (no password, no privilege: status variables are readable by anyone) and
# does not wait for causality (wsrep_sync_wait 0): while the group re-forms after a node's loss a
# causal read waits, and every node would look down at once.
state=$(timeout 2 mariadb --connect-timeout=1 -h "$3" -P "$4" -u haproxy_check -N -B -e "SET SESSION wsrep_sync_wait = 0; \
    SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME) FROM information_schema.GLOBAL_STATUS \
    WHERE VARIABLE_NAME IN ('WSREP_CLUSTER_STATUS', 'WSREP_LOCAL_STATE', 'WSREP_READY')" 2>/dev/null)
[ "$state" = "Primary,4,ON" ]
