//! Waiting, on a glommio shard, until the broker's view shows a topic change the KafkaTopic
//! service made: Kafka admin clients read Metadata right after CreateTopics answers, so a
//! cluster broker answers only once the assignment it follows has the change (or the wait's
//! bound has passed). The view is an `ArcSwap` every shard reads; polling it every few
//! milliseconds costs one atomic load each time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::model::cluster_view::{ClusterView, ViewHandle};
use crate::protocol::Uuid;

/// How often the view is looked at while waiting.
const POLL: Duration = Duration::from_millis(10);

/// What a change makes the view show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// The topic exists with this id.
    Created {
        /// The topic.
        name: String,
        /// Its id.
        id: Uuid,
    },
    /// The topic with this id is gone (a topic of that name with another id is a new one).
    Deleted {
        /// The topic.
        name: String,
        /// The deleted topic's id.
        id: Uuid,
    },
    /// The topic has at least this many partitions.
    Partitions {
        /// The topic.
        name: String,
        /// The partition count asked for.
        count: i32,
    },
    /// The topic's overrides hold these values (`None`: not overridden).
    Configs {
        /// The topic.
        name: String,
        /// The changed keys.
        configs: BTreeMap<String, Option<String>>,
    },
}

impl Expectation {
    /// Whether `view` shows it.
    pub fn shown_by(&self, view: &ClusterView) -> bool {
        match self {
            Expectation::Created { name, id } => view.topic(name).is_some_and(|t| t.id() == *id),
            Expectation::Deleted { name, id } => view.topic(name).is_none_or(|t| t.id() != *id),
            Expectation::Partitions { name, count } => {
                view.topic(name).is_some_and(|t| t.partitions() >= *count)
            }
            Expectation::Configs { name, configs } => view.topic(name).is_some_and(|t| {
                configs
                    .iter()
                    .all(|(key, value)| t.config.get(key) == value.as_deref())
            }),
        }
    }
}

/// Waits until the view shows `expectation`, at most `bound`; whether it does.
pub async fn wait_for(view: &ViewHandle, expectation: &Expectation, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if expectation.shown_by(&view.load()) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        glommio::timer::sleep(left.min(POLL)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster_view::TopicInfo;
    use crate::model::topic_config::{TopicConfig, TopicDefaults};

    /// (name, id byte, partitions, configs).
    type Row<'a> = (&'a str, u8, i32, &'a [(&'a str, &'a str)]);

    fn view(topics: &[Row<'_>]) -> ClusterView {
        let topics = topics
            .iter()
            .map(|(name, id, partitions, configs)| {
                let config = TopicConfig::from_pairs(configs.iter().map(|(k, v)| (*k, Some(*v))))
                    .expect("valid");
                TopicInfo::of(
                    kaas_cluster::ids::TopicName::new(name).expect("legal"),
                    Uuid([*id; 16]),
                    *partitions,
                    config,
                    &TopicDefaults::default(),
                )
            })
            .collect();
        ClusterView::new("c".into(), 1, topics)
    }

    #[test]
    fn each_change_is_seen_only_once_the_view_has_it() {
        let before = view(&[("a", 1, 2, &[("retention.ms", "1000")])]);
        let after = view(&[("a", 1, 4, &[("segment.ms", "60000")]), ("b", 2, 1, &[])]);
        let created = Expectation::Created {
            name: "b".into(),
            id: Uuid([2; 16]),
        };
        assert!(!created.shown_by(&before) && created.shown_by(&after));
        let other_id = Expectation::Created {
            name: "b".into(),
            id: Uuid([3; 16]),
        };
        assert!(
            !other_id.shown_by(&after),
            "a topic of that name with another id"
        );
        let deleted = Expectation::Deleted {
            name: "b".into(),
            id: Uuid([2; 16]),
        };
        assert!(deleted.shown_by(&before) && !deleted.shown_by(&after));
        let recreated = view(&[("b", 9, 1, &[])]);
        assert!(deleted.shown_by(&recreated), "recreated under a new id");
        let partitions = Expectation::Partitions {
            name: "a".into(),
            count: 4,
        };
        assert!(!partitions.shown_by(&before) && partitions.shown_by(&after));
        let configs = Expectation::Configs {
            name: "a".into(),
            configs: BTreeMap::from([
                ("retention.ms".to_string(), None),
                ("segment.ms".to_string(), Some("60000".to_string())),
            ]),
        };
        assert!(!configs.shown_by(&before) && configs.shown_by(&after));
    }

    #[test]
    fn the_wait_ends_at_its_bound_or_when_the_view_shows_the_change() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .spawn(|| async {
                let handle = std::rc::Rc::new(ViewHandle::new(view(&[])));
                let expectation = Expectation::Created {
                    name: "b".into(),
                    id: Uuid([2; 16]),
                };
                let started = Instant::now();
                assert!(!wait_for(&handle, &expectation, Duration::from_millis(50)).await);
                assert!(started.elapsed() >= Duration::from_millis(50));
                let publisher = handle.clone();
                glommio::spawn_local(async move {
                    glommio::timer::sleep(Duration::from_millis(30)).await;
                    publisher.publish(view(&[("b", 2, 1, &[])]));
                })
                .detach();
                assert!(wait_for(&handle, &expectation, Duration::from_secs(20)).await);
            })
            .expect("executor")
            .join()
            .expect("joined");
    }
}
