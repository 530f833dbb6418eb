//! [`OutboxWorkerOptions`]: the worker's knobs, normalised so that no value can turn the worker
//! into a busy loop, an unbounded scan or an unbounded wait (SPEC §5, §7).

use std::time::Duration;

use crate::config::{
    DEFAULT_BATCH_SIZE, DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL, DEFAULT_PUBLISH_TIMEOUT,
    MAX_BATCH_SIZE, MAX_IN_FLIGHT, OutboxWorkerSettings, RetryStrategy, lease_for,
};

/// How the outbox worker paces itself and bounds each publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxWorkerOptions {
    /// Time between two rounds; also the delay before a failed row is retried.
    pub poll_interval: Duration,
    /// Most rows claimed per batch.
    pub batch_size: usize,
    /// Bound on one publish of one row.
    pub publish_timeout: Duration,
    /// When a failed row is tried again.
    pub retry_strategy: RetryStrategy,
    /// Most publishes in flight at once. Rows of one room are always published one after
    /// another, in id order; different rooms go in parallel up to this bound.
    pub max_in_flight: usize,
    /// `exponential`: first retry delay.
    pub retry_base: Duration,
    /// `exponential`: longest retry delay.
    pub retry_max: Duration,
    /// Failed attempts after which a row is parked (`failed`, reason `max_attempts`); 0 = never.
    pub max_attempts: u32,
    /// Least delay after a rate-limited answer.
    pub rate_limit_pause: Duration,
    /// Publishing stops this long after a configuration error; no row spends an attempt on it.
    pub config_error_pause: Duration,
    /// Messages per second one room may get (`im_rate_limit.per_group_per_sec`): the worker
    /// holds at most two seconds of it per room, so a backlogged room never crowds others out
    /// of the claims.
    pub per_room_rate: u32,
}

impl Default for OutboxWorkerOptions {
    fn default() -> Self {
        Self {
            poll_interval: DEFAULT_POLL_INTERVAL,
            batch_size: DEFAULT_BATCH_SIZE,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            retry_strategy: RetryStrategy::FixedInterval,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            max_attempts: 0,
            rate_limit_pause: Duration::from_secs(1),
            config_error_pause: Duration::from_secs(30),
            per_room_rate: 35,
        }
    }
}

impl OutboxWorkerOptions {
    /// Replaces every non-positive value by its default (1s, 100, 3s) and caps the batch size
    /// at [`MAX_BATCH_SIZE`], so the worker never busy-loops, never scans without a bound and
    /// never waits on one publish forever.
    pub fn normalise(self) -> Self {
        let defaults = Self::default();
        Self {
            poll_interval: positive_or(self.poll_interval, defaults.poll_interval),
            batch_size: match self.batch_size {
                0 => defaults.batch_size,
                n => n.min(MAX_BATCH_SIZE),
            },
            publish_timeout: positive_or(self.publish_timeout, defaults.publish_timeout),
            retry_strategy: self.retry_strategy,
            max_in_flight: match self.max_in_flight {
                0 => defaults.max_in_flight,
                n => n.min(MAX_IN_FLIGHT),
            },
            retry_base: positive_or(self.retry_base, defaults.retry_base),
            retry_max: positive_or(self.retry_max, defaults.retry_max)
                .max(positive_or(self.retry_base, defaults.retry_base)),
            max_attempts: self.max_attempts,
            rate_limit_pause: positive_or(self.rate_limit_pause, defaults.rate_limit_pause),
            config_error_pause: positive_or(self.config_error_pause, defaults.config_error_pause),
            per_room_rate: if self.per_room_rate == 0 { defaults.per_room_rate } else { self.per_room_rate },
        }
    }

    /// The lease a claim takes, renewed every quarter of it while the claim still holds rows (a
    /// row may wait long for rate-limit permits): three publish timeouts, at least
    /// [`MIN_LEASE`] — rows of a crashed worker return that soon.
    pub fn lease(&self) -> Duration {
        lease_for(self.publish_timeout)
    }

    /// How long a row waits before it can be claimed again after its `attempt`-th failed
    /// attempt (1 for the first): one poll interval (`fixed_interval`), or `retry_base ×
    /// 2^(attempt-1)` capped at `retry_max`, times `jitter` (`exponential`; pass a uniform
    /// draw from [0.5, 1.0]).
    pub fn retry_after(&self, attempt: u32, jitter: f64) -> Duration {
        match self.retry_strategy {
            RetryStrategy::FixedInterval => self.poll_interval,
            RetryStrategy::Exponential => {
                let doublings = attempt.saturating_sub(1).min(62);
                let delay = self.retry_base.saturating_mul(1u32 << doublings.min(31)).min(self.retry_max);
                let delay = if doublings > 31 { self.retry_max } else { delay };
                delay.mul_f64(jitter.clamp(0.5, 1.0))
            }
        }
    }
}

