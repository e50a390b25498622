use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;
use crate::assignment::{Assignment, BrokerEndpoint};
use crate::balancer::EpochRange;
use crate::ids::{AssignmentVersion, LeaderEpoch, TopicId, TopicPartition};

fn topics(specs: &[(&str, i32)]) -> BTreeMap<TopicName, TopicInfo> {
    specs
        .iter()
        .enumerate()
        .map(|(index, (name, partitions))| {
            let name = TopicName::new(name).expect("legal");
            let mut id = [0u8; 16];
            id[0] = 1 + index as u8;
            id[15] = 7;
            let info = TopicInfo {
                name: name.clone(),
                id: TopicId(id),
                partitions: *partitions,
                configs: BTreeMap::new(),
            };
            (name, info)
        })
        .collect()
}

fn endpoint(broker: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id: BrokerId(broker),
        host: format!("10.0.0.{broker}"),
        port: 9092,
    }
}

fn ping(broker: i32, applied: Option<(u64, u64)>) -> Input {
    Input::Heartbeat(Heartbeat {
        broker: endpoint(broker),
        applied_version: applied.map(|(_, v)| AssignmentVersion(v)),
        applied_epoch: applied.map(|(e, _)| ControllerEpoch(e)),
        fenced: Vec::new(),
    })
}

fn ready(ids: &[i32]) -> Input {
    Input::EndpointsReady(ids.iter().map(|id| BrokerId(*id)).collect())
}

fn writes(actions: &[Action]) -> Vec<Arc<Assignment>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::WriteAssignment { assignment, .. } => Some(assignment.clone()),
            _ => None,
        })
        .collect()
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(TopicName::new(topic).expect("legal"), partition)
}

/// A controller driven through a win at `epoch` with brokers 0..3 connected and ready, and
/// its first write's assignment.
struct Harness {
    controller: Controller,
    now: u64,
}

impl Harness {
    fn new() -> Self {
        Harness {
            controller: Controller::new(ControllerConfig::default()),
            now: 1_000,
        }
    }

    fn at(&mut self, ms: u64, input: Input) -> Vec<Action> {
        self.now = ms;
        self.controller.step(MonotonicMillis(ms), input)
    }

    fn feed(&mut self, input: Input) -> Vec<Action> {
        self.controller.step(MonotonicMillis(self.now), input)
    }

    fn win(&mut self, epoch: u64, volume: Option<Arc<Assignment>>) -> Arc<Assignment> {
        for broker in 0..3 {
            self.feed(ping(broker, None));
        }
        self.feed(Input::TopicsChanged(topics(&[("orders", 6)])));
        let deadline = MonotonicMillis(self.now + 10_000);
        let actions = self.feed(Input::LeaseAcquired {
            epoch: ControllerEpoch(epoch),
            renew_deadline: deadline,
            expired_holder: None,
        });
        assert_eq!(actions, [Action::ReadVolume]);
        let actions = self.feed(Input::VolumeRead {
            recorded_epoch: None,
            assignment: volume,
        });
        assert_eq!(actions, [Action::RecordEpoch(ControllerEpoch(epoch))]);
        assert!(writes(&self.feed(ready(&[0, 1, 2]))).is_empty());
        let actions = self.feed(Input::EpochRecorded(ControllerEpoch(epoch)));
        let written = writes(&actions);
        assert_eq!(written.len(), 1, "{actions:?}");
        written[0].clone()
    }
}

#[test]
fn a_win_records_the_epoch_before_writing_and_writes_at_once_when_every_ready_broker_is_here() {
    let mut harness = Harness::new();
    let first = harness.win(4, None);
    assert_eq!(first.controller_epoch(), ControllerEpoch(4));
    assert_eq!(first.version(), AssignmentVersion(1));
    assert_eq!(first.brokers().len(), 3);
    assert_eq!(harness.controller.leading_epoch(), Some(ControllerEpoch(4)));
    let done = harness.feed(Input::AssignmentWritten {
        version: AssignmentVersion(1),
    });
    assert_eq!(
        done,
        [
            Action::PushAssignmentChanged {
                epoch: ControllerEpoch(4),
                version: AssignmentVersion(1)
            },
            Action::MirrorAssignment(first.clone())
        ]
    );
    // Nothing changed: nothing more to write.
    assert!(writes(&harness.feed(Input::Tick)).is_empty());
}

