//! Telemetry: the names of every metric the service exports (one place, so dashboards, alert
//! rules and the code agree), their descriptions and histogram buckets.

pub mod names;
