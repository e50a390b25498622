//! Topic configs of every kind and GROUP config overrides survive a restart (both live in the
//! topics file of the data directory), with their values and sources.

mod support;

use support::{describe_configs, Kaas};

const TOPIC: i8 = 2;
const GROUP: i8 = 32;

#[test]
fn topic_and_group_configs_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &[]);
    let mut client = kaas.client();
    client.create_topic(
        "configured",
        1,
        &[
            ("cleanup.policy", "compact,delete"),
            ("compression.type", "zstd"),
            ("min.insync.replicas", "2"),
            ("min.cleanable.dirty.ratio", "0.25"),
        ],
    );
    let altered = client.set_config(GROUP, "kept-group", "consumer.session.timeout.ms", "50000");
    assert_eq!(altered.error_code, 0, "{altered:?}");

    let topic_keys = [
        "cleanup.policy",
        "compression.type",
        "min.insync.replicas",
        "min.cleanable.dirty.ratio",
        "delete.retention.ms",
    ];
    let group_keys = [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    ];
    let topic_before = describe_configs(&mut client, TOPIC, "configured", &topic_keys);
    let group_before = describe_configs(&mut client, GROUP, "kept-group", &group_keys);
    assert_eq!(topic_before[0], ("compact,delete".into(), 1));
    assert_eq!(topic_before[4], ("86400000".into(), 5), "a default");
    assert_eq!(group_before[0], ("50000".into(), 8), "a group override");
    assert_ne!(group_before[1].1, 8, "not overridden");

    assert!(kaas.terminate(), "clean exit on SIGTERM");
    kaas.restart();
    let mut client = kaas.client();
    assert_eq!(
        describe_configs(&mut client, TOPIC, "configured", &topic_keys),
        topic_before
    );
    assert_eq!(
        describe_configs(&mut client, GROUP, "kept-group", &group_keys),
        group_before
    );
}