#[test]
fn refuses_an_epoch_not_above_the_volumes_or_its_own() {
    let mut harness = Harness::new();
    let old = harness.win(5, None);
    let mut fresh = Controller::new(ControllerConfig::default());
    let now = MonotonicMillis(1);
    let acquire = |epoch| Input::LeaseAcquired {
        epoch: ControllerEpoch(epoch),
        renew_deadline: MonotonicMillis(10_000),
        expired_holder: None,
    };
    assert_eq!(fresh.step(now, acquire(5)), [Action::ReadVolume]);
    let read = Input::VolumeRead {
        recorded_epoch: Some(ControllerEpoch(3)),
        assignment: Some(old),
    };
    assert_eq!(
        fresh.step(now, read),
        [Action::EpochRefused {
            offered: ControllerEpoch(5),
            highest: ControllerEpoch(5)
        }]
    );
    assert_eq!(fresh.step(now, acquire(7)), [Action::ReadVolume]);
    let read = Input::VolumeRead {
        recorded_epoch: Some(ControllerEpoch(9)),
        assignment: None,
    };
    assert!(matches!(
        fresh.step(now, read)[..],
        [Action::EpochRefused { .. }]
    ));
    // Its own highest epoch counts too, even when the Lease hands it back.
    assert!(matches!(
        fresh.step(now, acquire(7))[..],
        [Action::EpochRefused { .. }]
    ));
}

#[test]
fn waits_for_topics_and_for_missing_ready_brokers_until_the_grace_ends() {
    let mut controller = Controller::new(ControllerConfig::default());
    let at = |ms| MonotonicMillis(ms);
    controller.step(at(0), ping(0, None));
    controller.step(at(0), ready(&[0, 1]));
    controller.step(
        at(0),
        Input::LeaseAcquired {
            epoch: ControllerEpoch(1),
            renew_deadline: at(60_000),
            expired_holder: None,
        },
    );
    controller.step(
        at(0),
        Input::VolumeRead {
            recorded_epoch: None,
            assignment: None,
        },
    );
    assert!(writes(&controller.step(at(0), Input::EpochRecorded(ControllerEpoch(1)))).is_empty());
    assert!(writes(&controller.step(at(10), Input::TopicsChanged(topics(&[("t", 2)])))).is_empty());
    controller.step(at(1_000), ping(0, None));
    assert!(writes(&controller.step(at(1_999), Input::Tick)).is_empty());
    let written = writes(&controller.step(at(2_000), Input::Tick));
    assert_eq!(written.len(), 1);
    assert_eq!(
        written[0].brokers().keys().copied().collect::<Vec<_>>(),
        [BrokerId(0)]
    );
}

#[test]
fn the_holder_whose_expired_lease_was_taken_over_is_not_waited_for() {
    // Brokers 1 and 2 are here; broker 0, the old controller, stopped renewing but the
    // EndpointSlice still calls it ready.
    let first_write_at = |expired_holder: Option<BrokerId>| {
        let mut controller = Controller::new(ControllerConfig::default());
        let at = |ms| MonotonicMillis(ms);
        controller.step(at(0), ping(1, None));
        controller.step(at(0), ping(2, None));
        controller.step(at(0), ready(&[0, 1, 2]));
        controller.step(at(0), Input::TopicsChanged(topics(&[("t", 3)])));
        controller.step(
            at(0),
            Input::LeaseAcquired {
                epoch: ControllerEpoch(2),
                renew_deadline: at(60_000),
                expired_holder,
            },
        );
        controller.step(
            at(5),
            Input::VolumeRead {
                recorded_epoch: Some(ControllerEpoch(1)),
                assignment: None,
            },
        );
        let mut written =
            writes(&controller.step(at(10), Input::EpochRecorded(ControllerEpoch(2))));
        let mut now = if written.is_empty() { 0 } else { 10 };
        while written.is_empty() && now < 5_000 {
            now += 100;
            written = writes(&controller.step(at(now), Input::Tick));
        }
        let brokers: Vec<i32> = written[0].brokers().keys().map(|b| b.0).collect();
        (now, brokers)
    };
    assert_eq!(first_write_at(Some(BrokerId(0))), (10, vec![1, 2]));
    // Not knowing who held it, the controller waits out the grace for broker 0.
    assert_eq!(first_write_at(None), (2_000, vec![1, 2]));
    // Any other broker still missing is waited for.
    assert_eq!(first_write_at(Some(BrokerId(7))), (2_000, vec![1, 2]));
}

#[test]
fn versions_continue_from_the_volume_and_from_what_brokers_applied() {
    let mut first = Harness::new();
    let old = first.win(1, None);
    let mut harness = Harness::new();
    harness.feed(ping(2, Some((1, 40))));
    let next = harness.win(2, Some(old));
    assert_eq!(next.version(), AssignmentVersion(41));
}

