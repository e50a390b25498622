//! The `KafkaClusterAssignments` mirror (`kafkaclusterassignments.kaas.io`, v1; the CRD is
//! `deploy/crds/kafkaclusterassignments.yaml`): the controller's current assignment as one
//! resource, so `kubectl get kafkaclusterassignments` shows it. Brokers never read it; they
//! follow `assignment.json` on the volume.
//!
//! Fire-and-forget: [`MirrorHandle::publish`] never blocks and never fails; one background
//! task server-side-applies the newest published assignment (field manager
//! `kaas-controller`, forced, so whichever controller leads owns the fields), retrying every
//! 2 s while the API server refuses, and skipping versions overtaken while it waited.

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_cluster::assignment::Assignment;
use kube::api::{Api, Patch, PatchParams};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::context::KubeContext;
use crate::error::{describe, request_error, KubeAdapterError};

/// The one mirror resource of a namespace.
pub const MIRROR_NAME: &str = "kaas";

/// The server-side-apply field manager of the mirror.
pub const FIELD_MANAGER: &str = "kaas-controller";

/// `spec` of a `KafkaClusterAssignments`: `assignment.json` in camelCase.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[kube(
    group = "kaas.io",
    version = "v1",
    kind = "KafkaClusterAssignments",
    plural = "kafkaclusterassignments",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct KafkaClusterAssignmentsSpec {
    /// The epoch of the controller that made the assignment.
    pub controller_epoch: u64,
    /// The assignment's version.
    pub assignment_version: u64,
    /// Every broker and where clients reach it.
    pub brokers: Vec<MirroredBroker>,
    /// Every topic: id and partition count.
    #[serde(default)]
    pub topics: BTreeMap<String, MirroredTopic>,
    /// Every partition's leader, by topic; entry `i` is partition `i`.
    #[serde(default)]
    pub partitions: BTreeMap<String, Vec<MirroredPartition>>,
    /// The broker coordinating each named consumer group.
    #[serde(default)]
    pub consumer_groups: BTreeMap<String, i32>,
}

/// A broker of the mirror.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MirroredBroker {
    /// Broker id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised Kafka port.
    pub port: u16,
}

/// A topic of the mirror.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MirroredTopic {
    /// Topic id (Kafka's 22-character text form).
    pub id: String,
    /// Partition count.
    pub partitions: i32,
}

/// A partition's leadership in the mirror.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MirroredPartition {
    /// The leading broker.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
}

impl From<&Assignment> for KafkaClusterAssignmentsSpec {
    fn from(assignment: &Assignment) -> Self {
        let file = assignment.to_file();
        Self {
            controller_epoch: file.controller_epoch,
            assignment_version: file.assignment_version,
            brokers: file
                .brokers
                .into_iter()
                .map(|b| MirroredBroker {
                    id: b.id,
                    host: b.host,
                    port: b.port,
                })
                .collect(),
            topics: file
                .topics
                .into_iter()
                .map(|(name, t)| {
                    let topic = MirroredTopic {
                        id: t.id,
                        partitions: t.partitions,
                    };
                    (name, topic)
                })
                .collect(),
            partitions: file
                .partitions
                .into_iter()
                .map(|(name, leaders)| {
                    let leaders = leaders
                        .into_iter()
                        .map(|p| MirroredPartition {
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                        })
                        .collect();
                    (name, leaders)
                })
                .collect(),
            consumer_groups: file.consumer_groups,
        }
    }
}

/// Writes the mirror resource.
#[derive(Clone)]
pub struct AssignmentMirror {
    api: Api<KafkaClusterAssignments>,
    namespace: String,
}

impl AssignmentMirror {
    /// The mirror [`MIRROR_NAME`] of the context's namespace.
    pub fn new(context: &KubeContext) -> Self {
        Self {
            api: Api::namespaced(context.client.clone(), &context.namespace),
            namespace: context.namespace.clone(),
        }
    }

    /// Server-side-applies `assignment` to the mirror and waits for the answer.
    pub async fn apply(&self, assignment: &Assignment) -> Result<(), KubeAdapterError> {
        let resource = KafkaClusterAssignments::new(MIRROR_NAME, assignment.into());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api
            .patch(MIRROR_NAME, &params, &Patch::Apply(&resource))
            .await
            .map_err(request_error(
                "apply",
                describe(
                    "kafkaclusterassignments.kaas.io",
                    Some(MIRROR_NAME),
                    &self.namespace,
                ),
            ))?;
        Ok(())
    }

    /// Starts the background task (on the current tokio runtime) that keeps the mirror at
    /// the newest published assignment. The task ends when the handle is dropped.
    pub fn start(self) -> MirrorHandle {
        let (sender, mut receiver) = watch::channel::<Option<Assignment>>(None);
        tokio::spawn(async move {
            while receiver.changed().await.is_ok() {
                loop {
                    let Some(latest) = receiver.borrow_and_update().clone() else {
                        break;
                    };
                    match self.apply(&latest).await {
                        Ok(()) => break,
                        Err(error) => {
                            tracing::warn!(%error, version = latest.version().0,
                                "assignment mirror not written; retrying in 2 s");
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                                changed = receiver.changed() => if changed.is_err() { return },
                            }
                        }
                    }
                }
            }
        });
        MirrorHandle { sender }
    }
}

/// Publishes assignments to the mirror task.
pub struct MirrorHandle {
    sender: watch::Sender<Option<Assignment>>,
}

impl MirrorHandle {
    /// Hands `assignment` to the mirror task; returns at once. A newer publish before the
    /// task gets to it replaces it.
    pub fn publish(&self, assignment: &Assignment) {
        self.sender.send_replace(Some(assignment.clone()));
    }
}
