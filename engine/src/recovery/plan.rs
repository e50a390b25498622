//! Recovery's decisions, without I/O: where the validating scan starts, which segments are
//! trusted as sealed, what happens to a segment once it is scanned (cut, sealed, the log
//! ending there) and how an inherited last segment is ended. The executor in
//! [`super::recover`] reads the files, asks these functions and does what they say; the
//! argument for each rule is in the module doc of [`crate::recovery`].

use crate::checkpoint::RecoveryPoint;

/// Where the validating scan starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScanStart {
    /// Base offset of the first segment scanned.
    pub segment: u64,
    /// Byte position in that segment where the scan starts.
    pub position: u64,
    /// Producer state is replayed from batches at or after this offset.
    pub replay_from: u64,
    /// Whether producer state starts from the snapshot taken at `replay_from` (otherwise
    /// it starts empty).
    pub use_snapshot: bool,
}

impl ScanStart {
    /// Validates every segment from the first one, rebuilding producer state from nothing.
    pub fn whole_log(first_base: u64) -> Self {
        ScanStart {
            segment: first_base,
            position: 0,
            replay_from: first_base,
            use_snapshot: false,
        }
    }

    /// The start a checkpoint allows: at the recovery `point` when the newest readable
    /// producer snapshot at or below it (`snapshot`, its offset) was taken at the point,
    /// else from the start of the segment holding the snapshot's offset. `None` (scan the
    /// whole log) without a trusted point or without a snapshot.
    pub fn from_checkpoint(
        bases: &[u64],
        point: Option<RecoveryPoint>,
        snapshot: Option<u64>,
    ) -> Option<Self> {
        let (point, snapshot) = (point?, snapshot?);
        let start = if snapshot == point.offset {
            let (segment, position) = locate_recovery_point(bases, &point);
            ScanStart {
                segment,
                position,
                replay_from: point.offset,
                use_snapshot: true,
            }
        } else {
            ScanStart {
                segment: segment_holding(bases, snapshot),
                position: 0,
                replay_from: snapshot,
                use_snapshot: true,
            }
        };
        Some(start)
    }

    /// False when the start lies past the end of its segment's file (of `segment_size`
    /// bytes): the file was cut short behind the log's back, so nothing the recovery point
    /// vouches for can be trusted and the whole log is scanned instead.
    pub fn fits(&self, segment_size: u64) -> bool {
        self.position <= segment_size
    }

    /// The start moved back to the beginning of segment `base`, whose indexes or end could
    /// not be trusted (the scan rebuilds and seals it). Producer replay is unchanged.
    pub fn restart_at(self, base: u64) -> Self {
        ScanStart {
            segment: base,
            position: 0,
            ..self
        }
    }

    /// The first offset the scan reads: leader epochs from here on are rebuilt.
    pub fn offset(&self) -> u64 {
        if self.position == 0 {
            self.segment
        } else {
            self.replay_from
        }
    }

    /// The segments whose indexes are checked before the scan (in order), each with the
    /// base of the segment after it when its end must be checked too: every segment below
    /// the scan start (trusted as sealed), and the scanned one when the scan starts inside
    /// it (its index prefix is kept).
    pub fn segments_to_verify(&self, bases: &[u64]) -> Vec<(u64, Option<u64>)> {
        bases
            .iter()
            .enumerate()
            .take_while(|&(_, &base)| {
                base < self.segment || (base == self.segment && self.position > 0)
            })
            .map(|(i, &base)| {
                let next = (base < self.segment).then(|| bases.get(i + 1).copied());
                (base, next.flatten())
            })
            .collect()
    }

    /// Where the scan of segment `base` (a file of `file_size` bytes) begins.
    pub fn position_in(&self, base: u64, file_size: u64) -> u64 {
        if base == self.segment {
            self.position.min(file_size)
        } else {
            0
        }
    }
}

/// The recovery point recovery may start from: none when it lies below the first segment
/// (the segments it vouched for are gone) or when the leader epochs it counts on were lost.
pub(crate) fn trusted_point(
    checkpoint: Option<RecoveryPoint>,
    first_base: u64,
    epochs_lost: bool,
) -> Option<RecoveryPoint> {
    checkpoint.filter(|point| point.offset >= first_base && !epochs_lost)
}

