//! The fixed shard space: a room belongs to shard `hash(room_id) % 1024` forever, on every node
//! and every version (the hash is SHA-256, not Rust's per-process `Hash`).

use sha2::{Digest, Sha256};

/// Number of shards; never changed (it would move every room).
pub const SHARDS: u16 = 1024;

/// A shard number in `0..SHARDS`.
pub type Shard = u16;

/// The shard of `room_id`: the first 8 bytes of its SHA-256, big-endian, modulo [`SHARDS`].
pub fn shard_of(room_id: &str) -> Shard {
    let digest = Sha256::digest(room_id.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % u64::from(SHARDS)) as Shard
}

/// Rendezvous (highest random weight) choice of the node that should own `shard` among
/// `nodes`: every node computes the same answer from the same list, and a node joining or
/// leaving moves only the shards it wins or held (about 1/N of them).
pub fn preferred_node<'a>(shard: Shard, nodes: &[&'a str]) -> Option<&'a str> {
    nodes.iter().copied().max_by_key(|node| (weight(shard, node), *node))
}

fn weight(shard: Shard, node: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(shard.to_be_bytes());
    hasher.update(node.as_bytes());
    let digest = hasher.finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_of_a_room_never_changes() {
        // Pinned values: a different hash would move every room between releases.
        assert_eq!(shard_of("r1"), shard_of("r1"));
        let pinned: Vec<Shard> = ["r1", "room-42", "直播间"].iter().map(|r| shard_of(r)).collect();
        assert_eq!(
            pinned,
            vec![shard_of_expected("r1"), shard_of_expected("room-42"), shard_of_expected("直播间")]
        );
        assert!((0..10_000).all(|i| shard_of(&format!("room-{i}")) < SHARDS));
    }

    /// The same computation spelled out, so a change of algorithm shows in review.
    fn shard_of_expected(room: &str) -> Shard {
        let digest = Sha256::digest(room.as_bytes());
        let n = digest[..8].iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        (n % 1024) as Shard
    }

    #[test]
    fn rooms_spread_evenly_over_shards() {
        let mut counts = vec![0u32; usize::from(SHARDS)];
        for i in 0..102_400 {
            counts[usize::from(shard_of(&format!("room-{i}")))] += 1;
        }
        let (min, max) = (counts.iter().min().copied(), counts.iter().max().copied());
        assert!(min > Some(50) && max < Some(160), "min {min:?} max {max:?} of 100 expected");
    }

    #[test]
    fn rendezvous_spreads_shards_evenly_and_moves_few_on_a_join() {
        let three = ["node-a", "node-b", "node-c"];
        let four = ["node-a", "node-b", "node-c", "node-d"];
        let owner = |nodes: &[&'static str], s| preferred_node(s, nodes).map(str::to_owned);
        let mut per_node = std::collections::HashMap::new();
        let mut moved = 0;
        for shard in 0..SHARDS {
            let before = owner(&three, shard);
            *per_node.entry(before.clone()).or_insert(0) += 1;
            let after = owner(&four, shard);
            if after != before {
                assert_eq!(after.as_deref(), Some("node-d"), "a join only moves shards to the new node");
                moved += 1;
            }
        }
        assert!(per_node.values().all(|n| (300..=390).contains(n)), "{per_node:?}");
        assert!((200..=320).contains(&moved), "{moved} of 1024 moved to the 4th node");
        assert_eq!(preferred_node(7, &[]), None);
    }
}
