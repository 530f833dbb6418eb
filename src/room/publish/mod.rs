//! The command path's publish: its driver of the delivery core ([`crate::delivery`]). Right
//! after commit, a batch's IM events go out in room order, and what went through is marked.
//!
//! - [`sync_publish`]: the publish step, which puts a batch's events onto the room's lane (or
//!   leaves them to the outbox worker) and answers each command once its events are settled
//!   ([`waiting`]).
//! - [`lane`]: the room's lane, which sends its events in `room_version` order, packed, through
//!   the shared publish stack.
//! - [`handoff`]: who sends the room's events next — its lane or the outbox worker — and the
//!   steps that move a room between them.
//! - [`marker`]: the delivery marks of concurrent commands, batched into few statements.

pub(in crate::room) mod handoff;
pub(in crate::room) mod lane;
pub mod marker;
pub(in crate::room) mod sync_publish;
pub(in crate::room) mod waiting;
