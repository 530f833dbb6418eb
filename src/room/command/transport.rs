//! [`Transport`]: where a command came from, the `transport` label of the command metrics,
//! and those metrics exported at 0 before the first command.

/// Where a command came from: the `transport` label of `room_commands_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The HTTP API (`/v1/rooms...`).
    Http,
    /// The gRPC API (`room.v1.RoomService`).
    Grpc,
    /// Issued by the service itself (the presence worker's evictions) or called in-process.
    Internal,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Transport; 3] = [Transport::Http, Transport::Grpc, Transport::Internal];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Grpc => "grpc",
            Transport::Internal => "internal",
        }
    }
}

/// Exports `room_commands_total` at 0 for every command, result and one of `transports`, and
/// an empty `room_command_latency_seconds` for every command, before the first command: the
/// dashboard's command panels read 0 rather than "No data".
pub fn register_zero_series(transports: &[Transport]) {
    use crate::domain::Command;
    use crate::telemetry::names::{
        COMMAND_LATENCY_SECONDS, COMMANDS_TOTAL, LABEL_COMMAND, LABEL_RESULT, LABEL_TRANSPORT,
    };
    for command in Command::NAMES {
        for result in super::outcome::RESULT_LABELS {
            for transport in transports {
                metrics::counter!(COMMANDS_TOTAL, LABEL_COMMAND => command, LABEL_RESULT => result, LABEL_TRANSPORT => transport.as_str())
                    .increment(0);
            }
        }
        let _ = metrics::histogram!(COMMAND_LATENCY_SECONDS, LABEL_COMMAND => command);
    }
}
