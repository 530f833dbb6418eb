//! Shard leases and the epoch fence (SPEC §11.4), on both backends: an acquisition takes only
//! a free lease and bumps its epoch, renewal never revives an expired lease, and a commit under
//! an epoch that moved on writes nothing.

use std::time::Duration;

use room_service::cluster::shard_of;
use room_service::store::CommitError;

use super::commit;
use crate::support::backends;

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(300);

#[tokio::test]
async fn a_live_lease_is_held_by_one_node_and_each_acquisition_bumps_the_epoch() {
    for db in backends().await {
        let repo = &db.repo;
        let won = repo.acquire_shards("a", "http://a", &[1, 2, 3], LONG).await.unwrap();
        assert_eq!(
            won.iter().map(|l| (l.shard, l.epoch)).collect::<Vec<_>>(),
            [(1, 1), (2, 1), (3, 1)],
            "{db}"
        );
        assert!(won.iter().all(|l| l.is_live() && l.owner_url == "http://a"), "{db}");
        let none = repo.acquire_shards("b", "http://b", &[2, 3, 4], LONG).await.unwrap();
        assert_eq!(none.iter().map(|l| l.shard).collect::<Vec<_>>(), [4], "{db}: only the free shard");
        assert_eq!(repo.release_shards("a", &[2]).await.unwrap(), 1, "{db}");
        assert_eq!(repo.release_shards("b", &[3]).await.unwrap(), 0, "{db}: not b's to release");
        let moved = repo.acquire_shards("b", "http://b", &[2], LONG).await.unwrap();
        assert_eq!((moved[0].owner_node.as_str(), moved[0].epoch), ("b", 2), "{db}");
        let held = repo.renew_shards("a", LONG).await.unwrap();
        assert_eq!(held.iter().map(|l| l.shard).collect::<Vec<_>>(), [1, 3], "{db}");
        assert_eq!(repo.shard_leases().await.unwrap().len(), 1024, "{db}");
    }
}

#[tokio::test]
async fn an_expired_lease_is_not_renewed_and_goes_to_the_next_node_under_a_new_epoch() {
    for db in backends().await {
        let repo = &db.repo;
        repo.acquire_shards("a", "http://a", &[7], SHORT).await.unwrap();
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        assert!(repo.renew_shards("a", LONG).await.unwrap().is_empty(), "{db}: an expired lease is lost");
        let taken = repo.acquire_shards("b", "http://b", &[7], LONG).await.unwrap();
        assert_eq!((taken[0].owner_node.as_str(), taken[0].epoch), ("b", 2), "{db}");
        let lease = repo.shard_lease(7).await.unwrap().unwrap();
        assert_eq!(lease.owner_node, "b", "{db}");
    }
}

#[tokio::test]
async fn a_commit_under_an_old_epoch_writes_nothing() {
    for db in backends().await {
        let repo = &db.repo;
        let room = "fenced-room";
        let shard = shard_of(room);
        let epoch = repo.acquire_shards("a", "http://a", &[shard], SHORT).await.unwrap()[0].epoch;
        let mut first = commit(room, "c-1", 0, 1);
        first.fence = Some(epoch);
        repo.commit_room(&first).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        // The owner pauses past its lease; another node takes the shard.
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        let newer = repo.acquire_shards("b", "http://b", &[shard], LONG).await.unwrap()[0].epoch;
        assert_eq!(newer, epoch + 1, "{db}");
        let mut late = commit(room, "c-2", 1, 2);
        late.fence = Some(epoch);
        assert!(
            matches!(repo.commit_room(&late).await, Err(CommitError::Fenced)),
            "{db}: the old owner is fenced"
        );
        assert_eq!(db.count("room_command_log").await, 1, "{db}: nothing of the late commit");
        assert_eq!(db.count("room_outbox").await, 1, "{db}");
        let mut next = commit(room, "c-3", 1, 1);
        next.fence = Some(newer);
        repo.commit_room(&next).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        let stored = db.scalar(format!("SELECT epoch FROM room_snapshot WHERE room_id = '{room}'")).await;
        assert_eq!(stored, Some(newer as i64), "{db}: the snapshot carries the epoch it was written under");
        let shard_column =
            db.scalar(format!("SELECT MIN(shard) FROM room_outbox WHERE room_id = '{room}'")).await;
        assert_eq!(shard_column, Some(i64::from(shard)), "{db}: outbox rows carry their shard");
    }
}

#[tokio::test]
async fn membership_expires_and_leaving_frees_every_lease() {
    for db in backends().await {
        let repo = &db.repo;
        repo.join_cluster("a", "http://a", LONG).await.unwrap();
        repo.join_cluster("b", "http://b", SHORT).await.unwrap();
        repo.acquire_shards("a", "http://a", &[10, 11], LONG).await.unwrap();
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        let live: Vec<String> = repo.live_nodes().await.unwrap().into_iter().map(|n| n.node_id).collect();
        assert_eq!(live, ["a"], "{db}");
        repo.leave_cluster("a").await.unwrap();
        assert!(repo.live_nodes().await.unwrap().is_empty(), "{db}");
        let freed = repo.acquire_shards("b", "http://b", &[10, 11], LONG).await.unwrap();
        assert_eq!(
            freed.iter().map(|l| l.epoch).collect::<Vec<_>>(),
            [2, 2],
            "{db}: free at once, epochs bumped"
        );
        assert!(!repo.cluster_id().await.unwrap().is_empty(), "{db}");
    }
}
