//! Helpers shared by every test of the `it` binary.
//!
//! - [`db`]: a fresh, migrated repository per test on each backend ([`TestDb`],
//!   [`backends`]), with raw SQL access for assertions.

pub mod app;
pub mod db;

pub use db::{TestDb, backends};
