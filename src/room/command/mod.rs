//! The command pipeline: what a command is and the steps it goes through, each a type of its
//! own with its own data, run by the room's drain task.
//!
//! - [`request`]: a command as [`RoomService::submit`](crate::room::RoomService::submit) takes it.
//! - [`pay`]: with a wallet configured, a gift is paid for before it is queued, and its debit
//!   refunded when nothing was committed.
//! - [`drain`]: the room's drain task, which takes queued commands in batches through the steps
//!   ([`steps`] holds them): [`decide`] (pure: the domain applies them in order), [`commit`]
//!   (one transaction for the batch — group commit — swapped into memory only after commit),
//!   then the publish step (`room::publish`).
//! - [`replay`]: a repeated command id answered from the command log.
//! - [`outcome`]: the response to a command and its logged form; [`transport`]: where it came
//!   from.

pub(in crate::room) mod commit;
pub(in crate::room) mod decide;
pub(in crate::room) mod drain;
pub(in crate::room) mod outcome;
pub(in crate::room) mod pay;
pub(in crate::room) mod replay;
pub(in crate::room) mod request;
pub(in crate::room) mod steps;
pub(in crate::room) mod transport;
