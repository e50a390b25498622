//! Resident memory of many open, idle partition logs.
//!
//! Opens 10,000 partition logs on one executor (64 at a time), appends one 1 KiB batch to
//! each with `append_durable`, then leaves them idle and measures the process: `VmRSS` from
//! `/proc/self/status`, heap bytes in use (`mallinfo2`) and open file descriptors, before,
//! every 1,000 partitions, and once idle. Then it drops every log (as a crash would; no
//! checkpoint) and reopens them all from disk, the broker-restart case, and measures again.
//!
//! Segments are preallocated in 1 MiB steps here (`KAAS_IDLE_PREALLOCATE`, bytes) instead of
//! the 32 MiB default, which would reserve 32 MiB of disk per partition (320 GB for 10,000).
//!
//! Knobs (environment): `KAAS_BENCH_DIR` (parent of the scratch directory, default /tmp),
//! `KAAS_IDLE_PARTITIONS` (10000), `KAAS_IDLE_CONCURRENCY` (64), `KAAS_IDLE_BATCH` (1024; 0
//! opens the partitions without appending).

mod common;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use kaas_engine::{LogConfig, PartitionLog, Storage};

/// Raises the soft descriptor limit to the hard one; returns (soft, hard).
fn raise_nofile() -> (u64, u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, owned struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                eprintln!("setrlimit(RLIMIT_NOFILE) failed");
            }
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        }
    }
    (limit.rlim_cur, limit.rlim_max)
}

/// Free bytes on the file system holding `path`.
fn free_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
    unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c_path.as_ptr(), &mut stat) != 0 {
            return 0;
        }
        stat.f_bavail as u64 * stat.f_frsize as u64
    }
}

/// Heap bytes in use (arenas plus large mmapped blocks), all arenas.
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 has no preconditions.
    let info = unsafe { libc::mallinfo2() };
    (info.uordblks + info.hblkhd) as u64
}

#[derive(Clone, Copy)]
struct Snapshot {
    partitions: usize,
    rss_kib: u64,
    anon_kib: u64,
    heap: u64,
    fds: usize,
}

fn snapshot(partitions: usize) -> Snapshot {
    Snapshot {
        partitions,
        rss_kib: proc_status_kib("VmRSS"),
        anon_kib: proc_status_kib("RssAnon"),
        heap: heap_in_use(),
        fds: open_fds(),
    }
}

fn print_snapshot(label: &str, s: &Snapshot, base: &Snapshot) {
    let per = |now: u64, then: u64| {
        if s.partitions == 0 {
            0.0
        } else {
            (now as f64 - then as f64) / s.partitions as f64
        }
    };
    println!(
        "{:<28} {:>7} {:>10.1} {:>10.1} {:>10.1} {:>9.0} {:>9.0} {:>7}",
        label,
        s.partitions,
        s.rss_kib as f64 / 1024.0,
        s.anon_kib as f64 / 1024.0,
        s.heap as f64 / (1 << 20) as f64,
        per(s.rss_kib * 1024, base.rss_kib * 1024),
        per(s.heap, base.heap),
        s.fds
    );
}

fn snapshot_json(label: &str, s: &Snapshot) -> String {
    format!(
        "{{\"phase\":{},\"partitions\":{},\"vm_rss_kib\":{},\"rss_anon_kib\":{},\"heap_bytes\":{},\"fds\":{}}}",
        json_str(label),
        s.partitions,
        s.rss_kib,
        s.anon_kib,
        s.heap,
        s.fds
    )
}

fn partition_dir(i: usize) -> PathBuf {
    PathBuf::from("topics").join("idle").join(i.to_string())
}

