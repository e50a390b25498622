//! Which brokers are alive, the set the balancer spreads over.
//!
//! `alive = EndpointSlice-ready ∩ heartbeat-connected`: a broker must be both a ready pod
//! (Kubernetes' view: running, not terminating, passing its probe) and talking to this
//! controller (its own view). The one exception is the **fallback**: while that intersection
//! is empty, `alive` is the connected set alone. That is the case exactly while no
//! EndpointSlice has been seen yet, or while none of its ready brokers has dialed in to this
//! controller (a controller elected mid-rollout, or pods whose readiness waits for an
//! assignment). The fallback ends the moment one broker is both ready and connected, and
//! comes back only if that intersection empties again. If no broker is connected at all,
//! `alive` is empty and the controller computes nothing.

use std::collections::{BTreeMap, BTreeSet};

use crate::assignment::BrokerEndpoint;
use crate::ids::BrokerId;

/// The alive brokers with their endpoints, and whether the fallback decided it.
pub fn alive_set(
    ready: Option<&BTreeSet<BrokerId>>,
    connected: BTreeMap<BrokerId, BrokerEndpoint>,
) -> (BTreeMap<BrokerId, BrokerEndpoint>, bool) {
    let both: BTreeMap<BrokerId, BrokerEndpoint> = match ready {
        Some(ready) => connected
            .iter()
            .filter(|(id, _)| ready.contains(id))
            .map(|(id, e)| (*id, e.clone()))
            .collect(),
        None => BTreeMap::new(),
    };
    if both.is_empty() {
        (connected, true)
    } else {
        (both, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connected(ids: &[i32]) -> BTreeMap<BrokerId, BrokerEndpoint> {
        ids.iter()
            .map(|id| {
                let endpoint = BrokerEndpoint {
                    id: BrokerId(*id),
                    host: "h".into(),
                    port: 1,
                };
                (BrokerId(*id), endpoint)
            })
            .collect()
    }

    fn ids(set: &BTreeMap<BrokerId, BrokerEndpoint>) -> Vec<i32> {
        set.keys().map(|b| b.0).collect()
    }

    #[test]
    fn intersection_unless_it_is_empty() {
        let ready: BTreeSet<BrokerId> = [BrokerId(0), BrokerId(1)].into();
        let (alive, fallback) = alive_set(Some(&ready), connected(&[1, 2]));
        assert_eq!((ids(&alive), fallback), (vec![1], false));
        let (alive, fallback) = alive_set(None, connected(&[1, 2]));
        assert_eq!((ids(&alive), fallback), (vec![1, 2], true));
        let (alive, fallback) = alive_set(Some(&ready), connected(&[2]));
        assert_eq!((ids(&alive), fallback), (vec![2], true));
        let (alive, _) = alive_set(Some(&ready), connected(&[]));
        assert!(alive.is_empty());
    }
}
