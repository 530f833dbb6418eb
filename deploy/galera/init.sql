-- Run once, by the bootstrap node's first start (replicated to the others).
CREATE USER IF NOT EXISTS 'haproxy_check'@'%';