/// Runs `job(i)` for every `i` in `range`, `concurrency` at a time.
async fn for_each_concurrently<F, Fut>(range: std::ops::Range<usize>, concurrency: usize, job: F)
where
    F: Fn(usize) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let next = Rc::new(std::cell::Cell::new(range.start));
    let end = range.end;
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let next = next.clone();
            let job = job.clone();
            glommio::spawn_local(async move {
                loop {
                    let i = next.get();
                    if i >= end {
                        break;
                    }
                    next.set(i + 1);
                    job(i).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await;
    }
}

async fn settle() {
    glommio::timer::sleep(Duration::from_millis(500)).await;
}

async fn bench() -> String {
    let partitions: usize = env_or("KAAS_IDLE_PARTITIONS", 10_000usize);
    let concurrency: usize = env_or("KAAS_IDLE_CONCURRENCY", 64usize).max(1);
    let batch_len: usize = env_or("KAAS_IDLE_BATCH", KIB);
    let (soft, hard) = raise_nofile();
    let scratch = scratch_dir("idle");
    let root = scratch.path().to_path_buf();
    kaas_engine::dma_probe::prepare_executor(&root)
        .await
        .expect("direct-I/O probe");
    let storage = Storage::disk(root.clone());
    let (machine_json, machine_text) = machine_facts(&root);
    println!("idle_partition_memory: {machine_text}");
    println!("RLIMIT_NOFILE soft {soft}, hard {hard}; {partitions} partitions, {batch_len}-byte batch each, {concurrency} opened at a time");
    // A zero batch size opens the partitions without appending anything.
    let batch = Rc::new(if batch_len == 0 {
        Vec::new()
    } else {
        exact_batch(batch_len, 1000)
    });
    // Every active segment reserves `preallocate_step` bytes of disk at its first flush; at
    // the 32 MiB default, 10,000 partitions would reserve 320 GB. Memory does not depend on
    // it, so the bench uses a small step (and checks the disk can hold it).
    let preallocate_step: u64 = env_or("KAAS_IDLE_PREALLOCATE", 1u64 << 20);
    let config = LogConfig {
        preallocate_step,
        ..LogConfig::default()
    };
    let reserve = preallocate_step.max(4096) * partitions as u64;
    let free = free_bytes(&root);
    println!(
        "preallocation step {} KiB: {:.1} GB of disk reserved in total, {:.1} GB free",
        preallocate_step >> 10,
        reserve as f64 / 1e9,
        free as f64 / 1e9
    );
    assert!(
        reserve < free / 2,
        "the partitions would reserve more than half the free disk space; lower KAAS_IDLE_PREALLOCATE or KAAS_IDLE_PARTITIONS"
    );

    settle().await;
    let base = snapshot(0);
    println!(
        "\n{:<28} {:>7} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "phase", "parts", "RSS MiB", "anon MiB", "heap MiB", "RSS B/p", "heap B/p", "fds"
    );
    print_snapshot("before", &base, &base);
    let mut phases = vec![snapshot_json("before", &base)];

    let logs: Rc<RefCell<Vec<Option<PartitionLog>>>> =
        Rc::new(RefCell::new((0..partitions).map(|_| None).collect()));
    let started = Instant::now();
    let step = 1000.min(partitions.max(1));
    let mut done = 0;
    while done < partitions {
        let upto = (done + step).min(partitions);
        let (storage, logs, batch, config) =
            (storage.clone(), logs.clone(), batch.clone(), config.clone());
        for_each_concurrently(done..upto, concurrency, move |i| {
            let (storage, logs, batch, config) =
                (storage.clone(), logs.clone(), batch.clone(), config.clone());
            async move {
                let log = PartitionLog::open(&storage, &partition_dir(i), config)
                    .await
                    .expect("open");
                if !batch.is_empty() {
                    log.append_durable(&batch, 0, now_ms())
                        .await
                        .expect("append");
                }
                logs.borrow_mut()[i] = Some(log);
            }
        })
        .await;
        done = upto;
        if done % 5000 == 0 || done == partitions || done == step {
            let s = snapshot(done);
            print_snapshot("opened + 1 batch", &s, &base);
            phases.push(snapshot_json("opened", &s));
        }
    }
    let open_secs = started.elapsed().as_secs_f64();
    settle().await;
    let idle = snapshot(partitions);
    print_snapshot("idle", &idle, &base);
    phases.push(snapshot_json("idle", &idle));

    logs.borrow_mut().iter_mut().for_each(|l| *l = None);
    settle().await;
    let dropped = Snapshot {
        partitions: 0,
        ..snapshot(0)
    };
    print_snapshot("all dropped", &dropped, &base);
    phases.push(snapshot_json("dropped", &dropped));

    let started = Instant::now();
    {
        let (storage, logs, config) = (storage.clone(), logs.clone(), config.clone());
        for_each_concurrently(0..partitions, concurrency, move |i| {
            let (storage, logs, config) = (storage.clone(), logs.clone(), config.clone());
            async move {
                let log = PartitionLog::open(&storage, &partition_dir(i), config)
                    .await
                    .expect("reopen");
                logs.borrow_mut()[i] = Some(log);
            }
        })
        .await;
    }
    let reopen_secs = started.elapsed().as_secs_f64();
    settle().await;
    let reopened = snapshot(partitions);
    print_snapshot("reopened (recovered), idle", &reopened, &dropped);
    phases.push(snapshot_json("reopened", &reopened));

    let total_mib = (idle.rss_kib - base.rss_kib) as f64 / 1024.0;
    let per_partition = (idle.rss_kib - base.rss_kib) as f64 * 1024.0 / partitions as f64;
    let reopen_per_partition =
        (reopened.rss_kib as f64 - dropped.rss_kib as f64) * 1024.0 / partitions as f64;
    println!(
        "\nfresh: +{total_mib:.1} MiB RSS for {partitions} partitions = {per_partition:.0} B each (opened in {open_secs:.1} s); \
         reopened: {reopen_per_partition:.0} B each over the dropped state (in {reopen_secs:.1} s)"
    );

    logs.borrow_mut().clear();
    drop(scratch);
    format!(
        "{{\"bench\":\"idle_partition_memory\",\"unix_time\":{},\"machine\":{},\"partitions\":{},\"batch_bytes\":{},\"nofile\":[{},{}],\"phases\":[{}],\"rss_total_mib\":{},\"rss_per_partition_bytes\":{},\"reopen_rss_per_partition_bytes\":{},\"open_secs\":{},\"reopen_secs\":{},\"preallocate_step\":{}}}\n",
        now_ms() / 1000,
        machine_json,
        partitions,
        batch_len,
        soft,
        hard,
        phases.join(","),
        json_num(total_mib),
        json_num(per_partition),
        json_num(reopen_per_partition),
        json_num(open_secs),
        json_num(reopen_secs),
        preallocate_step
    )
}

fn main() {
    let json = run_on_executor("idle-partitions", bench);
    write_report("idle_partition_memory", &json);
}
