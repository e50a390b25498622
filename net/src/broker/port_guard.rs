//! Refusing a Kafka port that another process already listens on.
//!
//! Every shard binds the Kafka port with `SO_REUSEPORT` (glommio sets it), so a second
//! process doing the same would bind too, and the kernel would silently split connections
//! between the two brokers. Before the shards bind, the broker binds the address once
//! without `SO_REUSEPORT`: that fails while any other socket listens there. The check
//! retries for a moment while no live process owns the socket, because the listening socket
//! of a broker that was just killed outlives it by up to a few hundred milliseconds. Sockets
//! that only hold the port (connections a stopped broker had accepted, lingering after it)
//! do not count: the shards' `SO_REUSEPORT` bind coexists with them, and they never take new
//! connections.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

/// How long a socket with no live owner may keep the port before start-up gives up.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// The port is taken.
#[derive(Debug, thiserror::Error)]
#[error("{addr} is already in use by {holder}; refusing to share it")]
pub struct PortInUse {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Who listens there, as far as `/proc` tells.
    pub holder: String,
}

/// Returns once nothing else listens on `addr`, or says who does.
pub fn ensure_free(addr: SocketAddr) -> Result<(), PortInUse> {
    let deadline = Instant::now() + RELEASE_WAIT;
    loop {
        match TcpListener::bind(addr) {
            Ok(probe) => {
                drop(probe);
                return Ok(());
            }
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {
                // Connections a stopped broker accepted keep the port bound for a while
                // without listening; the shards' SO_REUSEPORT bind coexists with those. Only a
                // listening socket is a competitor.
                if !listens(addr.port()) {
                    return Ok(());
                }
                let owner = listening_process(addr.port());
                if owner.is_some() || Instant::now() >= deadline {
                    return Err(PortInUse {
                        addr,
                        holder: owner.unwrap_or_else(|| {
                            "a listening socket no running process owns (not released in time)"
                                .into()
                        }),
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // Anything else (a bad address, no permission) is the shards' bind to report.
            Err(_) => return Ok(()),
        }
    }
}

/// Whether any socket listens on `port` (in `/proc/net/tcp{,6}`).
fn listens(port: u16) -> bool {
    !listening_socket_inodes(port).is_empty()
}

/// Inodes of every socket listening on `port`.
fn listening_socket_inodes(port: u16) -> Vec<String> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| listening_inodes(&table, port))
        .collect()
}

/// The process (other than this one) that has a socket listening on `port`, as
/// `pid N (command line)`: from the socket inodes in `/proc/net/tcp{,6}` and the descriptors
/// in `/proc/<pid>/fd`. `None` when no running process owns one.
fn listening_process(port: u16) -> Option<String> {
    let inodes = listening_socket_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    let own_pid = std::process::id();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own_pid {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                inodes
                    .iter()
                    .any(|inode| target == format!("socket:[{inode}]"))
            })
        });
        if owns {
            let command = std::fs::read(entry.path().join("cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                .unwrap_or_default();
            return Some(format!("pid {pid} ({})", command.trim()));
        }
    }
    None
}

/// Inodes of the sockets in one `/proc/net/tcp*` table that listen on `port`.
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let state = fields.get(3)?;
            let inode = fields.get(9)?;
            let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (local_port == port && *state == LISTEN).then(|| inode.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_held_by_a_listener_is_refused_and_a_free_one_is_not() {
        let held = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = held.local_addr().expect("addr");
        // Our own listener is not named (we skip this process), but the bind still fails:
        // the refusal comes once the release wait is over. Check the table parsing directly.
        let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
        assert!(!listening_inodes(&table, addr.port()).is_empty());
        drop(held);
        ensure_free(addr).expect("a released port is free");
    }

    #[test]
    fn the_table_parser_reads_listening_sockets_only() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n   1: 0100007F:2384 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1\n";
        assert_eq!(listening_inodes(table, 9092), vec!["4242".to_string()]);
        assert!(listening_inodes(table, 9093).is_empty());
    }
}
