//! Starting the cluster core (`--assignment-source kube`, the default in cluster mode)
//! beside the shards: its sources, the Kubernetes adapters, and the broker's hooks (this
//! broker's endpoint, the assignment it applied, the partitions it found fenced, the follower
//! nudge and epoch fence, the KafkaTopic service its topic changes go to).

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_core::{BoxFuture, BrokerHooks, ClusterCore, CoreOptions, Sources};
use kaas_cluster_kube::lease_campaign::CampaignOptions;
use kaas_cluster_kube::startup_probe::probe_blocking;
use kaas_cluster_kube::{kube_sources, KubeEnvironment, SharedContext};
use kaas_net::runtime::server::{cluster_dir, Broker};
use kaas_net::shard::config::BrokerConfig;

use crate::cli::{AssignmentSource, Cli};

/// What the cluster core runs on Kubernetes: its sources and the one client context they
/// share with the KafkaTopic service (one configuration inference, one connection pool).
pub struct KubeCore {
    sources: Sources,
    context: SharedContext,
}

/// The cluster core's Kubernetes side, or `None` when this broker does not run one
/// (standalone, or `--assignment-source file`). Checked before the broker starts, so a broker that cannot
/// reach Kubernetes (no configuration, no API server, a missing RBAC rule or CRD) never
/// serves: the error names the verb and the resource that failed.
pub fn sources(
    cli: &Cli,
    config: &BrokerConfig,
    pod_name: Option<&str>,
) -> anyhow::Result<Option<KubeCore>> {
    let (Some(_), Some(pod_name)) = (&config.cluster, pod_name) else {
        return Ok(None);
    };
    match cli.assignment_source {
        AssignmentSource::File => Ok(None),
        AssignmentSource::Kube => {
            let environment = KubeEnvironment::infer_blocking().map_err(|error| {
                anyhow!("--assignment-source kube: {error} (use --assignment-source file to follow assignment.json alone)")
            })?;
            probe_blocking(&environment, &cli.service_name).map_err(|error| {
                anyhow!(
                    "--assignment-source kube: {error} (the broker needs the API server, the \
                     CRDs of deploy/crds and the RBAC rules of deploy/)"
                )
            })?;
            let campaign = CampaignOptions::new(
                pod_name,
                Duration::from_millis(cli.lease_duration_ms),
                Duration::from_millis(cli.lease_renew_period_ms),
            );
            let context = SharedContext::from_environment(environment);
            Ok(Some(KubeCore {
                sources: kube_sources(context.clone(), campaign, &cli.service_name),
                context,
            }))
        }
    }
}

/// Starts the cluster core for the running `broker`.
pub fn start(
    cli: &Cli,
    config: &BrokerConfig,
    broker: &Broker,
    kube: KubeCore,
) -> anyhow::Result<ClusterCore> {
    let KubeCore { sources, context } = kube;
    let (Some(cluster), Some(data_dir)) = (&config.cluster, &config.data_dir) else {
        bail!("the cluster core runs only in cluster mode, on a data directory");
    };
    let port = u16::try_from(config.advertised_port)
        .with_context(|| format!("advertised port {}", config.advertised_port))?;
    let view = broker.view_source();
    let nudger = broker.assignment_nudger();
    let fence_reports = broker.fence_reports();
    let fence = nudger.clone();
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
        // Partitions a newer claim fences: the controller gives them a fresh leader epoch.
        fenced: Box::new(move || {
            fence_reports
                .as_ref()
                .map(|reports| reports.list())
                .unwrap_or_default()
        }),
        on_assignment_changed: Box::new(move || {
            if let Some(nudger) = &nudger {
                nudger.nudge();
            }
        }),
        // The Lease's epoch and the push's: the follower refuses older controllers' files.
        observe_epoch: Box::new(move |epoch| {
            if let Some(fence) = &fence {
                fence.observe_epoch(epoch);
            }
        }),
        // This broker's topic changes become KafkaTopic changes, on the core's runtime and
        // the sources' client.
        tasks: broker
            .serve_topic_changes()
            .map(|requests| {
                Box::pin(kaas_cluster_kube::topic_requests::serve_shared(
                    context, requests,
                )) as BoxFuture
            })
            .into_iter()
            .collect(),
    };
    let options = CoreOptions::new(
        &cluster_dir(data_dir),
        cli.heartbeat_listen,
        &cli.heartbeat_host(&config.advertised_host),
    );
    ClusterCore::spawn(options, sources, hooks).context("starting the cluster core")
}
