//! The outbox worker against real databases (a SQLite file and MariaDB) and the fake Tencent
//! IM server, publishing through the real stack (Trace → Metrics → EventFilter → Timeout →
//! `TencentImService`). Every scenario runs on both backends.
//!
//! MariaDB is reached at `ROOM_SERVICE_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306`);
//! each test creates its own database and drops it when done.

pub(crate) mod harness;

mod cancel;
mod claim;
mod concurrency;
mod delivery;
mod lease;
mod order;
