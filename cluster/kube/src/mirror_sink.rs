//! The cluster core's [`MirrorSink`]: [`AssignmentMirror`]'s background task, started on the
//! core's runtime. Each written assignment is handed to it and applied to the
//! `KafkaClusterAssignments` resource fire-and-forget (newest wins, failures logged and
//! retried by the task).

use kaas_cluster::assignment::Assignment;
use kaas_cluster_core::MirrorSink;

use crate::assignment_mirror::{AssignmentMirror, MirrorHandle};
use crate::context::SharedContext;

/// The mirror of one namespace.
pub struct AssignmentMirrorSink {
    context: SharedContext,
    handle: Option<MirrorHandle>,
}

impl AssignmentMirrorSink {
    /// Mirrors into `context`'s namespace once started.
    pub fn new(context: SharedContext) -> Self {
        AssignmentMirrorSink {
            context,
            handle: None,
        }
    }
}

impl MirrorSink for AssignmentMirrorSink {
    fn start(&mut self) {
        match self.context.get() {
            Ok(context) => self.handle = Some(AssignmentMirror::new(&context).start()),
            Err(error) => {
                tracing::error!(%error, "no Kubernetes client: assignments are not mirrored");
            }
        }
    }

    fn publish(&mut self, assignment: &Assignment) {
        if let Some(handle) = &self.handle {
            handle.publish(assignment);
        }
    }
}
