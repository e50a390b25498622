//! `kaas-bench uring-latency`: how long a process's io_uring operations took, per opcode,
//! from `perf script` output of the `io_uring:io_uring_submit_req` and
//! `io_uring:io_uring_complete` tracepoints.
//!
//! ```sh
//! perf record -e io_uring:io_uring_submit_req,io_uring:io_uring_complete -p PID -- sleep 5
//! perf script | kaas-bench uring-latency
//! ```
//!
//! A request is identified by its ring and request addresses; its latency is from the
//! submit event to the complete event. This is off-CPU time a CPU profile cannot show: how
//! long a broker waits for `fdatasync` (FSYNC), O_DIRECT writes and socket operations.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use clap::Args;
use hdrhistogram::Histogram;

use crate::latency_recorder::new_histogram;

/// `kaas-bench uring-latency` flags.
#[derive(Args, Debug, Clone)]
pub struct UringLatencyArgs {
    /// Only these opcodes (comma separated, e.g. FSYNC,WRITE); all by default.
    #[arg(long, value_delimiter = ',')]
    pub opcodes: Vec<String>,
}

/// Fields of one tracepoint line that matter here.
#[derive(Debug, PartialEq)]
enum Event<'a> {
    Submit {
        at_us: u64,
        key: (&'a str, &'a str),
        opcode: &'a str,
    },
    Complete {
        at_us: u64,
        key: (&'a str, &'a str),
    },
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(name)? + name.len();
    let rest = &line[start..];
    let end = rest.find([',', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

fn timestamp_us(line: &str, event_at: usize) -> Option<u64> {
    // "... [000]  5637.114548: io_uring:..." — the token before the event name.
    let before = line[..event_at].trim_end().strip_suffix(':')?;
    let token = before.rsplit(' ').next()?;
    let (seconds, micros) = token.split_once('.')?;
    Some(seconds.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?)
}

fn parse(line: &str) -> Option<Event<'_>> {
    if let Some(at) = line.find("io_uring:io_uring_submit_req:") {
        return Some(Event::Submit {
            at_us: timestamp_us(line, at)?,
            key: (field(line, "ring ")?, field(line, "req ")?),
            opcode: field(line, "opcode ")?,
        });
    }
    if let Some(at) = line.find("io_uring:io_uring_complete:") {
        return Some(Event::Complete {
            at_us: timestamp_us(line, at)?,
            key: (field(line, "ring ")?, field(line, "req ")?),
        });
    }
    None
}

/// `kaas-bench uring-latency`.
pub fn uring_latency_command(args: &UringLatencyArgs) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut pending: HashMap<(String, String), (u64, String)> = HashMap::new();
    let mut by_opcode: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    let mut first_us = None;
    let mut last_us = 0;
    for line in stdin.lock().lines() {
        let line = line?;
        match parse(&line) {
            Some(Event::Submit { at_us, key, opcode }) => {
                first_us.get_or_insert(at_us);
                last_us = at_us;
                pending.insert(
                    (key.0.to_string(), key.1.to_string()),
                    (at_us, opcode.to_string()),
                );
            }
            Some(Event::Complete { at_us, key }) => {
                last_us = at_us;
                let owned = (key.0.to_string(), key.1.to_string());
                if let Some((submitted, opcode)) = pending.remove(&owned) {
                    if args.opcodes.is_empty() || args.opcodes.contains(&opcode) {
                        by_opcode
                            .entry(opcode)
                            .or_insert_with(new_histogram)
                            .saturating_record(at_us.saturating_sub(submitted).max(1));
                    }
                }
            }
            None => {}
        }
    }
    let seconds = (last_us.saturating_sub(first_us.unwrap_or(last_us))) as f64 / 1e6;
    println!("io_uring operations over {seconds:.1} s (submit → complete), milliseconds:\n");
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "opcode", "count", "per s", "p50", "p99", "p99.9", "max"
    );
    for (opcode, histogram) in &by_opcode {
        let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
        println!(
            "{:<14} {:>9} {:>9.0} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            opcode,
            histogram.len(),
            histogram.len() as f64 / seconds.max(1e-9),
            ms(0.5),
            ms(0.99),
            ms(0.999),
            histogram.max() as f64 / 1e3
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_perf_script_lines() {
        let submit = "  kaas-shard-0-2 17750 [000]  5637.114643: io_uring:io_uring_submit_req: ring 0xffff8882b02fd000, req 0xffff8883e1843100, user_data 0x8, opcode FSYNC, flags 0x400004, sq_thread 0";
        let complete = "  iou-wrk-1 17751 [001]  5637.116643:   io_uring:io_uring_complete: ring 0xffff8882b02fd000, req 0xffff8883e1843100, user_data 0x8, result 0, cflags 0x0 extra1 0 extra2 0 ";
        assert_eq!(
            parse(submit),
            Some(Event::Submit {
                at_us: 5_637_114_643,
                key: ("0xffff8882b02fd000", "0xffff8883e1843100"),
                opcode: "FSYNC",
            })
        );
        assert_eq!(
            parse(complete),
            Some(Event::Complete {
                at_us: 5_637_116_643,
                key: ("0xffff8882b02fd000", "0xffff8883e1843100"),
            })
        );
        assert_eq!(parse("something else"), None);
    }
}
