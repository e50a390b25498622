//! Property: the coordinator chosen for a group the assignment does not name is one of the
//! brokers, does not depend on the order they are listed in, and stays put when brokers come
//! and go unless its own broker left; the only other move is to a broker that just joined.

use std::collections::BTreeSet;

use kaas_cluster::ids::{BrokerId, GroupId};
use kaas_cluster::placement::fallback_coordinator;
use proptest::prelude::*;

fn brokers() -> impl Strategy<Value = BTreeSet<i32>> {
    prop::collection::btree_set(0i32..24, 1..10)
}

fn ids(set: &BTreeSet<i32>) -> Vec<BrokerId> {
    set.iter().map(|id| BrokerId(*id)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn choice_stays_put_unless_its_broker_left(group in ".{0,24}", before in brokers(), after in brokers()) {
        let group = GroupId::new(&group);
        let chosen = fallback_coordinator(&group, ids(&before)).expect("brokers exist");
        prop_assert!(before.contains(&chosen.0));
        let mut reversed = ids(&before);
        reversed.reverse();
        prop_assert_eq!(fallback_coordinator(&group, reversed), Some(chosen));

        let now = fallback_coordinator(&group, ids(&after)).expect("brokers exist");
        if after.contains(&chosen.0) {
            prop_assert!(now == chosen || !before.contains(&now.0),
                "moved from {:?} to {:?}, which was there all along", chosen, now);
            if after.is_subset(&before) {
                prop_assert_eq!(now, chosen, "only other brokers left, yet the group moved");
            }
        }
    }
}
