//! Property: whatever a broker is offered — newer files, replays, stale controllers' files,
//! torn and corrupted bytes — it never applies an assignment with a lower controller epoch
//! than any good file it has seen, never one whose `(controller epoch, version)` is not above
//! the current one's, never one it did not get whole, and it does apply every file that
//! follows the rule (a higher epoch whatever its version).

mod support;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::follower::{AssignmentFollower, Offer};
use proptest::prelude::*;
use support::{assignment_of, random_shape, Rng};

/// One thing a broker may read.
#[derive(Clone, Debug)]
enum Read {
    /// A whole file written at this epoch and version.
    Fresh { epoch: u64, version: u64 },
    /// An earlier file again.
    Replay { which: usize },
    /// The first `cut` bytes of an earlier file (modulo its length).
    Torn { which: usize, cut: usize },
    /// An earlier file with one byte replaced.
    Corrupt { which: usize, at: usize, byte: u8 },
}

fn read() -> impl Strategy<Value = Read> {
    prop_oneof![
        4 => (0u64..6, 0u64..30).prop_map(|(epoch, version)| Read::Fresh { epoch, version }),
        1 => any::<usize>().prop_map(|which| Read::Replay { which }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(which, cut)| Read::Torn { which, cut }),
        1 => (any::<usize>(), any::<usize>(), any::<u8>())
            .prop_map(|(which, at, byte)| Read::Corrupt { which, at, byte }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn never_applies_an_older_epoch_or_version(seed in any::<u64>(), reads in prop::collection::vec(read(), 1..40)) {
        let mut rng = Rng::new(seed);
        let mut follower = AssignmentFollower::new();
        let mut written: Vec<Vec<u8>> = Vec::new();
        // The highest epoch of any good file offered so far.
        let mut highest_good_epoch = None;
        for read in reads {
            let bytes = match read {
                Read::Fresh { epoch, version } => {
                    let bytes = assignment_of(&random_shape(&mut rng, 3), epoch, version).to_json();
                    written.push(bytes.clone());
                    bytes
                }
                Read::Replay { which } if !written.is_empty() => written[which % written.len()].clone(),
                Read::Torn { which, cut } if !written.is_empty() => {
                    let file = &written[which % written.len()];
                    file[..cut % file.len()].to_vec()
                }
                Read::Corrupt { which, at, byte } if !written.is_empty() => {
                    let mut file = written[which % written.len()].clone();
                    let at = at % file.len();
                    file[at] = byte;
                    file
                }
                _ => continue,
            };
            let before = follower.current().cloned();
            let fence_before = follower.highest_epoch();
            let parsed = Assignment::from_json(&bytes).ok();
            let outcome = follower.offer(&bytes);
            prop_assert!(follower.highest_epoch() >= fence_before, "the epoch fence went down");
            match (&outcome, &parsed) {
                (Offer::Applied(applied), Some(parsed)) => {
                    prop_assert_eq!(&**applied, parsed);
                    prop_assert!(Some(applied.controller_epoch()) >= highest_good_epoch,
                        "applied epoch {:?} below a good file's {:?}", applied.controller_epoch(), highest_good_epoch);
                    if let Some(before) = &before {
                        prop_assert!(
                            (applied.controller_epoch(), applied.version())
                                > (before.controller_epoch(), before.version())
                        );
                    }
                }
                (Offer::Applied(_), None) => prop_assert!(false, "applied bytes that do not parse"),
                (Offer::Malformed(_), None) => {
                    prop_assert_eq!(follower.current(), before.as_ref());
                    prop_assert_eq!(follower.highest_epoch(), fence_before);
                }
                (Offer::Malformed(error), Some(_)) => prop_assert!(false, "good file refused: {}", error),
                (Offer::Rejected(_), Some(parsed)) => {
                    prop_assert_eq!(follower.current(), before.as_ref());
                    // Refused only because the rule says so.
                    let fresh_epoch = fence_before.is_none_or(|f| parsed.controller_epoch() >= f);
                    let fresh_version = before.as_ref().is_none_or(|b| {
                        (parsed.controller_epoch(), parsed.version()) > (b.controller_epoch(), b.version())
                    });
                    prop_assert!(!(fresh_epoch && fresh_version), "a new file was refused");
                }
                (Offer::Rejected(_), None) => prop_assert!(false, "bad bytes were judged by the rule"),
            }
            if let Some(parsed) = &parsed {
                highest_good_epoch = highest_good_epoch.max(Some(parsed.controller_epoch()));
            }
            if let Some(current) = follower.current() {
                prop_assert!(Some(current.controller_epoch()) <= follower.highest_epoch());
            }
        }
    }
}
