//! The rooms' cells: one per room, holding the room's state in memory behind its own lock and
//! the queue of its commands, so the commands of one room run in order while different rooms
//! run concurrently.
//!
//! - [`cell`]: a room's cell — its state, its queue, its lane, its presence, the identities of
//!   its last commits ([`recent`]).
//! - [`cell_map`]: every cell of this process, sharded, walked by the janitor one shard at a
//!   time; a read holds its cell as a `ReadCell`, which leaves nothing behind for a room that
//!   does not exist.
//! - [`misses`]: the rooms found missing lately, so reads of unknown rooms cost no cell and
//!   few database reads.

pub(in crate::room) mod cell;
pub(in crate::room) mod cell_map;
pub(in crate::room) mod misses;
pub(in crate::room) mod recent;