#[test]
fn a_closed_stream_is_a_departure_at_once_and_silence_ages_a_broker_out() {
    let mut harness = Harness::new();
    let first = harness.win(1, None);
    let lost: Vec<_> = first
        .partitions()
        .filter(|(_, l)| l.leader == BrokerId(2))
        .collect();
    let actions = harness.feed(Input::StreamClosed {
        broker: BrokerId(2),
    });
    let second = writes(&actions);
    assert_eq!(second.len(), 1);
    assert!(!second[0].brokers().contains_key(&BrokerId(2)));
    for (partition, before) in lost {
        let after = second[0].leader(&partition).expect("kept");
        assert!(after.leader_epoch > before.leader_epoch);
    }
    // Broker 1 goes silent: gone once its last ping is older than the age-out period.
    let start = harness.now;
    harness.at(start + 2_000, ping(0, None));
    assert!(writes(&harness.at(start + 3_000, Input::Tick)).is_empty());
    let third = writes(&harness.at(start + 3_001, Input::Tick));
    assert_eq!(
        third[0].brokers().keys().copied().collect::<Vec<_>>(),
        [BrokerId(0)]
    );
    // Broker 0 too: no broker left, and no assignment computed.
    assert!(writes(&harness.at(start + 10_000, Input::Tick)).is_empty());
}

#[test]
fn a_wake_at_the_named_time_acts_on_an_age_out_at_once_and_retries_nothing() {
    let mut harness = Harness::new();
    let first = harness.win(1, None);
    let start = harness.now;
    harness.at(start + 1_000, ping(0, None));
    harness.at(start + 1_500, ping(1, None));
    // Broker 2 pinged last at `start`: it is the next to age out.
    assert_eq!(
        harness.controller.next_wake(),
        Some(MonotonicMillis(start + 3_001))
    );
    assert_eq!(
        harness.controller.connected(),
        [BrokerId(0), BrokerId(1), BrokerId(2)].into()
    );
    // A failed write waits for a tick; a wake does not retry it.
    harness.feed(Input::AssignmentNotWritten {
        version: first.version(),
    });
    assert!(writes(&harness.at(start + 3_000, Input::Wake)).is_empty());
    let second = writes(&harness.at(start + 3_001, Input::Wake));
    assert_eq!(second.len(), 1);
    assert_eq!(
        second[0].brokers().keys().copied().collect::<Vec<_>>(),
        [BrokerId(0), BrokerId(1)]
    );
    assert_eq!(
        harness.controller.connected(),
        [BrokerId(0), BrokerId(1)].into()
    );
    assert_eq!(
        harness.controller.next_wake(),
        Some(MonotonicMillis(start + 4_001))
    );
    harness.at(start + 4_001, Input::Wake);
    assert_eq!(
        harness.controller.next_wake(),
        Some(MonotonicMillis(start + 4_501))
    );
}

#[test]
fn the_fallback_is_the_connected_set_while_no_ready_broker_is_connected() {
    let mut controller = Controller::new(ControllerConfig::default());
    let now = MonotonicMillis(5);
    controller.step(now, ping(0, None));
    controller.step(now, ping(1, None));
    let ids = |c: &Controller| {
        let (alive, fallback) = c.alive();
        (alive.keys().map(|b| b.0).collect::<Vec<_>>(), fallback)
    };
    assert_eq!(ids(&controller), (vec![0, 1], true));
    controller.step(now, ready(&[2]));
    assert_eq!(ids(&controller), (vec![0, 1], true));
    controller.step(now, ready(&[1, 2]));
    assert_eq!(ids(&controller), (vec![1], false));
}

#[test]
fn stops_writing_past_the_deadline_and_resumes_after_a_renewal() {
    let mut harness = Harness::new();
    harness.win(1, None);
    let deadline = harness.now + 10_000;
    // Past the deadline the brokers still ping, and one leaves: nothing is written.
    for broker in 0..3 {
        assert!(writes(&harness.at(deadline, ping(broker, None))).is_empty());
    }
    let actions = harness.at(
        deadline,
        Input::StreamClosed {
            broker: BrokerId(1),
        },
    );
    assert!(writes(&actions).is_empty());
    let actions = harness.feed(Input::LeaseRenewed {
        renew_deadline: MonotonicMillis(deadline + 10_000),
    });
    let written = writes(&actions);
    assert_eq!(written.len(), 1);
    assert!(matches!(
        actions.iter().find(|a| matches!(a, Action::WriteAssignment { .. })),
        Some(Action::WriteAssignment { not_after, .. }) if not_after.0 == deadline + 10_000
    ));
}

#[test]
fn a_newer_epoch_in_a_heartbeat_or_on_the_volume_deposes_it() {
    let mut harness = Harness::new();
    harness.win(3, None);
    let actions = harness.feed(ping(1, Some((4, 1))));
    assert_eq!(
        actions,
        [
            Action::SteppedDown {
                epoch: ControllerEpoch(3),
                reason: StepDownReason::NewerController(ControllerEpoch(4))
            },
            Action::ReleaseLease {
                epoch: ControllerEpoch(3)
            }
        ]
    );
    assert_eq!(harness.controller.leading_epoch(), None);

    let mut harness = Harness::new();
    harness.win(3, None);
    let actions = harness.feed(Input::VolumeRead {
        recorded_epoch: Some(ControllerEpoch(6)),
        assignment: None,
    });
    assert!(matches!(actions[0], Action::SteppedDown { .. }));
}

