//! [`OutboxWorkerOptions`]: the worker's knobs, normalised so that no value can turn the worker
//! into a busy loop, an unbounded scan or an unbounded wait (SPEC §5, §7).

use std::time::Duration;

use crate::config::{
    DEFAULT_BATCH_SIZE, DEFAULT_MAX_IN_FLIGHT, DEFAULT_POLL_INTERVAL, DEFAULT_PUBLISH_TIMEOUT, LEASE_MARGIN,
    MAX_BATCH_SIZE, MAX_IN_FLIGHT, OutboxWorkerSettings, RetryStrategy,
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
}

impl Default for OutboxWorkerOptions {
    fn default() -> Self {
        Self {
            poll_interval: DEFAULT_POLL_INTERVAL,
            batch_size: DEFAULT_BATCH_SIZE,
            publish_timeout: DEFAULT_PUBLISH_TIMEOUT,
            retry_strategy: RetryStrategy::FixedInterval,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
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
        }
    }

    /// The lease a claim takes. The rows of one room go one after another and a batch may hold
    /// a single room, so the lease covers the whole batch published in sequence,
    /// `batch_size × publish_timeout + LEASE_MARGIN` (saturating), and cannot expire while a
    /// claimed row is still being published.
    pub fn lease(&self) -> Duration {
        let factor = u32::try_from(self.batch_size).unwrap_or(u32::MAX);
        self.publish_timeout.saturating_mul(factor).saturating_add(LEASE_MARGIN)
    }

    /// How long a row whose publish failed waits before it can be claimed again.
    pub fn retry_after(&self) -> Duration {
        match self.retry_strategy {
            RetryStrategy::FixedInterval => self.poll_interval,
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

    #[test]
    fn non_positive_values_take_the_defaults() {
        let options = OutboxWorkerOptions {
            poll_interval: Duration::ZERO,
            batch_size: 0,
            publish_timeout: Duration::ZERO,
            retry_strategy: RetryStrategy::FixedInterval,
            max_in_flight: 0,
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
            retry_strategy: RetryStrategy::FixedInterval,
            max_in_flight: 3,
        };
        assert_eq!(options.clone().normalise(), options);
        let huge =
            OutboxWorkerOptions { batch_size: usize::MAX, max_in_flight: usize::MAX, ..options }.normalise();
        assert_eq!(huge.batch_size, MAX_BATCH_SIZE);
        assert_eq!(huge.max_in_flight, MAX_IN_FLIGHT);
    }

    #[test]
    fn lease_covers_the_whole_batch_plus_a_margin() {
        let options = OutboxWorkerOptions {
            batch_size: 10,
            publish_timeout: Duration::from_secs(3),
            ..OutboxWorkerOptions::default()
        };
        assert_eq!(options.lease(), Duration::from_secs(30) + LEASE_MARGIN);
        let absurd = OutboxWorkerOptions {
            batch_size: usize::MAX,
            publish_timeout: Duration::MAX,
            ..OutboxWorkerOptions::default()
        };
        assert_eq!(absurd.lease(), Duration::MAX);
    }

    #[test]
    fn fixed_interval_retries_after_one_poll_interval() {
        let options = OutboxWorkerOptions {
            poll_interval: Duration::from_millis(700),
            ..OutboxWorkerOptions::default()
        };
        assert_eq!(options.retry_after(), Duration::from_millis(700));
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
        };
        let options = OutboxWorkerOptions::from(&settings);
        assert_eq!(options.poll_interval, Duration::from_secs(2));
        assert_eq!(options.batch_size, DEFAULT_BATCH_SIZE);
        assert_eq!(options.publish_timeout, Duration::from_secs(4));
        let settings = OutboxWorkerSettings { batch_size: 5, ..settings };
        assert_eq!(OutboxWorkerOptions::from(&settings).lease(), settings.lease());
    }
}
