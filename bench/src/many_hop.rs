//! B8's forward hop: what one hop to the owner adds to a request. One client, nothing else
//! running: `GET /v1/rooms/{id}` (answered from the owner's memory, so the hop is most of
//! the difference) sent to the room's owner and to a node that is not its owner, in turn,
//! over the rooms and both non-owners; which of the two goes first alternates, so a drift of
//! the machine's load falls on both alike.

use std::collections::HashMap;
use std::time::Instant;

use crate::support::Samples;

/// Untimed pairs first: room cells loaded, connection pools (the client's and each node's
/// forwarding client) and the Redis connections warm.
const WARM_UP: usize = 50;

/// Latencies at the owner and through one hop, `samples` of each; `owner` names each room's
/// owner (an index of `bases`).
pub(crate) async fn hop_latency(
    bases: &[String],
    owner: &HashMap<String, usize>,
    samples: usize,
) -> anyhow::Result<(Samples, Samples)> {
    anyhow::ensure!(bases.len() >= 2, "a hop needs two nodes, have {}", bases.len());
    let mut rooms: Vec<(&String, usize)> = owner.iter().map(|(room, &o)| (room, o)).collect();
    rooms.sort_unstable();
    anyhow::ensure!(!rooms.is_empty(), "no rooms to read");
    let http = reqwest::Client::new();
    let get = |node: usize, room: &str| {
        let request = http.get(format!("{}/v1/rooms/{room}", bases[node]));
        async move {
            let t = Instant::now();
            let response = request.send().await?;
            let status = response.status();
            let body = response.bytes().await?;
            anyhow::ensure!(status.is_success(), "HTTP {status}: {}", String::from_utf8_lossy(&body));
            anyhow::Ok(t.elapsed())
        }
    };
    let (mut direct, mut hopped) = (Samples::default(), Samples::default());
    for k in 0..WARM_UP + samples {
        let (room, at) = rooms[k % rooms.len()];
        // Both non-owners in turn.
        let via = (at + 1 + (k / rooms.len()) % (bases.len() - 1)) % bases.len();
        let (first, second) = if k % 2 == 0 { (at, via) } else { (via, at) };
        let (a, b) = (get(first, room).await?, get(second, room).await?);
        if k >= WARM_UP {
            let (d, h) = if first == at { (a, b) } else { (b, a) };
            direct.push(d);
            hopped.push(h);
        }
    }
    Ok((direct, hopped))
}
