//! Waiting for a condition, and summarising measured durations.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long Envoy may take to converge on a loaded machine.
pub const CONVERGE: Duration = Duration::from_secs(30);

/// Polls `check` until it returns `Some`, failing with `what` and the last observation after
/// `deadline`.
pub async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let give_up = Instant::now() + deadline;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if Instant::now() >= give_up => panic!("{what}: not within {deadline:?}; last: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// p50, p99 and max of some durations.
#[derive(Clone, Copy, Debug)]
pub struct Percentiles {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Percentiles {
    pub fn of(durations: &[Duration]) -> Option<Percentiles> {
        let mut sorted = durations.to_vec();
        sorted.sort();
        let count = sorted.len();
        let at = |percent: usize| sorted[(count * percent).div_ceil(100).saturating_sub(1)];
        (count > 0).then(|| Percentiles { count, p50: at(50), p99: at(99), max: sorted[count - 1] })
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
        write!(
            f,
            "n={} p50={:.1}ms p99={:.1}ms max={:.1}ms",
            self.count,
            ms(self.p50),
            ms(self.p99),
            ms(self.max)
        )
    }
}
