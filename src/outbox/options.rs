//! The outbox worker's retry delays, over the validated [`OutboxWorkerSettings`] it takes as
//! they are: every limit was normalised once, in [`crate::config`], and the claim lease is
//! [`OutboxWorkerSettings::lease`] (SPEC §5, §7).

use std::time::Duration;

use crate::config::{OutboxWorkerSettings, RetryStrategy};

impl OutboxWorkerSettings {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_interval_retries_after_one_poll_interval() {
        let options = OutboxWorkerSettings {
            poll_interval: Duration::from_millis(700),
            ..OutboxWorkerSettings::default()
        };
        assert_eq!(options.retry_after(1, 0.5), Duration::from_millis(700));
        assert_eq!(options.retry_after(9, 1.0), Duration::from_millis(700));
    }

    #[test]
    fn exponential_doubles_from_the_base_with_jitter_and_stops_at_the_max() {
        let options = OutboxWorkerSettings {
            retry_strategy: RetryStrategy::Exponential,
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            ..OutboxWorkerSettings::default()
        };
        let full: Vec<u64> = (1..=8).map(|a| options.retry_after(a, 1.0).as_secs()).collect();
        assert_eq!(full, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(options.retry_after(3, 0.5), Duration::from_secs(2), "jitter halves at most");
        assert_eq!(options.retry_after(3, 0.1), Duration::from_secs(2), "jitter below 0.5 is clamped");
        assert_eq!(options.retry_after(u32::MAX, 1.0), Duration::from_secs(60), "no overflow");
    }
}
