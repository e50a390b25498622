//! Properties of `assignment.json` parsing: any consistent assignment survives writing and
//! reading unchanged, and no input whatsoever makes the parser panic.

mod support;

use kaas_cluster::assignment::Assignment;
use proptest::prelude::*;
use support::{assignment_of, random_shape, Rng};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn consistent_assignments_round_trip(seed in any::<u64>(), epoch in any::<u64>(), version in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let assignment = assignment_of(&random_shape(&mut rng, 6), epoch, version);
        let bytes = assignment.to_json();
        prop_assert_eq!(Assignment::from_json(&bytes), Ok(assignment.clone()));
        prop_assert_eq!(Assignment::try_from(assignment.to_file()), Ok(assignment));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Assignment::from_json(&bytes);
    }

    #[test]
    fn a_good_file_with_any_byte_changed_never_panics(seed in any::<u64>(), at in any::<usize>(), byte in any::<u8>()) {
        let mut rng = Rng::new(seed);
        let mut bytes = assignment_of(&random_shape(&mut rng, 4), 1, 1).to_json();
        let at = at % bytes.len();
        bytes[at] = byte;
        let _ = Assignment::from_json(&bytes);
    }
}
