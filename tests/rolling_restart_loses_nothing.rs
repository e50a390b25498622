//! A rolling restart under load, as a StatefulSet's rolling update does it: three `kaas`
//! processes on a real API server with the default Lease settings (tests/support/kube_cluster.rs),
//! each in turn stopped with SIGTERM (highest ordinal first, the controller among them),
//! started again, and waited for until the controller gives it partitions back, while a
//! librdkafka producer and the Java client's producer (both idempotent, acks=all) send and
//! two librdkafka groups (classic and KIP-848) and a Java group consume and commit
//! (tests/support/cluster_load.rs).
//!
//! A broker stopped with SIGTERM releases the Lease before its partitions are flushed; that is
//! safe because the storage fence refuses whatever the old leader would write late. Checked:
//! no producer saw an error (each client fails on one), every acknowledged record is in the log
//! exactly once at its acknowledged offset (no duplicates, nothing lost), every group's
//! commits never went back across a restart, and the Java group's committed offsets hold.
//! The longest time a partition went without an acknowledgement is printed (a figure, not an
//! assertion: timing depends on the machine).

mod support;

use support::cluster_load::{controller, has_broker, leads_any, ClusterLoad, REACT};
use support::kube_cluster::KubeCluster;

const TOPIC: &str = "rolled";
const PARTITIONS: i32 = 6;
/// About 40 s of sending for the Java producer: through the three restarts.
const JAVA_RECORDS: usize = 800;
const JAVA_PACE_MS: u64 = 50;

#[test]
fn a_rolling_restart_under_load_loses_and_duplicates_nothing() {
    let mut cluster = KubeCluster::start("rolling", 3, &[]);
    cluster.apply_topic(TOPIC, PARTITIONS);
    let bootstrap = cluster.bootstrap();
    let mut load = ClusterLoad::start(
        bootstrap,
        &cluster.scratch,
        TOPIC,
        PARTITIONS,
        JAVA_RECORDS,
        JAVA_PACE_MS,
    );
    let first = cluster.wait_for_assignment("of three brokers leading", REACT * 2, |a| {
        load.has_topic(a) && (0..3).all(|b| has_broker(a, b) && leads_any(a, b))
    });
    cluster.wait_until_applied(first.version().0);
    load.wait_for_progress("at the start");
    let first_epoch = cluster.lease_transitions();

    for broker in (0..3).rev() {
        load.snapshot_commits();
        cluster.broker(broker).terminate();
        cluster.broker(broker).wait_for_ports_closed();
        cluster.broker(broker).start();
        let back = cluster.wait_for_assignment("with the restarted broker leading", REACT, |a| {
            load.has_topic(a) && has_broker(a, broker) && leads_any(a, broker)
        });
        cluster.wait_until_applied(back.version().0);
        load.wait_for_progress(&format!("after broker {broker}'s restart"));
        load.check_commits(&format!("after broker {broker}'s restart"));
    }
    // The controller was restarted too: another broker took the Lease over, at a higher epoch.
    assert!(cluster.lease_transitions() > first_epoch);
    assert!(has_broker(&first, controller(&cluster)));

    load.finish();
    load.verify();
    let gaps = load.ack_gaps();
    assert_eq!(
        gaps.len(),
        PARTITIONS as usize,
        "every partition acknowledged"
    );
    let longest = gaps.iter().map(|(_, gap)| *gap).fold(0.0, f64::max);
    eprintln!(
        "longest time without an acknowledgement, per partition: {gaps:?} (max {longest:.3} s)"
    );
    cluster.stop();
}
