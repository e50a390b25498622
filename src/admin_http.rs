//! The admin HTTP endpoint: `GET /healthz` (JSON), `GET /readyz` (200 once this broker serves
//! what it should: standalone at once; in cluster mode once an assignment is applied and every
//! partition it leads is open, else 503; from then on for as long as the process runs) and
//! `GET /metrics` (Prometheus text).
//!
//! A plain blocking server on its own thread: it never touches partition files, only the
//! shards' counters and the cluster view, and it answers one short request per connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kaas_net::model::cluster_view::ClusterView;
use kaas_net::shard::metrics::{self, ShardMetrics};

/// What the endpoint reports from.
pub struct AdminState {
    /// Every shard's counters.
    pub metrics: Vec<Arc<ShardMetrics>>,
    /// Reads the current cluster view.
    pub view: Box<dyn Fn() -> Arc<ClusterView> + Send + Sync>,
    /// Set once `/readyz` has answered ready.
    pub was_ready: AtomicBool,
}

/// Binds `addr` and serves it on a new thread.
pub fn spawn(addr: SocketAddr, state: AdminState) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("kaas-admin-http".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(error) = answer(stream, &state) {
                    tracing::debug!(%error, "admin request failed");
                }
            }
        })?;
    Ok(bound)
}

fn answer(stream: TcpStream, state: &AdminState) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?.take(8192));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, content_type, body) = match (method, path) {
        ("GET", "/healthz") => ("200 OK", "application/json", health(state)),
        ("GET", "/readyz") => match readiness(state) {
            Ok(()) => ("200 OK", "text/plain", "ready\n".to_string()),
            Err(why) => ("503 Service Unavailable", "text/plain", why),
        },
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4",
            metrics::render(&state.metrics),
        ),
        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// Kubernetes readiness: a cluster broker is ready once it has applied an assignment and
/// opened every partition that assignment gives it (a broker given none is ready, so a new
/// pod joins the alive set and is then given its share). Once ready it stays ready: the
/// controller counts only ready brokers alive, so a broker that turned not ready while it
/// opens what a later assignment gives it (seconds for thousands of partitions) would be
/// given away again mid-takeover, and its partitions moved once more.
fn readiness(state: &AdminState) -> Result<(), String> {
    if state.was_ready.load(Ordering::Relaxed) {
        return Ok(());
    }
    let ready = first_readiness(state);
    if ready.is_ok() {
        state.was_ready.store(true, Ordering::Relaxed);
    }
    ready
}

/// Whether this broker is ready for the first time (see [`readiness`]).
fn first_readiness(state: &AdminState) -> Result<(), String> {
    let view = (state.view)();
    if !view.is_cluster() {
        // A standalone broker opens its partitions before it listens.
        return Ok(());
    }
    let Some(cluster) = &view.cluster else {
        return Err("no assignment applied yet\n".to_string());
    };
    let led = cluster.partitions_led_by(cluster.this_broker()).len() as i64;
    let open: i64 = state.metrics.iter().map(|m| m.partitions_open()).sum();
    if open < led {
        return Err(format!(
            "assignment {} applied; {open} of {led} led partitions open\n",
            cluster.assignment_version().0
        ));
    }
    Ok(())
}

fn health(state: &AdminState) -> String {
    let view = (state.view)();
    let partitions_open: i64 = state.metrics.iter().map(|m| m.partitions_open()).sum();
    // Cluster mode: what the followed assignment gives this broker, and which assignment
    // that is (`null` before the first one is accepted).
    let (partitions_led, cluster) = match &view.cluster {
        // A standalone broker's own assignment leads everything; its health says no more.
        Some(cluster) if !view.is_cluster() => (
            cluster.partitions_led_by(cluster.this_broker()).len() as i64,
            String::new(),
        ),
        Some(cluster) => (
            cluster.partitions_led_by(cluster.this_broker()).len() as i64,
            format!(
                ",\"broker_id\":{},\"controller_epoch\":{},\"assignment_version\":{}",
                cluster.this_broker().0,
                cluster.controller_epoch().0,
                cluster.assignment_version().0
            ),
        ),
        None => (
            0,
            ",\"controller_epoch\":null,\"assignment_version\":null".to_string(),
        ),
    };
    format!(
        "{{\"status\":\"ok\",\"cluster_id\":\"{}\",\"topics\":{},\"partitions_led\":{partitions_led},\"partitions_open\":{partitions_open},\"shards\":{}{cluster}}}\n",
        view.cluster_id,
        view.topics.len(),
        state.metrics.len()
    )
}
