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
//! connections. Nor do listeners on the same port of another address (brokers on one host,
//! each on its own address with the default port): only one on the same address, or where
//! either side is the unspecified address, competes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
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
                if !listens(addr) {
                    return Ok(());
                }
                let owner = listening_process(addr);
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

/// Whether any socket listens where it would compete with `addr` (in `/proc/net/tcp{,6}`).
fn listens(addr: SocketAddr) -> bool {
    !listening_socket_inodes(addr).is_empty()
}

/// Inodes of every socket listening where it would compete with `addr`.
fn listening_socket_inodes(addr: SocketAddr) -> Vec<String> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| listening_inodes(&table, addr))
        .collect()
}

/// The process (other than this one) that has a socket listening where it competes with
/// `addr`, as `pid N (command line)`: from the socket inodes in `/proc/net/tcp{,6}` and the
/// descriptors in `/proc/<pid>/fd`. `None` when no running process owns one.
fn listening_process(addr: SocketAddr) -> Option<String> {
    let inodes = listening_socket_inodes(addr);
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

/// Inodes of the sockets in one `/proc/net/tcp*` table that listen where they compete with
/// `addr`: its port, on its address or where either address is unspecified.
fn listening_inodes(table: &str, addr: SocketAddr) -> Vec<String> {
    const LISTEN: &str = "0A";
    let wanted = canonical(addr.ip());
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local_ip, local_port) = fields.get(1)?.split_once(':')?;
            let state = fields.get(3)?;
            let inode = fields.get(9)?;
            let local_port = u16::from_str_radix(local_port, 16).ok()?;
            let local_ip = canonical(table_address(local_ip)?);
            let competes =
                local_ip == wanted || local_ip.is_unspecified() || wanted.is_unspecified();
            (local_port == addr.port() && *state == LISTEN && competes).then(|| inode.to_string())
        })
        .collect()
}

/// An address as `/proc/net/tcp{,6}` prints it: the 4 (IPv4) or 16 (IPv6) bytes as 32-bit
/// words in hexadecimal, each word in the host's byte order.
fn table_address(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| -> Option<[u8; 4]> {
        let text = hex.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(text, 16).ok()?.to_ne_bytes())
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
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
        assert!(!listening_inodes(&table, addr).is_empty());
        drop(held);
        ensure_free(addr).expect("a released port is free");
    }

    #[test]
    fn the_table_parser_reads_listening_sockets_only() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1\n   1: 0100007F:2384 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1\n";
        let at = |addr: &str| addr.parse::<SocketAddr>().expect("address");
        assert_eq!(
            listening_inodes(table, at("127.0.0.1:9092")),
            vec!["4242".to_string()]
        );
        assert!(listening_inodes(table, at("127.0.0.1:9093")).is_empty());
    }

    #[test]
    fn a_listener_on_another_address_of_the_same_port_does_not_compete() {
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let v4 = |ip: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(ip));
        // Brokers on 127.31.1.2 and 127.31.1.3 listen on 9092; 127.31.1.1:9092 is free.
        let table = format!(
            "{header}   0: {}:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 11 1\n   1: {}:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12 1\n",
            v4([127, 31, 1, 2]),
            v4([127, 31, 1, 3])
        );
        let at = |addr: &str| addr.parse::<SocketAddr>().expect("address");
        assert!(listening_inodes(&table, at("127.31.1.1:9092")).is_empty());
        assert_eq!(listening_inodes(&table, at("127.31.1.2:9092")), ["11"]);
        assert_eq!(listening_inodes(&table, at("0.0.0.0:9092")), ["11", "12"]);
        // A listener on every address competes with any one of them, IPv6's included.
        let any = format!(
            "{header}   0: {}:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 13 1\n",
            "0".repeat(32)
        );
        assert_eq!(listening_inodes(&any, at("127.31.1.1:9092")), ["13"]);
        // A real listener on another address of a port, found through /proc.
        let held = TcpListener::bind("127.0.0.2:0").expect("bind");
        let port = held.local_addr().expect("addr").port();
        assert!(listens(SocketAddr::from(([127, 0, 0, 2], port))));
        assert!(!listens(SocketAddr::from(([127, 0, 0, 3], port))));
    }
}
