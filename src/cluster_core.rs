//! Starting the cluster core (`--assignment-source kube`) beside the shards: its sources,
//! and the broker's hooks (this broker's endpoint, the assignment it applied, the follower
//! nudge, the KafkaTopic service its topic changes go to).

use anyhow::{bail, Context};
use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_core::{BoxFuture, BrokerHooks, ClusterCore, CoreOptions, Sources};
use kaas_net::broker::config::BrokerConfig;
use kaas_net::broker::server::{cluster_dir, Broker};

use crate::cli::{AssignmentSource, Cli};

/// The sources of the cluster core, or `None` when this broker does not run one (standalone,
/// or `--assignment-source file`). Checked before the broker starts, so a broker that cannot
/// run its source never serves.
pub fn sources(cli: &Cli, config: &BrokerConfig) -> anyhow::Result<Option<Sources>> {
    if config.cluster.is_none() {
        return Ok(None);
    }
    match cli.assignment_source {
        AssignmentSource::File => Ok(None),
        AssignmentSource::Kube => bail!(
            "--assignment-source kube needs the Kubernetes Lease, EndpointSlice and KafkaTopic \
             adapters, which this build does not include yet; use --assignment-source file"
        ),
    }
}

/// Starts the cluster core for the running `broker`.
pub fn start(
    cli: &Cli,
    config: &BrokerConfig,
    broker: &Broker,
    sources: Sources,
) -> anyhow::Result<ClusterCore> {
    let (Some(cluster), Some(data_dir)) = (&config.cluster, &config.data_dir) else {
        bail!("the cluster core runs only in cluster mode, on a data directory");
    };
    let port = u16::try_from(config.advertised_port)
        .with_context(|| format!("advertised port {}", config.advertised_port))?;
    let view = broker.view_source();
    let nudger = broker.assignment_nudger();
    let hooks = BrokerHooks {
        endpoint: BrokerEndpoint {
            id: BrokerId(cluster.broker_id),
            host: config.advertised_host.clone(),
            port,
        },
        applied: Box::new(move || {
            view.load()
                .cluster
                .as_ref()
                .map(|applied| (applied.controller_epoch(), applied.assignment_version()))
        }),
        on_assignment_changed: Box::new(move || {
            if let Some(nudger) = &nudger {
                nudger.nudge();
            }
        }),
        // This broker's topic changes become KafkaTopic changes, on the core's runtime.
        tasks: broker
            .serve_topic_changes()
            .map(|requests| {
                Box::pin(kaas_cluster_kube::topic_requests::serve_from_environment(
                    requests,
                )) as BoxFuture
            })
            .into_iter()
            .collect(),
    };
    let options = CoreOptions::new(
        &cluster_dir(data_dir),
        cli.heartbeat_listen,
        &config.advertised_host,
    );
    ClusterCore::spawn(options, sources, hooks).context("starting the cluster core")
}
