//! What the heartbeat server tells its consumer (the controller state machine of
//! `kaas-cluster`): the pings it received and the streams that ended, as plain data, in the
//! order it happened for each broker, each stamped with the monotonic time the server saw
//! it. Whether a broker is alive is not said here: the controller decides.

use std::time::Instant;

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::controller::{Heartbeat, Input};
use kaas_cluster::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, LeaderEpoch, TopicPartition,
};

/// A broker with an open stream, as its last ping described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerStatus {
    /// The broker and its advertised Kafka endpoint.
    pub broker: BrokerEndpoint,
    /// The controller epoch and version of the newest assignment it has applied (`None`
    /// before the first).
    pub applied: Option<(ControllerEpoch, AssignmentVersion)>,
    /// Partitions it found claimed on the volume at a higher leader epoch, with that epoch.
    pub fenced: Vec<(TopicPartition, LeaderEpoch)>,
    /// When its last ping arrived (monotonic).
    pub last_ping: Instant,
}

/// What the server saw of one broker: a ping or the end of its stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeartbeatEvent {
    /// The broker's first ping on a stream. A broker that opens a new stream while its old
    /// one is still open (it restarted before the old connection was noticed dead) joins
    /// again: the new stream replaces the old one, and no end is reported for the old one.
    Joined(BrokerStatus),
    /// A later ping. A ping less than half an interval after the last reported one is held
    /// back and reported (the latest of them, with its own time) by a tick half an interval
    /// after that report, so a client pinging too fast cannot flood the consumer.
    Pinged(BrokerStatus),
    /// The broker's stream ended or broke (the process exited, the connection reset, or its
    /// pings became malformed): reported at once. A stream that stays open but silent (a
    /// paused process, a partitioned host) makes no event: aging it out is the controller's.
    StreamClosed {
        /// The broker.
        broker: BrokerId,
        /// When the server noticed (monotonic).
        at: Instant,
    },
}

impl HeartbeatEvent {
    /// The broker the event is about.
    pub fn broker(&self) -> BrokerId {
        match self {
            HeartbeatEvent::Joined(status) | HeartbeatEvent::Pinged(status) => status.broker.id,
            HeartbeatEvent::StreamClosed { broker, .. } => *broker,
        }
    }
}

impl BrokerStatus {
    /// This status as the controller state machine's heartbeat input.
    pub fn to_heartbeat(&self) -> Heartbeat {
        Heartbeat {
            broker: self.broker.clone(),
            applied_version: self.applied.map(|(_, version)| version),
            applied_epoch: self.applied.map(|(epoch, _)| epoch),
            fenced: self.fenced.clone(),
        }
    }
}

impl HeartbeatEvent {
    /// The controller state machine's input for this event (`Controller::step` takes it with
    /// the event's time): a join or ping is a `Heartbeat`, a closed stream a `StreamClosed`.
    /// Whether a silent broker is gone the controller decides by its own clock.
    pub fn to_controller_input(&self) -> Input {
        match self {
            HeartbeatEvent::Joined(status) | HeartbeatEvent::Pinged(status) => {
                Input::Heartbeat(status.to_heartbeat())
            }
            HeartbeatEvent::StreamClosed { broker, .. } => Input::StreamClosed { broker: *broker },
        }
    }

    /// When the server saw what the event reports (monotonic).
    pub fn at(&self) -> Instant {
        match self {
            HeartbeatEvent::Joined(status) | HeartbeatEvent::Pinged(status) => status.last_ping,
            HeartbeatEvent::StreamClosed { at, .. } => *at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::ids::TopicName;

    #[test]
    fn events_become_controller_inputs() {
        let now = Instant::now();
        let broker = BrokerEndpoint {
            id: BrokerId(2),
            host: "127.0.0.3".into(),
            port: 9092,
        };
        let fenced = vec![(
            TopicPartition::new(TopicName::new("orders").expect("name"), 1),
            LeaderEpoch(7),
        )];
        let status = BrokerStatus {
            broker: broker.clone(),
            applied: Some((ControllerEpoch(3), AssignmentVersion(9))),
            fenced: fenced.clone(),
            last_ping: now,
        };
        let expected = Input::Heartbeat(Heartbeat {
            broker: broker.clone(),
            applied_version: Some(AssignmentVersion(9)),
            applied_epoch: Some(ControllerEpoch(3)),
            fenced,
        });
        assert_eq!(
            HeartbeatEvent::Joined(status.clone()).to_controller_input(),
            expected
        );
        assert_eq!(
            HeartbeatEvent::Pinged(status.clone()).to_controller_input(),
            expected
        );
        let fresh = BrokerStatus {
            applied: None,
            fenced: Vec::new(),
            ..status
        };
        assert_eq!(
            fresh.to_heartbeat(),
            Heartbeat {
                broker,
                applied_version: None,
                applied_epoch: None,
                fenced: Vec::new(),
            }
        );
        let closed = HeartbeatEvent::StreamClosed {
            broker: BrokerId(2),
            at: now,
        };
        assert_eq!(
            closed.to_controller_input(),
            Input::StreamClosed {
                broker: BrokerId(2)
            }
        );
        assert_eq!(closed.at(), now);
    }
}
