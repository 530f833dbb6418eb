//! Many nodes on one database (SPEC §11.4): rooms map to 1024 shards; a node owns shards
//! through leases in the database ([`keeper`]), runs only their rooms ([`Ownership`]), and
//! forwards the others' requests to their owners, found through the Redis directory
//! ([`directory`]) or, when Redis is away, the lease table.

pub mod directory;
pub mod keeper;
mod ownership;
pub mod shard;

pub use directory::{Directory, Located, Owner};
pub use keeper::{Cluster, LeaseKeeper};
pub use ownership::{NotOwner, Ownership, ShardTable};
pub use shard::{SHARDS, Shard, preferred_node, shard_of};