#[test]
fn a_stale_controllers_file_on_the_volume_gets_fresh_epochs_and_is_overwritten() {
    // Controller 1 leads; controller 2 wins from its file; then controller 1, deposed, writes
    // one more file that moves a partition at an epoch above the one controller 2 kept.
    let mut one = Harness::new();
    let base = one.win(1, None);
    let mut two = Harness::new();
    let kept = two.win(2, Some(base.clone()));
    let moved = writes(&one.feed(Input::StreamClosed {
        broker: BrokerId(0),
    }));
    let stale = moved[0].clone();
    let (partition, stale_leader) = stale
        .partitions()
        .find(|(p, l)| {
            kept.leader(p)
                .is_some_and(|k| k.leader_epoch < l.leader_epoch)
        })
        .expect("a moved partition");
    let actions = two.feed(Input::VolumeRead {
        recorded_epoch: Some(ControllerEpoch(2)),
        assignment: Some(stale),
    });
    let rewritten = writes(&actions);
    assert_eq!(rewritten.len(), 1, "{actions:?}");
    let now = rewritten[0].leader(&partition).expect("kept");
    let range = EpochRange::of(ControllerEpoch(2)).expect("fits");
    assert!(now.leader_epoch > stale_leader.leader_epoch && range.contains(now.leader_epoch));
    assert!(rewritten[0].version() > moved[0].version());
    // Partitions the stale file did not touch keep their epochs.
    for (p, leader) in kept.partitions() {
        if p != partition && base.leader(&p) == moved[0].leader(&p) {
            assert_eq!(rewritten[0].leader(&p), Some(leader), "{p}");
        }
    }
}

#[test]
fn a_fenced_partition_gets_an_epoch_above_the_claim() {
    let mut harness = Harness::new();
    let first = harness.win(1, None);
    let leader = first.leader(&tp("orders", 0)).expect("exists");
    let claim = LeaderEpoch(leader.leader_epoch.0 + 3);
    let actions = harness.feed(Input::Heartbeat(Heartbeat {
        broker: endpoint(leader.leader.0),
        applied_version: Some(AssignmentVersion(1)),
        applied_epoch: Some(ControllerEpoch(1)),
        fenced: vec![(tp("orders", 0), claim)],
    }));
    let next = writes(&actions);
    let now = next[0].leader(&tp("orders", 0)).expect("exists");
    assert_eq!(now.leader, leader.leader);
    assert!(now.leader_epoch > claim);
}

#[test]
fn a_failed_write_is_retried_at_the_next_tick_with_a_new_version() {
    let mut harness = Harness::new();
    let first = harness.win(1, None);
    harness.feed(Input::AssignmentNotWritten {
        version: first.version(),
    });
    assert!(writes(&harness.feed(ping(0, None))).is_empty());
    let again = writes(&harness.feed(Input::Tick));
    assert_eq!(again.len(), 1);
    assert!(again[0].version() > first.version());
    assert_eq!(again[0].topics(), first.topics());
}

#[test]
fn shutdown_releases_the_lease_and_groups_are_named() {
    let mut harness = Harness::new();
    harness.win(1, None);
    let groups: BTreeSet<GroupId> = ["billing", "audit"]
        .iter()
        .map(|g| GroupId::new(g))
        .collect();
    let written = writes(&harness.feed(Input::GroupsKnown(groups.clone())));
    assert_eq!(
        written[0].groups().keys().cloned().collect::<BTreeSet<_>>(),
        groups
    );
    assert_eq!(
        harness.feed(Input::Shutdown),
        [Action::ReleaseLease {
            epoch: ControllerEpoch(1)
        }]
    );
    assert_eq!(harness.controller.leading_epoch(), None);
}

#[test]
fn the_transaction_state_topic_is_placed_once_requested() {
    let mut harness = Harness::new();
    let first = harness.win(1, None);
    let name = crate::internal_topics::transaction_state_topic_name();
    assert!(
        !first.topics().contains_key(&name),
        "not before a broker asks"
    );
    let written = writes(&harness.feed(Input::TransactionStateRequested));
    assert_eq!(written.len(), 1);
    let topic = &written[0].topics()[&name];
    assert_eq!(
        topic.partitions.len() as i32,
        crate::internal_topics::TRANSACTION_STATE_PARTITIONS
    );
    assert!(
        written[0]
            .partitions()
            .filter(|(partition, _)| partition.topic == name)
            .count()
            == 50,
        "every partition has a leader"
    );
    // Asking again changes nothing.
    assert!(writes(&harness.feed(Input::TransactionStateRequested)).is_empty());
}
