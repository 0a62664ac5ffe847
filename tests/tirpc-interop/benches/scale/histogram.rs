//! Call latencies as a log-linear histogram: mergeable across workers and client processes
//! (percentiles are not), a few kilobytes whatever the number of calls, and written as one
//! line of text for the pipe between a client process and the coordinator.
//!
//! Values below [`SUB_BUCKETS`] nanoseconds have a bucket each; above, every power of two is
//! split into [`SUB_BUCKETS`] equal buckets, so a percentile is off by at most one part in
//! [`SUB_BUCKETS`] (1.6 %), well inside the run-to-run noise of a loopback round trip.

/// Buckets per power of two (and the exact range below it): the histogram's precision.
const SUB_BUCKETS: u64 = 64;
/// log2 of [`SUB_BUCKETS`].
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();
/// Enough buckets for any `u64`.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB_BUCKETS as usize;

/// Latencies in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

/// The bucket of `ns`.
fn bucket(ns: u64) -> usize {
    if ns < SUB_BUCKETS {
        return ns as usize;
    }
    let exp = 63 - ns.leading_zeros();
    let sub = (ns >> (exp - SUB_BITS)) & (SUB_BUCKETS - 1);
    ((exp - SUB_BITS + 1) as u64 * SUB_BUCKETS + sub) as usize
}

/// The middle of bucket `index`'s range, in nanoseconds.
fn middle(index: usize) -> f64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index as f64;
    }
    let exp = (index / SUB_BUCKETS) as u32 + SUB_BITS - 1;
    let sub = index % SUB_BUCKETS;
    let low = (SUB_BUCKETS + sub) << (exp - SUB_BITS);
    let width = 1u64 << (exp - SUB_BITS);
    low as f64 + width as f64 / 2.0
}

impl Histogram {
    /// Counts one latency.
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency below which a fraction `q` (0 to 1) of the calls fall, in microseconds
    /// (NaN without calls).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.total == 0 {
            return f64::NAN;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return middle(i) / 1e3;
            }
        }
        unreachable!("rank <= total")
    }

    /// The counts as `index:count` pairs separated by commas (`-` when empty).
    pub fn to_text(&self) -> String {
        let pairs: Vec<String> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, c)| format!("{i}:{c}"))
            .collect();
        if pairs.is_empty() {
            "-".into()
        } else {
            pairs.join(",")
        }
    }

    /// Reads what [`Histogram::to_text`] wrote.
    pub fn from_text(text: &str) -> Result<Histogram, String> {
        let mut h = Histogram::default();
        if text == "-" {
            return Ok(h);
        }
        for pair in text.split(',') {
            let (i, c) = pair
                .split_once(':')
                .ok_or_else(|| format!("histogram pair {pair:?} has no ':'"))?;
            let i: usize = i.parse().map_err(|e| format!("bucket {i:?}: {e}"))?;
            let c: u64 = c.parse().map_err(|e| format!("count {c:?}: {e}"))?;
            *h.counts
                .get_mut(i)
                .ok_or_else(|| format!("bucket {i} out of range"))? += c;
            h.total += c;
        }
        Ok(h)
    }
}