/// Every checkpoint writes the leader epochs before the recovery point: a point without
/// readable epochs means only a scan of the whole log rebuilds the epochs below it.
pub(crate) fn epochs_lost(has_checkpoint: bool, has_epochs: bool) -> bool {
    has_checkpoint && !has_epochs
}

/// The base of the segment created in a directory that has none.
pub(crate) fn empty_log_base(checkpoint: Option<RecoveryPoint>) -> u64 {
    checkpoint.map_or(0, |point| point.log_start_offset.max(point.offset))
}

/// The log start offset before the log end is known.
pub(crate) fn log_start_offset(checkpoint: Option<RecoveryPoint>, first_base: u64) -> u64 {
    checkpoint.map_or(first_base, |point| point.log_start_offset.max(first_base))
}

/// A scanned segment's base does not follow the previous segment's end: a gap between
/// segments cannot come from the log's own writes, so the log ends before this segment.
pub(crate) fn is_gap(base: u64, next_offset: u64, scan: &ScanStart) -> bool {
    base != next_offset && base != scan.segment
}

/// What the scan of one segment found.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scanned {
    /// Bytes of whole intact batches from the start of the file.
    pub valid_len: u64,
    /// The file's size (an inherited segment's: at most its recorded length).
    pub file_size: u64,
    /// The file is a hard link to an older epoch's.
    pub inherited: bool,
    /// The offset after the last intact batch.
    pub next_offset: u64,
    /// The base of the segment after it, if any.
    pub next_base: Option<u64>,
}

/// What recovery does with a scanned segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentEnd {
    /// Truncate the file after its last intact batch. Never an inherited file, which a
    /// stale leader may still write: what counts is recorded in the claim instead.
    pub cut_file: bool,
    /// Rewrite its indexes completely and seal it (a later segment follows).
    pub seal: bool,
    /// The log ends with this segment: every later segment is deleted. An earlier segment
    /// whose batches end exactly at the next segment's base holds everything it ever held
    /// (what followed was padding a seal had not cut yet); ending anywhere else, it lost
    /// batches the later segments would have to follow.
    pub log_ends_here: bool,
}

/// Decides the fate of a scanned segment.
pub(crate) fn segment_end(scanned: &Scanned) -> SegmentEnd {
    let clean_end = scanned.valid_len == scanned.file_size;
    SegmentEnd {
        cut_file: !clean_end && !scanned.inherited,
        seal: scanned.next_base.is_some(),
        log_ends_here: scanned
            .next_base
            .is_some_and(|next_base| scanned.next_offset != next_base),
    }
}

/// An inherited last segment whose counted bytes are at most this many is copied into a
/// file of the epoch's own rather than kept beside a new segment: the copy costs about a
/// page-cache read and write of this much, and saves the partition a second open segment
/// file (one descriptor per idle partition instead of two) and the seal's four fsyncs.
pub(crate) const ADOPT_TAIL_MAX_BYTES: u64 = 1 << 20;

/// How recovery ends the last segment, so that appends go to a file of the log's own
/// epoch (see [`crate::fence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TailAction {
    /// The segment is the epoch's own already.
    Keep,
    /// Copy its counted bytes into a file of the epoch's own, which stays the active
    /// segment ([`ADOPT_TAIL_MAX_BYTES`] at most).
    Adopt,
    /// Sync it, give it index files of its own (sealed without truncating it), and start
    /// a new segment at the log end.
    SealAndStartOwn,
    /// Drop the empty segment (no two segments share a base) and start a new one.
    DropAndStartOwn,
}

/// Decides how the last segment (inherited or not, of `size` counted bytes) is ended.
pub(crate) fn tail_action(inherited: bool, size: u64) -> TailAction {
    match size {
        _ if !inherited => TailAction::Keep,
        0 => TailAction::DropAndStartOwn,
        size if size <= ADOPT_TAIL_MAX_BYTES => TailAction::Adopt,
        _ => TailAction::SealAndStartOwn,
    }
}

