//! The lease keeper's rounds, driven by hand on one database: the spread over live nodes, the
//! handoff to a joining node, and the takeover after a node leaves.

use std::time::Duration;

use room_service::cluster::{Directory, LeaseKeeper, SHARDS};
use room_service::config::ClusterSettings;

use crate::support::TestDb;

fn keeper(db: &TestDb, directory: &Directory, node: &str) -> LeaseKeeper {
    let settings = ClusterSettings {
        enabled: true,
        advertise_url: format!("http://{node}:8080"),
        expected_nodes: 2,
        lease_ttl: Duration::from_secs(30),
        hop_secrets: Default::default(),
    };
    LeaseKeeper::new(db.repo.clone(), directory.clone(), node.into(), settings)
}

fn held(keeper: &LeaseKeeper) -> usize {
    keeper.ownership().held_shards().map_or(0, |s| s.len())
}

#[tokio::test]
async fn shards_spread_over_the_live_nodes_and_move_on_a_join_and_a_leave() {
    let db = TestDb::sqlite().await;
    let directory = Directory::new(db.repo.clone(), None).await.expect("directory");
    let a = keeper(&db, &directory, "node-a");
    a.join().await.expect("a joins");
    assert_eq!(held(&a), usize::from(SHARDS), "alone, a node owns every shard");

    let b = keeper(&db, &directory, "node-b");
    b.join().await.expect("b joins");
    assert_eq!(held(&b), 0, "every shard is still a's: b waits for the handoff");
    let handed = a.rebalance().await.expect("a rebalances");
    assert!(
        (400..=620).contains(&handed.released.len()),
        "a hands over about half: {}",
        handed.released.len()
    );
    let taken = b.rebalance().await.expect("b rebalances");
    assert_eq!(taken.acquired, handed.released, "b takes exactly what a handed over");
    assert_eq!(held(&a) + held(&b), usize::from(SHARDS));
    let epochs: Vec<u64> = db.repo.shard_leases().await.unwrap().iter().map(|l| l.epoch).collect();
    assert!(epochs.iter().all(|e| *e == 1 || *e == 2), "one acquisition per move: {:?}", &epochs[..8]);

    a.leave().await.expect("a leaves");
    assert_eq!(held(&a), 0);
    let round = b.rebalance().await.expect("b rebalances");
    assert_eq!(
        held(&b),
        usize::from(SHARDS),
        "b takes a's shards at once: {} acquired",
        round.acquired.len()
    );
    assert!(a.ownership().fence("any-room").is_err(), "a left: it serves nothing");
    assert!(b.ownership().fence("any-room").is_ok());
}
