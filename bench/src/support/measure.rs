//! Latency samples, the database server's status counters and its CPU time.

use super::*;

/// Latency samples and their percentiles.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    /// Merges another set.
    pub fn extend(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The `p`-th percentile (0–100), nearest rank; zero when empty.
    pub fn pct(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}

/// Milliseconds with two decimals, for the table.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Session status counters (`SHOW SESSION STATUS`) of the one connection of `pool` (a pool
/// of exactly one connection, so the session is the one the measured code used).
pub async fn session_status(pool: &MySqlPool, names: &[&str]) -> anyhow::Result<HashMap<String, i64>> {
    status(pool, "SHOW SESSION STATUS", names).await
}

/// Server-wide status counters (`SHOW GLOBAL STATUS`): everything the shared server does
/// counts, not only the benchmark.
pub async fn global_status(pool: &MySqlPool, names: &[&str]) -> anyhow::Result<HashMap<String, i64>> {
    status(pool, "SHOW GLOBAL STATUS", names).await
}

async fn status(
    pool: &MySqlPool,
    show: &'static str,
    names: &[&str],
) -> anyhow::Result<HashMap<String, i64>> {
    let rows = sqlx::query(show).fetch_all(pool).await?;
    let mut out = HashMap::new();
    for row in rows {
        let name: String = row.try_get(0)?;
        if names.contains(&name.as_str()) {
            let value: String = row.try_get(1)?;
            out.insert(name, value.parse().unwrap_or(0));
        }
    }
    Ok(out)
}

/// CPU time (user + system) used so far by this process, by the local MariaDB server
/// (`mariadbd`/`mysqld`) and by the local Redis (`redis-server`), both found in `/proc` (zero
/// when not on this machine).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    /// This process: the service, the fake IM and the load generator.
    pub this: Duration,
    /// The database server.
    pub db: Duration,
    /// The Redis server (the cluster's shard directory).
    pub redis: Duration,
}

impl CpuTimes {
    /// Reads all three now.
    pub fn now() -> Self {
        Self {
            this: cpu_of(Path::new("/proc/self/stat")),
            db: server_cpu(&["mariadbd", "mysqld"]),
            redis: server_cpu(&["redis-server"]),
        }
    }

    /// CPU used since `earlier`.
    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            this: self.this.saturating_sub(earlier.this),
            db: self.db.saturating_sub(earlier.db),
            redis: self.redis.saturating_sub(earlier.redis),
        }
    }
}

/// CPU time of the first process whose command name is one of `names`.
fn server_cpu(names: &[&str]) -> Duration {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| names.contains(&c.trim())))
        .map(|e| cpu_of(&e.path().join("stat")))
        .unwrap_or_default()
}

/// utime + stime of a `/proc/<pid>/stat` file (clock ticks of 10 ms).
pub fn cpu_of(stat: &Path) -> Duration {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> =
        text.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}
