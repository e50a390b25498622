//! The cluster core's [`Sources`] from Kubernetes: the Lease campaign, the EndpointSlice and
//! KafkaTopic watches and the assignment mirror, sharing one client made on the core's
//! runtime.

use kaas_cluster_core::Sources;

use crate::context::SharedContext;
use crate::endpoint_watch::EndpointWatch;
use crate::lease_campaign::{CampaignOptions, LeaseCampaign};
use crate::mirror_sink::AssignmentMirrorSink;
use crate::topic_watch::TopicWatch;

/// Every source of the core, in `context`'s namespace, reading the EndpointSlices of
/// `service`.
pub fn kube_sources(context: SharedContext, campaign: CampaignOptions, service: &str) -> Sources {
    Sources {
        lease: Box::new(LeaseCampaign::new(context.clone(), campaign)),
        endpoints: Box::new(EndpointWatch::new(context.clone(), service)),
        topics: Box::new(TopicWatch::new(context.clone())),
        mirror: Some(Box::new(AssignmentMirrorSink::new(context))),
    }
}
