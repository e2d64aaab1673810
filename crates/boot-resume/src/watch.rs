//! `lazarus boot-resume watch`: detects system wake without sleep.target.
//!
//! CLOCK_MONOTONIC stops while the machine sleeps, CLOCK_BOOTTIME does not. Sampling both
//! every few seconds, a BOOTTIME advance larger than the MONOTONIC advance by more than a
//! threshold means the machine slept in between.
use std::time::Duration;

/// A source of (boottime, monotonic) samples; injectable for tests.
pub trait Clock {
    /// Reads both clocks.
    fn sample(&mut self) -> (Duration, Duration);
}

/// The real clocks.
#[derive(Debug, Default)]
pub struct SystemClock;

fn ts(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl Clock for SystemClock {
    fn sample(&mut self) -> (Duration, Duration) {
        (
            ts(rustix::time::ClockId::Boottime),
            ts(rustix::time::ClockId::Monotonic),
        )
    }
}

/// Compares consecutive samples.
#[derive(Debug, Clone)]
pub struct WakeDetector {
    last: Option<(Duration, Duration)>,
    threshold: Duration,
}

impl WakeDetector {
    /// A detector that reports sleeps longer than `threshold`.
    pub fn new(threshold: Duration) -> Self {
        WakeDetector {
            last: None,
            threshold,
        }
    }

    /// Feeds one sample; returns how long the machine slept if it woke since the last one.
    pub fn observe(&mut self, boottime: Duration, monotonic: Duration) -> Option<Duration> {
        let prev = self.last.replace((boottime, monotonic));
        let (pb, pm) = prev?;
        let db = boottime.saturating_sub(pb);
        let dm = monotonic.saturating_sub(pm);
        let slept = db.saturating_sub(dm);
        (slept > self.threshold).then_some(slept)
    }
}

/// Runs the watch loop: sample, sleep `interval`, and call `on_wake(slept)` after a wake.
/// Stops when `on_wake` or `keep_going` returns false. `sleep` is injectable for tests.
pub fn watch(
    clock: &mut dyn Clock,
    interval: Duration,
    threshold: Duration,
    sleep: &mut dyn FnMut(Duration),
    keep_going: &mut dyn FnMut() -> bool,
    on_wake: &mut dyn FnMut(Duration) -> bool,
) {
    let mut d = WakeDetector::new(threshold);
    let (b, m) = clock.sample();
    d.observe(b, m);
    while keep_going() {
        sleep(interval);
        let (b, m) = clock.sample();
        if let Some(slept) = d.observe(b, m)
            && !on_wake(slept)
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        b: Duration,
        m: Duration,
        script: Vec<Duration>, // extra boottime per step (the sleep)
        step: usize,
    }

    impl Clock for Fake {
        fn sample(&mut self) -> (Duration, Duration) {
            let s = (self.b, self.m);
            let extra = self.script.get(self.step).copied().unwrap_or_default();
            self.step += 1;
            self.b += Duration::from_secs(5) + extra;
            self.m += Duration::from_secs(5);
            s
        }
    }

    #[test]
    fn detects_sleep_and_ignores_normal_ticks() {
        let mut d = WakeDetector::new(Duration::from_secs(3));
        assert_eq!(
            d.observe(Duration::from_secs(100), Duration::from_secs(90)),
            None
        );
        assert_eq!(
            d.observe(Duration::from_secs(105), Duration::from_secs(95)),
            None
        );
        assert_eq!(
            d.observe(Duration::from_secs(107), Duration::from_secs(96)),
            None,
            "1 s jitter is not a sleep"
        );
        assert_eq!(
            d.observe(Duration::from_secs(1107), Duration::from_secs(101)),
            Some(Duration::from_secs(995))
        );
        assert_eq!(
            d.observe(Duration::from_secs(1112), Duration::from_secs(106)),
            None
        );
    }

    #[test]
    fn watch_loop_calls_on_wake_once_per_sleep() {
        let mut clock = Fake {
            b: Duration::from_secs(10),
            m: Duration::from_secs(10),
            script: vec![
                Duration::ZERO,
                Duration::ZERO,
                Duration::from_secs(600),
                Duration::ZERO,
                Duration::from_secs(60),
            ],
            step: 0,
        };
        let mut wakes = Vec::new();
        let mut n = 0;
        watch(
            &mut clock,
            Duration::from_secs(5),
            Duration::from_secs(3),
            &mut |_| {},
            &mut || {
                n += 1;
                n <= 6
            },
            &mut |s| {
                wakes.push(s.as_secs());
                true
            },
        );
        assert_eq!(wakes, vec![600, 60]);
    }
}
