//! Crash tests' child process: this test binary re-run as a writer that prints one line per
//! acknowledgement, killed with SIGKILL while it writes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Runs the test `test_name` of this binary as a child with `envs` (stderr to
/// `stderr_path`), waits for its first line that `is_ack` accepts, lets it run for `delay`,
/// kills it and returns every line it printed in full (a line cut short by the kill was
/// never acknowledged in full).
pub fn run_and_kill(
    test_name: &str,
    envs: &[(&str, String)],
    stderr_path: &Path,
    round: u64,
    delay: Duration,
    is_ack: impl Fn(&str) -> bool,
) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr_path).expect("stderr file"))
        .spawn()
        .expect("start the writer");
    let stdout = child.stdout.take().expect("writer stdout");
    let (lines, received) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(_) if line.ends_with('\n') => {
                    if lines.send(line).is_err() {
                        break;
                    }
                }
                _ => break,
            }
        }
    });
    let stderr = || std::fs::read_to_string(stderr_path).unwrap_or_default();
    let mut printed = Vec::new();
    loop {
        match received.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                let acknowledged = is_ack(&line);
                printed.push(line);
                if acknowledged {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "round {round}: no acknowledgement from the writer; its stderr:\n{}",
                    stderr()
                );
            }
        }
    }
    std::thread::sleep(delay);
    let still_running = child.try_wait().expect("writer status").is_none();
    assert!(
        still_running,
        "round {round}: the writer exited on its own:\n{}",
        stderr()
    );
    child.kill().expect("SIGKILL the writer");
    child.wait().expect("reap the writer");
    reader.join().expect("reader thread");
    printed.extend(received.try_iter());
    // Writes the kernel had already accepted finish as the process is torn down; give them
    // a moment so that none lands after the next open, as none could after a real restart.
    std::thread::sleep(Duration::from_millis(20));
    printed
}
