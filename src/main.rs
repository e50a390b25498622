//! `kaas`: start-up and shut-down wiring only; everything else lives in the crates.

mod admin_http;
mod cleaner_flags;
mod cli;
mod cluster_core;
mod group_flags;
mod startup_checks;
mod transaction_flags;

use anyhow::{bail, Context};
use clap::Parser;
use kaas_net::runtime::server::Broker;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    // A panicking shard would leave a broker that accepts connections but never answers for
    // that shard's partitions. Crash instead: recovery from the files is what restarts are for.
    let report_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report_panic(info);
        eprintln!("kaas: a thread panicked; aborting so that a restart recovers from disk");
        std::process::abort();
    }));
    let cli = cli::Cli::parse();
    // A pod name means a broker of a cluster (a StatefulSet pod): never run standalone on a
    // volume other brokers share.
    let pod_name = match std::env::var("MY_POD_NAME") {
        Ok(name) => Some(name),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => bail!("MY_POD_NAME is not valid UTF-8"),
    };
    let config = match cli.broker_config(pod_name.as_deref()) {
        Ok(config) => config,
        Err(reason) => bail!(reason),
    };
    let core_sources = cluster_core::sources(&cli, &config, pod_name.as_deref())?;
    // Environment problems (seccomp, memlock, no O_DIRECT, an unshared volume) are found here,
    // before any shard exists, and each exits with its own code and a paragraph saying why.
    if let Err(refusal) = startup_checks::run(&config) {
        eprintln!("{}", refusal.message);
        std::process::exit(refusal.code as i32);
    }
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    let broker = Broker::start(config.clone()).context("starting the broker")?;
    let core = match core_sources {
        Some(sources) => Some(cluster_core::start(&cli, &config, &broker, sources)?),
        None => None,
    };
    let view_source = broker.view_source();
    let admin = admin_http::spawn(
        cli.admin_listen,
        admin_http::AdminState {
            metrics: broker.metrics(),
            view: Box::new(move || view_source.load()),
            was_ready: Default::default(),
        },
    )
    .with_context(|| format!("binding the admin endpoint {}", cli.admin_listen))?;
    tracing::info!(
        kafka = %config.listen,
        admin = %admin,
        shards = config.shards,
        cluster_broker = config.cluster.as_ref().map(|c| c.broker_id),
        data_dir = ?config.data_dir,
        "kaas is ready"
    );
    if let Some(signal) = signals.forever().next() {
        tracing::info!(signal, "shutting down: flushing every partition");
    }
    // The Lease goes first, so another broker takes over as controller while this one
    // flushes.
    if let Some(core) = core {
        core.shutdown();
    }
    broker.stop();
    tracing::info!("stopped");
    Ok(())
}
