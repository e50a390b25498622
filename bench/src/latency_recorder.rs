//! Per-sample latency histograms and throughput counters, one recorder per thread.
//!
//! Latencies are recorded in microseconds in an HdrHistogram with 3 significant digits. A
//! latency is filed under the sample its record was *meant* to be sent in (so a stall that
//! delays delivery past the end of the sample still counts against that sample); throughput
//! is filed under the sample the record *completed* in (acknowledged or consumed).

use hdrhistogram::Histogram;

use crate::sample_clock::Phase;

/// Highest latency tracked exactly: one hour, in microseconds. Larger values saturate.
const MAX_TRACKABLE_US: u64 = 3_600_000_000;

/// A new empty latency histogram (microseconds, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts; failure would be a programming error.
    #[allow(clippy::unwrap_used)]
    Histogram::new_with_bounds(1, MAX_TRACKABLE_US, 3).unwrap()
}

/// What one thread saw during one run.
#[derive(Clone)]
pub struct SampleRecorder {
    /// Latency histogram per sample.
    pub latency: Vec<Histogram<u64>>,
    /// Records completed per sample.
    pub records: Vec<u64>,
    /// Payload bytes (key + value) completed per sample.
    pub bytes: Vec<u64>,
}

impl SampleRecorder {
    pub fn new(samples: usize) -> Self {
        SampleRecorder {
            latency: (0..samples).map(|_| new_histogram()).collect(),
            records: vec![0; samples],
            bytes: vec![0; samples],
        }
    }

    /// Records a latency for a record meant to be sent in `sent_phase`.
    pub fn record_latency(&mut self, sent_phase: Phase, latency_us: u64) {
        if let Phase::Sample(index) = sent_phase {
            if let Some(histogram) = self.latency.get_mut(index) {
                histogram.saturating_record(latency_us.max(1));
            }
        }
    }

    /// Counts a record that completed in `done_phase`.
    pub fn count(&mut self, done_phase: Phase, bytes: u64) {
        if let Phase::Sample(index) = done_phase {
            if let (Some(records), Some(total)) =
                (self.records.get_mut(index), self.bytes.get_mut(index))
            {
                *records += 1;
                *total += bytes;
            }
        }
    }

    /// Adds another thread's recorder into this one.
    pub fn merge(&mut self, other: &SampleRecorder) {
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            // Both histograms have the same bounds, so adding cannot fail.
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self.records.iter_mut().zip(&other.records) {
            *mine += theirs;
        }
        for (mine, theirs) in self.bytes.iter_mut().zip(&other.bytes) {
            *mine += theirs;
        }
    }

    /// All samples' latencies in one histogram.
    pub fn merged_latency(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for histogram in &self.latency {
            let _ = all.add(histogram);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_go_to_the_sent_sample_and_counts_to_the_done_sample() {
        let mut recorder = SampleRecorder::new(2);
        recorder.record_latency(Phase::Warmup, 5);
        recorder.record_latency(Phase::Sample(0), 100);
        recorder.record_latency(Phase::After, 7);
        recorder.count(Phase::Sample(1), 10);
        recorder.count(Phase::After, 10);
        assert_eq!(recorder.latency[0].len(), 1);
        assert_eq!(recorder.latency[1].len(), 0);
        assert_eq!(recorder.records, vec![0, 1]);
        assert_eq!(recorder.bytes, vec![0, 10]);

        let mut other = SampleRecorder::new(2);
        other.record_latency(Phase::Sample(1), 200);
        other.count(Phase::Sample(0), 4);
        recorder.merge(&other);
        assert_eq!(recorder.records, vec![1, 1]);
        assert_eq!(recorder.merged_latency().len(), 2);
    }
}
