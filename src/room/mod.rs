//! Room Cells and the command pipeline.
//!
//! [`RoomService`] owns one cell per room: the room's state in memory behind a lock, so the
//! commands of one room run one at a time while different rooms run concurrently. A cell loads
//! lazily from the snapshot. Each command is applied by the pure domain, committed in one
//! transaction (command log + outbox rows + snapshot), swapped into memory only after commit,
//! then published through the shared publish stack and marked delivered best-effort by the
//! [`marker::DeliveryMarker`], which batches the marks of concurrent commands.

mod cells;
mod commit;
mod error;
pub mod marker;
mod outcome;
mod pipeline;
pub mod presence;
mod replay;
mod sync_publish;

pub use error::RoomError;
pub use outcome::{CommandResponse, Delivery, EventReceipt};
pub use pipeline::{RoomOptions, RoomService, StillHolds};

use std::sync::Arc;

/// Wall clock in milliseconds since the epoch; injectable so presence tests control time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}