impl From<&OutboxWorkerSettings> for OutboxWorkerOptions {
    fn from(settings: &OutboxWorkerSettings) -> Self {
        Self {
            poll_interval: settings.poll_interval,
            batch_size: settings.batch_size,
            publish_timeout: settings.publish_timeout,
            retry_strategy: settings.retry_strategy,
            max_in_flight: settings.max_in_flight,
            retry_base: settings.retry_base,
            retry_max: settings.retry_max,
            max_attempts: settings.max_attempts,
            rate_limit_pause: settings.rate_limit_pause,
            config_error_pause: settings.config_error_pause,
            // Set from `im_rate_limit` by whoever has it (the app).
            per_room_rate: Self::default().per_room_rate,
        }
        .normalise()
    }
}

fn positive_or(value: Duration, default: Duration) -> Duration {
    if value.is_zero() { default } else { value }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MIN_LEASE;

    #[test]
    fn non_positive_values_take_the_defaults() {
        let options = OutboxWorkerOptions {
            poll_interval: Duration::ZERO,
            batch_size: 0,
            publish_timeout: Duration::ZERO,
            max_in_flight: 0,
            ..OutboxWorkerOptions::default()
        }
        .normalise();
        assert_eq!(options.poll_interval, Duration::from_secs(1));
        assert_eq!(options.batch_size, 100);
        assert_eq!(options.publish_timeout, Duration::from_secs(3));
        assert_eq!(options.max_in_flight, DEFAULT_MAX_IN_FLIGHT);
    }

    #[test]
    fn positive_values_are_kept_and_the_batch_is_capped() {
        let options = OutboxWorkerOptions {
            poll_interval: Duration::from_millis(250),
            batch_size: 7,
            publish_timeout: Duration::from_millis(1500),
            max_in_flight: 3,
            ..OutboxWorkerOptions::default()
        };
        assert_eq!(options.clone().normalise(), options);
        let huge =
            OutboxWorkerOptions { batch_size: usize::MAX, max_in_flight: usize::MAX, ..options }.normalise();
        assert_eq!(huge.batch_size, MAX_BATCH_SIZE);
        assert_eq!(huge.max_in_flight, MAX_IN_FLIGHT);
    }

    #[test]
    fn lease_is_three_publish_timeouts_and_at_least_the_minimum() {
        let options =
            OutboxWorkerOptions { publish_timeout: Duration::from_secs(5), ..OutboxWorkerOptions::default() };
        assert_eq!(options.lease(), Duration::from_secs(15));
        let short =
            OutboxWorkerOptions { publish_timeout: Duration::from_secs(1), ..OutboxWorkerOptions::default() };
        assert_eq!(short.lease(), MIN_LEASE);
        let absurd = OutboxWorkerOptions { publish_timeout: Duration::MAX, ..OutboxWorkerOptions::default() };
        assert_eq!(absurd.lease(), Duration::MAX);
    }

    #[test]
    fn fixed_interval_retries_after_one_poll_interval() {
        let options = OutboxWorkerOptions {
            poll_interval: Duration::from_millis(700),
            ..OutboxWorkerOptions::default()
        };
        assert_eq!(options.retry_after(1, 0.5), Duration::from_millis(700));
        assert_eq!(options.retry_after(9, 1.0), Duration::from_millis(700));
    }

    #[test]
    fn exponential_doubles_from_the_base_with_jitter_and_stops_at_the_max() {
        let options = OutboxWorkerOptions {
            retry_strategy: RetryStrategy::Exponential,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            ..OutboxWorkerOptions::default()
        };
        let full: Vec<u64> = (1..=8).map(|a| options.retry_after(a, 1.0).as_secs()).collect();
        assert_eq!(full, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(options.retry_after(3, 0.5), Duration::from_secs(2), "jitter halves at most");
        assert_eq!(options.retry_after(3, 0.1), Duration::from_secs(2), "jitter below 0.5 is clamped");
        assert_eq!(options.retry_after(u32::MAX, 1.0), Duration::from_secs(60), "no overflow");
    }

    #[test]
    fn settings_convert_into_normalised_options() {
        let settings = OutboxWorkerSettings {
            enabled: true,
            poll_interval: Duration::from_secs(2),
            batch_size: 0,
            publish_timeout: Duration::from_secs(4),
            retry_strategy: RetryStrategy::FixedInterval,
            retention: None,
            stats_interval: Duration::from_secs(5),
            max_in_flight: 8,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            max_attempts: 0,
            rate_limit_pause: Duration::from_secs(1),
            config_error_pause: Duration::from_secs(30),
        };
        let options = OutboxWorkerOptions::from(&settings);
        assert_eq!(options.poll_interval, Duration::from_secs(2));
        assert_eq!(options.batch_size, DEFAULT_BATCH_SIZE);
        assert_eq!(options.publish_timeout, Duration::from_secs(4));
        let settings = OutboxWorkerSettings { batch_size: 5, ..settings };
        assert_eq!(OutboxWorkerOptions::from(&settings).lease(), settings.lease());
    }
}