/// The segment and byte position a recovery point names. The position is in the segment
/// that held the durable end when the checkpoint was taken. When that end was also the end
/// of the segment and a roll followed, the point's offset is now the next segment's base
/// while its position is still in the earlier segment (a segment is never rolled while
/// empty, so position 0 at a base offset means the start of that segment).
pub(crate) fn locate_recovery_point(bases: &[u64], point: &RecoveryPoint) -> (u64, u64) {
    let holding = bases
        .iter()
        .copied()
        .rfind(|b| *b < point.offset || (*b == point.offset && point.position == 0));
    match holding {
        Some(base) => (base, point.position),
        // The segment the point ended was deleted since: the log now starts at the point.
        None => (bases.first().copied().unwrap_or(point.offset), 0),
    }
}

/// The segment holding `offset` (the first one when `offset` lies below every segment).
pub(crate) fn segment_holding(bases: &[u64], offset: u64) -> u64 {
    bases
        .iter()
        .copied()
        .rfind(|b| *b <= offset)
        .or_else(|| bases.first().copied())
        .unwrap_or(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(offset: u64, position: u64, log_start_offset: u64) -> RecoveryPoint {
        RecoveryPoint {
            offset,
            position,
            log_start_offset,
        }
    }

    #[test]
    fn a_point_with_its_snapshot_starts_inside_its_segment() {
        let start =
            ScanStart::from_checkpoint(&[0, 100, 200], Some(point(150, 4096, 0)), Some(150));
        assert_eq!(
            start,
            Some(ScanStart {
                segment: 100,
                position: 4096,
                replay_from: 150,
                use_snapshot: true
            })
        );
        assert_eq!(start.map(|s| s.offset()), Some(150));
    }

    #[test]
    fn an_older_snapshot_starts_at_the_segment_holding_it() {
        let start = ScanStart::from_checkpoint(&[0, 100, 200], Some(point(250, 900, 0)), Some(120));
        assert_eq!(
            start,
            Some(ScanStart {
                segment: 100,
                position: 0,
                replay_from: 120,
                use_snapshot: true
            })
        );
        assert_eq!(start.map(|s| s.offset()), Some(100));
    }

    #[test]
    fn no_point_or_no_snapshot_scans_the_whole_log() {
        assert_eq!(ScanStart::from_checkpoint(&[0, 100], None, Some(50)), None);
        assert_eq!(
            ScanStart::from_checkpoint(&[0, 100], Some(point(50, 10, 0)), None),
            None
        );
        let whole = ScanStart::whole_log(7);
        assert_eq!((whole.segment, whole.position, whole.offset()), (7, 0, 7));
        assert!(!whole.use_snapshot);
    }

    #[test]
    fn a_point_at_a_roll_names_the_end_of_the_earlier_segment() {
        // The durable end was the end of segment 0 when the checkpoint ran; a roll made it
        // the base of segment 100.
        assert_eq!(
            locate_recovery_point(&[0, 100], &point(100, 5000, 0)),
            (0, 5000)
        );
        // Position 0 at a base offset is the start of that segment.
        assert_eq!(
            locate_recovery_point(&[0, 100], &point(100, 0, 0)),
            (100, 0)
        );
        // The segment the point ended was deleted: start at the first one.
        assert_eq!(locate_recovery_point(&[300], &point(250, 77, 0)), (300, 0));
    }

    #[test]
    fn a_point_past_its_file_is_not_trusted() {
        let start =
            ScanStart::from_checkpoint(&[0], Some(point(10, 4096, 0)), Some(10)).expect("located");
        assert!(start.fits(4096));
        assert!(!start.fits(4095));
    }

    #[test]
    fn points_below_the_first_segment_or_without_epochs_are_dropped() {
        assert_eq!(trusted_point(Some(point(50, 1, 0)), 100, false), None);
        assert_eq!(trusted_point(Some(point(150, 1, 0)), 100, true), None);
        assert_eq!(
            trusted_point(Some(point(150, 1, 0)), 100, false),
            Some(point(150, 1, 0))
        );
        assert!(epochs_lost(true, false));
        assert!(!epochs_lost(false, false));
        assert!(!epochs_lost(true, true));
    }

    #[test]
    fn an_empty_directory_starts_at_the_checkpointed_start() {
        assert_eq!(empty_log_base(None), 0);
        assert_eq!(empty_log_base(Some(point(40, 0, 70))), 70);
        assert_eq!(empty_log_base(Some(point(90, 0, 70))), 90);
        assert_eq!(log_start_offset(None, 100), 100);
        assert_eq!(log_start_offset(Some(point(0, 0, 150)), 100), 150);
        assert_eq!(log_start_offset(Some(point(0, 0, 50)), 100), 100);
    }

    #[test]
    fn segments_below_the_start_are_verified_with_their_successor() {
        let inside = ScanStart {
            segment: 200,
            position: 64,
            replay_from: 210,
            use_snapshot: true,
        };
        assert_eq!(
            inside.segments_to_verify(&[0, 100, 200, 300]),
            vec![(0, Some(100)), (100, Some(200)), (200, None)]
        );
        let at_start = inside.restart_at(100);
        assert_eq!(at_start.replay_from, 210);
        assert!(at_start.use_snapshot);
        assert_eq!(
            at_start.segments_to_verify(&[0, 100, 200]),
            vec![(0, Some(100))]
        );
        assert_eq!(at_start.position_in(100, 10), 0);
        assert_eq!(inside.position_in(200, 10), 10);
        assert_eq!(inside.position_in(200, 1000), 64);
        assert_eq!(inside.position_in(300, 1000), 0);
    }

    #[test]
    fn a_gap_between_segments_ends_the_log() {
        let start = ScanStart::whole_log(0);
        assert!(!is_gap(0, 0, &start));
        assert!(!is_gap(100, 100, &start));
        assert!(is_gap(150, 100, &start));
        // The first scanned segment may start anywhere.
        assert!(!is_gap(100, 0, &start.restart_at(100)));
    }

    #[test]
    fn a_scanned_segment_is_cut_sealed_or_ends_the_log() {
        let scanned = Scanned {
            valid_len: 1000,
            file_size: 1000,
            inherited: false,
            next_offset: 100,
            next_base: Some(100),
        };
        let whole = segment_end(&scanned);
        assert_eq!(
            whole,
            SegmentEnd {
                cut_file: false,
                seal: true,
                log_ends_here: false
            }
        );
        // Padding after batches that end at the next base: cut, sealed, later ones kept.
        let padded = segment_end(&Scanned {
            file_size: 4096,
            ..scanned
        });
        assert_eq!(
            (padded.cut_file, padded.seal, padded.log_ends_here),
            (true, true, false)
        );
        // Batches missing before the next base: the log ends here.
        let torn = segment_end(&Scanned {
            file_size: 4096,
            next_offset: 90,
            ..scanned
        });
        assert_eq!(
            (torn.cut_file, torn.seal, torn.log_ends_here),
            (true, true, true)
        );
        // An inherited file is never cut.
        let inherited = segment_end(&Scanned {
            file_size: 4096,
            inherited: true,
            next_base: None,
            ..scanned
        });
        assert_eq!(
            (inherited.cut_file, inherited.seal, inherited.log_ends_here),
            (false, false, false)
        );
    }

    #[test]
    fn an_inherited_tail_is_adopted_sealed_or_dropped() {
        assert_eq!(tail_action(false, 5 << 20), TailAction::Keep);
        assert_eq!(tail_action(true, 0), TailAction::DropAndStartOwn);
        assert_eq!(tail_action(true, 1), TailAction::Adopt);
        assert_eq!(tail_action(true, ADOPT_TAIL_MAX_BYTES), TailAction::Adopt);
        assert_eq!(
            tail_action(true, ADOPT_TAIL_MAX_BYTES + 1),
            TailAction::SealAndStartOwn
        );
    }

    #[test]
    fn the_segment_holding_an_offset() {
        assert_eq!(segment_holding(&[0, 100, 200], 150), 100);
        assert_eq!(segment_holding(&[0, 100, 200], 200), 200);
        assert_eq!(segment_holding(&[100, 200], 50), 100);
    }
}
