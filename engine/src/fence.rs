//! The storage fence: claims that make a stale leader's writes harmless.
//!
//! kaas brokers share one volume, and the leader of a partition (or the coordinator of a
//! group) is chosen by an assignment carrying a per-partition epoch. A broker paused by the
//! kernel, stalled or cut off may wake up still believing it leads and go on writing. The
//! assignment cannot stop that; this module makes it harmless at the storage level.
//!
//! # Files
//!
//! In a partition directory (and the same in a group directory):
//!
//! ```text
//! claims/<epoch:020>        empty; created with O_EXCL; durable (with `claims/`) by
//!                           the volume barrier at the end of step 1
//! claims/<epoch:020>.live   empty; the leader's token: exists while no newer claimant
//!                           has superseded it (removed by that claimant)
//! claims/<epoch:020>.end    the claim's record, written in place after recovery and
//!                           made durable by a volume barrier (a torn one fails its
//!                           CRC: none)
//! <name>-e<epoch>.<ext>     every file a leader at epoch > 0 writes carries its epoch
//! <name>.<ext>              epoch 0: today's names, standalone mode, no claim
//! ```
//!
//! The record (`.end`, big-endian): `"KCLM" | u16 version 1 | u32 epoch | u64 end offset |
//! u32 count | count × (u64 base offset, u64 length) | u32 CRC-32 (IEEE) of everything
//! before it`. For a partition the entries are the segments the leader inherited (hard
//! links to an older epoch's files) and how many bytes of each count (`u64::MAX`: a
//! segment the leader adopted, see below); the end offset is where the recovered log
//! ended. A group store records no entries.
//!
//! # Takeover at epoch E
//!
//! 1. Fail with [`EngineError::Fenced`] if a claim above E exists. Create `claims/<E>` with
//!    `O_EXCL` (a claim at E that exists already is this owner's own earlier attempt: the
//!    controller never gives one epoch to two brokers), then the token `claims/<E>.live`,
//!    then list `claims/`: fail if a claim above E exists now; otherwise remove the token of
//!    every older claim listed (superseding its leader), and wait for a volume barrier
//!    (one `syncfs` shared by every takeover in flight, [`crate::volume_sync`]) that makes
//!    the claim, the token and the removals durable before step 2.
//! 2. Only now read: the base is the newest claim below E with a record (or epoch 0 when
//!    there is none). Its checkpoint files and producer snapshots (which their writer only
//!    ever replaces by a rename) and its segment files are hard-linked, and the segments'
//!    indexes copied (except a tail small enough to be adopted, below), under epoch-E
//!    names; bytes of an inherited segment past the length in the base's record never
//!    count.
//! 3. Recover from the epoch-E names without writing any inherited file: a torn tail is
//!    cut logically (the length is recorded, the file is not truncated), earlier segments
//!    get epoch-E index files, and appends go to a new segment of epoch E at the recovered
//!    end, never into the inherited last segment. What recovery read of the old leader's
//!    last segment is fdatasync'd, so it is durable before anything builds on it. A last
//!    segment of at most `recovery::ADOPT_TAIL_MAX_BYTES` counted bytes is instead adopted
//!    (below, "Adopting the inherited tail"): its counted bytes are copied into a file of
//!    E's own, which the appends then extend. A volume barrier then makes everything
//!    steps 2 and 3 wrote durable.
//! 4. Write `claims/<E>.end`, wait for a volume barrier, and check for a newer claim again:
//!    E leads from here. The clean-up comes after, off the takeover's critical path (a
//!    minute later for a partition, by the shard's maintenance; at once for a group store):
//!    remove the names of older epochs (the links keep the data) and their claims. Until
//!    then nobody reads them: a takeover's base is the newest claim with a record, and from
//!    E on that is E or newer. The removals are not fsynced: a name a crash brings back
//!    belongs to an epoch below E, which no epoch from E on reads, and the next clean-up
//!    removes it again.
//!
//! The record is written in place, not through a temporary file and a rename: a record
//! that is torn or empty fails its CRC and reads as no record, and that is the truth
//! whenever it can happen. After a crash: the takeover had not finished (E answers nothing
//! before the barrier after it returned), and a retry at E starts over. Read by a claimant F > E
//! while E is still writing it: F's claim came before E's check that follows the write, so
//! E stops there and never answers, and F takes the older base, whose files E only removes
//! after that check.
//!
//! Reopening at E once `claims/<E>.end` exists reads the epoch-E names, with the recorded
//! lengths of the inherited segments (an adopted one is E's own and counts whole), and
//! skips the copying.
//!
//! # What a stale writer at epoch O < E can still do, and why nobody sees it
//!
//! - Append to its active segment and flush: the file is shared with E through a link, but
//!   only the bytes below the length E recorded count for E and every later epoch, and E
//!   recorded what was there after its claim existed. Its next flush fails (below).
//! - Roll: the new segment is named for epoch O, which E and later epochs never read.
//! - Seal a segment (truncate it to its exact size, write its indexes): the size is that of
//!   its whole batches, at least what E counted; the indexes are epoch-O files (E copied
//!   its own).
//! - Checkpoint, write producer snapshots, delete segments by retention, delete a group:
//!   only epoch-O names, which no newer epoch reads; removing a name leaves E's link. (Its
//!   close checks its token first and, once superseded, writes no checkpoint at all.)
//! - Clean: its cleaned copies go to epoch-O names, renamed over O's own names, which
//!   leaves the files E linked as they were; before each swap it checks its token, so at
//!   most a swap it checked just before E's claim lands after it, in a name E never reads.
//! - Write its cleaner checkpoint, which E copies in step 2 and may find written after its
//!   claim: O writes one only after a token check that follows every swap the value
//!   counts on ([`crate::compaction::cleaner_checkpoint`]), so those swaps came before E
//!   superseded O, and the files E linked hold them.
//!
//! # Adopting the inherited tail
//!
//! When recovery at E ends in an inherited segment holding at most
//! `recovery::ADOPT_TAIL_MAX_BYTES` counted bytes (the common case after a takeover of a
//! quiet partition), it copies exactly those bytes, which its scan validated, to a
//! temporary file of E's and renames it over the segment's epoch-E name (the hard link);
//! the volume barrier that follows recovery makes both durable, before the record. E's record lists the
//! segment as adopted (`u64::MAX`, as below) from its first version on, and E appends to
//! the copy: it is E's active segment, as a segment E rolled would be.
//! - Its offset and time indexes are not copied in step 2: recovery finds none, scans the
//!   segment from its start and rebuilds them (derived data, written under E's names at E's
//!   next checkpoint), so the copy is the only file the adoption creates besides its
//!   transaction index, if it has one: that one is copied, because the entries of markers
//!   below the producer snapshot cannot be rebuilt by a scan that replays producer state
//!   only from the snapshot ([`crate::txn_index`]).
//! - The copy holds the bytes that count and nothing else, durably, before the record says
//!   it counts whole; the file older epochs name is never written (a stale leader's appends
//!   land in it and nowhere E reads).
//! - A crash before the record leaves a takeover that never finished (the retry removes
//!   E's files); after it, the copy is there under E's name, since the barrier covering
//!   the copy and the rename came first.
//! - A takeover at F > E treats the adopted segment as E's own: it links it and takes it up
//!   to its valid end, as for a segment E rolled, and records what it counted. What a stale
//!   E appends after F's claim is never acknowledged (its token check fails), exactly as
//!   for any segment of E's own.
//!
//! # Adopting a cleaned segment
//!
//! The cleaner at E never writes an inherited file either. It writes a cleaned copy under
//! a temporary epoch-E name and renames it over the segment's epoch-E name
//! (`crate::compaction::swap`): the name now denotes a new file of E's own, and the file
//! older epochs link is untouched. While E's record bounds the segment by its inherited
//! length, that copy must be no longer than the length (a reopen at E and the next takeover
//! count only that many bytes). Right after the swap, E rewrites its record (temporary
//! file, fsync, rename, directory fsync) with the segment's length set to `u64::MAX`: the
//! segment is adopted, counts whole from then on, and later copies may grow (a delete
//! horizon lengthens a batch). This keeps every argument of this page:
//! - Nobody but E's cleaner writes the adopted file: a stale leader appends only to its own
//!   active segment and renames its cleaned copies over its own names. No bytes past the
//!   file's end can be a stale writer's, so no bound has to exclude them.
//! - A crash between the swap and the record rewrite leaves the copy bounded by the old
//!   length, which is at least the copy's: all of it counts, as after the rewrite.
//! - A takeover at F > E reads E's record after superseding E (step 1). If it read the
//!   record from before the rewrite, it bounds the segment by the old length, and the file
//!   it links (the link or the first copy, both no longer) fits: a longer copy needs a
//!   later swap, whose token check comes after the rewrite and so after F superseded E,
//!   and fails. If it read the rewritten record, the first copy was renamed in before: F
//!   links a file of E's own and takes all of it (and records its length in F's record).
//! - A stale E that rewrites its record after F's clean-up removed it leaves a record without
//!   a claim: a takeover chooses its base among the claims it lists, so nobody reads it, and
//!   the next clean-up removes it.
//! - Acknowledge: after each fdatasync, and before it answers anyone, a leader checks that
//!   its token `claims/<O>.live` still exists (one `openat` on its ring per group commit,
//!   [`check`]). A missing token fails the flush with [`EngineError::Fenced`] and every
//!   later call on the handle too. A write acknowledged by O was therefore durable before
//!   O's token was removed, which E does before it reads anything: E sees it, and
//!   acknowledged writes survive. A write O made but never acknowledged may or may not be
//!   in E's log, as after a crash.
//!
//! # Why one token per leader sees every newer claim, whatever epochs are skipped
//!
//! The check names one fixed file, yet a newer claim can be at any epoch above O (the
//! controller may skip epochs) and claimants may race. Take a leader at O that passed its
//! own takeover and any claimant E > O. Each did, in this order: create its claim, (O:
//! create its token), list `claims/`. Either E's listing saw O's claim: then E removes O's
//! token before reading, and O's token existed by then — it was created before O's own
//! listing, and had O listed after E's claim existed it would have seen E and stopped.
//! Or E's listing did not see O's claim: then O's claim, and so O's listing, came after
//! E's claim, so O's listing saw E and O never led. So every leader that passed its takeover
//! loses its token before any newer claimant reads, and a token is only ever removed by
//! a newer claimant: a leader whose token is there was not superseded when it checked.
//! Tokens of a claimant that stopped remain until the next takeover's clean-up and fence
//! nobody (it never led). A newer claim that never gets as far as removing tokens read
//! nothing and acknowledges nothing; the old leader goes on until a claimant does. The
//! volume barrier after the removals makes them durable before E reads, so a volume that
//! restarts cannot revive a superseded token.
//!
//! # What the shared file system must guarantee
//!
//! `O_EXCL` creation is atomic and, once it returns, visible to every broker's readdir and
//! open; a removal, once it returns, makes every later open of the name fail (no cached
//! positive lookup); data written and fdatasync'd by one broker is read by another that
//! opens the file afterwards; hard links work; `syncfs` makes durable everything this
//! broker wrote on the volume before it (see [`crate::volume_sync`]). A local disk (tests,
//! standalone) and CephFS do this. NFS
//! does only as NFSv4 (close-to-open, so never `nocto`) with lookup and attribute caching
//! off for the partition and group directories (`lookupcache=none`, `actimeo=0`): otherwise
//! a broker can miss a new claim. The binary's start-up check refuses any other NFS mount.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::storage::{Files, Storage};

/// Subdirectory of a partition or group directory holding the claims.
pub const CLAIMS_DIR: &str = "claims";
const RECORD_MAGIC: &[u8; 4] = b"KCLM";
const RECORD_VERSION: u16 = 1;
/// Fixed part of a record: magic, version, epoch, end offset, count, CRC.
const RECORD_FIXED_LEN: usize = 4 + 2 + 4 + 8 + 4 + 4;
const RECORD_ENTRY_LEN: usize = 16;
const END_SUFFIX: &str = ".end";
const LIVE_SUFFIX: &str = ".live";

/// `stem` with the epoch suffix of epoch `epoch` (none for epoch 0).
pub(crate) fn with_epoch(stem: &str, epoch: u32) -> String {
    if epoch == 0 {
        stem.to_owned()
    } else {
        format!("{stem}-e{epoch}")
    }
}

/// Splits an epoch suffix off a stem: `("x", 3)` for `x-e3`, `(stem, 0)` without one.
pub(crate) fn split_epoch(stem: &str) -> (&str, u32) {
    if let Some(at) = stem.rfind("-e") {
        let digits = &stem[at + 2..];
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0');
        if let (true, Ok(epoch)) = (canonical, digits.parse::<u32>()) {
            return (&stem[..at], epoch);
        }
    }
    (stem, 0)
}

/// The epoch a file name belongs to (a `.tmp` leftover belongs to its target's epoch).
pub(crate) fn file_epoch(name: &str) -> u32 {
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    let stem = match name.rfind('.') {
        Some(dot) => &name[..dot],
        None => name,
    };
    split_epoch(stem).1
}

fn claims_dir(dir: &Path) -> PathBuf {
    dir.join(CLAIMS_DIR)
}

fn claim_path(dir: &Path, epoch: u32) -> PathBuf {
    claims_dir(dir).join(format!("{epoch:020}"))
}

fn live_path(dir: &Path, epoch: u32) -> PathBuf {
    claims_dir(dir).join(format!("{epoch:020}{LIVE_SUFFIX}"))
}

fn record_path(dir: &Path, epoch: u32) -> PathBuf {
    claims_dir(dir).join(format!("{epoch:020}{END_SUFFIX}"))
}

fn parse_claim_name(name: &str) -> Option<u32> {
    if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// What a claim records once its takeover has recovered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimRecord {
    /// The claim's epoch.
    pub epoch: u32,
    /// Where the recovered log ended (for a group store: the length of its new file).
    pub end_offset: u64,
    /// Inherited segments: (base offset, bytes that count), ascending.
    pub segments: Vec<(u64, u64)>,
}

impl ClaimRecord {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_FIXED_LEN + self.segments.len() * 16);
        out.extend_from_slice(RECORD_MAGIC);
        out.extend_from_slice(&RECORD_VERSION.to_be_bytes());
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&self.end_offset.to_be_bytes());
        out.extend_from_slice(&(self.segments.len() as u32).to_be_bytes());
        for (base, len) in &self.segments {
            out.extend_from_slice(&base.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses a record, checking magic, version, length and CRC.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let corrupt = |detail: &str| EngineError::Corrupt {
            what: "claim record".into(),
            detail: detail.into(),
        };
        if bytes.len() < RECORD_FIXED_LEN {
            return Err(corrupt("too short"));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let be_u32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let be_u64 = |b: &[u8]| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&b[..8]);
            u64::from_be_bytes(word)
        };
        if crc32fast::hash(body) != be_u32(crc) {
            return Err(corrupt("checksum mismatch"));
        }
        if &body[..4] != RECORD_MAGIC {
            return Err(corrupt("bad magic"));
        }
        if u16::from_be_bytes([body[4], body[5]]) != RECORD_VERSION {
            return Err(corrupt("unknown version"));
        }
        let epoch = be_u32(&body[6..]);
        let end_offset = be_u64(&body[10..]);
        let count = be_u32(&body[18..]) as usize;
        let entries = &body[22..];
        if entries.len() / RECORD_ENTRY_LEN != count || entries.len() % RECORD_ENTRY_LEN != 0 {
            return Err(corrupt("entry count does not match the length"));
        }
        let segments = entries
            .chunks_exact(RECORD_ENTRY_LEN)
            .map(|entry| (be_u64(entry), be_u64(&entry[8..])))
            .collect();
        Ok(ClaimRecord {
            epoch,
            end_offset,
            segments,
        })
    }

    /// The counted length of inherited segment `base`, if this record lists it.
    pub fn length_of(&self, base: u64) -> Option<u64> {
        self.segments
            .binary_search_by_key(&base, |(b, _)| *b)
            .ok()
            .map(|i| self.segments[i].1)
    }
}

/// The epochs of every claim in `dir`, ascending.
pub async fn claims(storage: &Storage, dir: &Path) -> Result<Vec<u32>> {
    let claims_dir = claims_dir(dir);
    let what = || format!("listing the claims of {}", dir.display());
    storage
        .batch(what, move |files| listed_claims(files, &claims_dir))
        .await
}

/// Fails with [`EngineError::Fenced`] when a claim above `epoch` exists in `dir` (a
/// readdir of `claims/` on a file thread): what a claimant checks before and after it
/// claims, and again once it has recorded.
async fn check_claims(storage: &Storage, dir: &Path, epoch: u32) -> Result<()> {
    match claims(storage, dir).await?.last() {
        Some(&newest) if newest > epoch => Err(fenced(dir, epoch, newest)),
        _ => Ok(()),
    }
}

fn fenced(dir: &Path, epoch: u32, by_epoch: u32) -> EngineError {
    EngineError::Fenced {
        dir: dir.display().to_string(),
        epoch,
        by_epoch,
    }
}

/// Fails with [`EngineError::Fenced`] once a newer claimant has superseded the leader at
/// `epoch` in `dir` (a partition or group directory, relative to the storage root): the
/// check a leader makes after each fdatasync and before it acknowledges. It asks whether
/// the leader's own `claims/<epoch>.live` still exists — one `openat` on the shard's ring
/// ([`Storage::file_exists`]); only when it is gone does it list `claims/` to name the
/// newer epoch. See the module documentation for why this sees every newer claim.
pub async fn check(storage: &Storage, dir: &Path, epoch: u32) -> Result<()> {
    if storage.file_exists(&live_path(dir, epoch)).await? {
        return Ok(());
    }
    // Only a claimant above `epoch` removes the token (after creating its claim, which
    // stays until an even newer one supersedes it in turn), so the newest claim names it.
    let newest = claims(storage, dir).await?.last().copied().unwrap_or(epoch);
    Err(fenced(dir, epoch, newest.max(epoch)))
}

/// What fenced a handle, kept so that every later call fails the same way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedBy {
    dir: String,
    epoch: u32,
    by_epoch: u32,
}

impl FencedBy {
    /// The fence an [`EngineError::Fenced`] names; `None` for any other error.
    pub fn from_error(error: &EngineError) -> Option<Self> {
        match error {
            EngineError::Fenced {
                dir,
                epoch,
                by_epoch,
            } => Some(FencedBy {
                dir: dir.clone(),
                epoch: *epoch,
                by_epoch: *by_epoch,
            }),
            _ => None,
        }
    }

    /// The error to answer with.
    pub fn error(&self) -> EngineError {
        EngineError::Fenced {
            dir: self.dir.clone(),
            epoch: self.epoch,
            by_epoch: self.by_epoch,
        }
    }
}

/// How an open at an epoch proceeds after claiming.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// This epoch's takeover completed before: read its own files.
    Reopen(ClaimRecord),
    /// A takeover: inherit from `base_epoch` (0: today's names), whose record bounds the
    /// segments it inherited in turn.
    Takeover {
        base_epoch: u32,
        base_record: Option<ClaimRecord>,
    },
}

/// Claims `dir` for `epoch` (step 1 of the takeover) and finds what to read (step 2): two
/// file-thread jobs and a volume barrier.
pub(crate) async fn claim(storage: &Storage, dir: &Path, epoch: u32) -> Result<Claimed> {
    // Made durable by the volume barrier below, with the token and the removals.
    let ticket = storage.sync_ticket()?;
    let owned = dir.to_path_buf();
    let what = || format!("claiming {} for epoch {epoch}", dir.display());
    let (created, found) = match storage
        .batch(what, move |files| claim_files(files, &owned, epoch))
        .await?
    {
        Step1::Claimed { created, found } => (created, found),
        Step1::Newer(newest) => return Err(fenced(dir, epoch, newest)),
    };
    // Makes the claim, our token and the removals durable before anything is read, so that
    // a volume that restarts cannot bring a stale leader's token back: one barrier shared
    // with every takeover in flight ([`crate::volume_sync`]).
    storage.sync_volume(ticket).await?;
    let owned = dir.to_path_buf();
    let what = || format!("reading the claims of {}", dir.display());
    storage
        .batch(what, move |files| {
            if !created {
                if let Some(own) = read_record(files, &owned, epoch)? {
                    return Ok(Claimed::Reopen(own));
                }
            }
            for &older in found.iter().rev().filter(|&&older| older < epoch) {
                // A claim without a record is a takeover that never finished: it
                // acknowledged nothing, and what it wrote is garbage.
                if let Some(record) = read_record(files, &owned, older)? {
                    return Ok(Claimed::Takeover {
                        base_epoch: older,
                        base_record: Some(record),
                    });
                }
            }
            Ok(Claimed::Takeover {
                base_epoch: 0,
                base_record: None,
            })
        })
        .await
}

/// What step 1's file calls found.
enum Step1 {
    /// Claimed (`created`: false when the claim existed, this owner's earlier attempt);
    /// `found`: every claim listed after ours, ascending.
    Claimed { created: bool, found: Vec<u32> },
    /// A claim above ours exists.
    Newer(u32),
}

/// Step 1's calls, in one job: fail early when a newer claim exists, create the claim and
/// the token, list, and remove the token of every older claim listed.
fn claim_files(files: &dyn Files, dir: &Path, epoch: u32) -> std::io::Result<Step1> {
    let claims_dir = claims_dir(dir);
    if let Some(&newest) = listed_claims(files, &claims_dir)?.last() {
        if newest > epoch {
            return Ok(Step1::Newer(newest));
        }
    }
    files.create_dir_all(&claims_dir)?;
    let created = files.create_new(&claim_path(dir, epoch))?;
    // The token goes first, the listing after it: a claimant above us that listed before
    // our token existed is seen by this listing, and we stop; one that lists later removes
    // the token (see the module documentation).
    files.create_empty(&live_path(dir, epoch))?;
    let found = listed_claims(files, &claims_dir)?;
    // A claim above ours made while we created ours wins; reading now would be wasted.
    if let Some(&newest) = found.last().filter(|&&newest| newest > epoch) {
        return Ok(Step1::Newer(newest));
    }
    // Supersede every older leader before reading anything: its next check fails, so
    // whatever it acknowledged was durable before now.
    for &older in found.iter().filter(|&&older| older < epoch) {
        files.remove(&live_path(dir, older))?;
    }
    Ok(Step1::Claimed { created, found })
}

/// The epochs of the claims in `claims_dir`, ascending.
fn listed_claims(files: &dyn Files, claims_dir: &Path) -> std::io::Result<Vec<u32>> {
    let mut epochs: Vec<u32> = files
        .list(claims_dir)?
        .iter()
        .filter_map(|name| parse_claim_name(name))
        .collect();
    epochs.sort_unstable();
    Ok(epochs)
}

fn read_record(files: &dyn Files, dir: &Path, epoch: u32) -> std::io::Result<Option<ClaimRecord>> {
    let Some(bytes) = files.read_small(&record_path(dir, epoch))? else {
        return Ok(None);
    };
    match ClaimRecord::decode(&bytes) {
        Ok(record) if record.epoch == epoch => Ok(Some(record)),
        Ok(_) | Err(_) => {
            tracing::warn!(dir = %dir.display(), epoch, "ignoring an unreadable claim record");
            Ok(None)
        }
    }
}

/// Step 4: records the claim durably and checks it still leads. The files of older epochs
/// stay until [`remove_superseded`].
pub(crate) async fn complete(storage: &Storage, dir: &Path, record: &ClaimRecord) -> Result<()> {
    let epoch = record.epoch;
    // Written in place and made durable by a volume barrier: a record torn by a crash fails
    // its CRC and reads as none, which is what it is (the takeover had not finished:
    // nothing was answered before the barrier returned). See the module doc.
    let ticket = storage.sync_ticket()?;
    storage
        .write_in_place(&record_path(dir, epoch), record.encode())
        .await?;
    storage.sync_volume(ticket).await?;
    // After this check a newer claimant sees our record and reads only epoch-`epoch`
    // names; before it, one that claimed may still be reading older names.
    check_claims(storage, dir, epoch).await
}

/// The clean-up after step 4 (see the module documentation): removes the files of epochs
/// below `epoch` that `is_engine_file` recognises, and their claims. Only for an epoch whose
/// takeover completed ([`complete`] returned): from then on no claimant reads those names.
pub(crate) async fn remove_superseded(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    is_engine_file: fn(&str) -> bool,
) -> Result<()> {
    // The removals are not fsynced: a name of an older epoch that a crash brings back is
    // one no epoch from `epoch` on reads, and the next clean-up removes it again.
    for name in storage.list_dir(dir).await? {
        if is_engine_file(&name) && file_epoch(&name) < epoch {
            storage.remove(&dir.join(&name)).await?;
        }
    }
    let claims_dir = claims_dir(dir);
    for name in storage.list_dir(&claims_dir).await? {
        let stem = name.strip_suffix(".tmp").unwrap_or(&name);
        let stem = stem.strip_suffix(END_SUFFIX).unwrap_or(stem);
        let stem = stem.strip_suffix(LIVE_SUFFIX).unwrap_or(stem);
        if parse_claim_name(stem).is_some_and(|older| older < epoch) {
            storage.remove(&claims_dir.join(&name)).await?;
        }
    }
    Ok(())
}

/// The length a claim record gives a segment that the epoch adopted: its live file is one
/// the epoch wrote itself (a cleaned copy swapped in for an inherited link), so all of it
/// counts, at reopen and for the next takeover alike.
pub(crate) const ADOPTED: u64 = u64::MAX;

/// Marks inherited segment `base` adopted in the record of `epoch` (see the module doc,
/// "Adopting a cleaned segment"): the caller has just swapped a file of its own, no longer
/// than the recorded length, in for the link. Returns false, writing nothing, when the
/// record is missing or does not list the segment.
pub(crate) async fn adopt_segment(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    base: u64,
) -> Result<bool> {
    let owned = dir.to_path_buf();
    let what = || format!("reading the claim record of {}", dir.display());
    let record = storage
        .batch(what, move |files| read_record(files, &owned, epoch))
        .await?;
    let Some(mut record) = record else {
        return Ok(false);
    };
    let Ok(at) = record.segments.binary_search_by_key(&base, |(b, _)| *b) else {
        return Ok(false);
    };
    record.segments[at].1 = ADOPTED;
    storage
        .write_small_durable(&record_path(dir, epoch), record.encode())
        .await?;
    Ok(true)
}

/// Removes what an unfinished takeover at `epoch` left (files of that epoch), so a retry
/// starts clean; no other epoch ever reads them.
pub(crate) async fn remove_unfinished(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    is_engine_file: fn(&str) -> bool,
) -> Result<()> {
    let owned = dir.to_path_buf();
    let what = || {
        format!(
            "removing an unfinished takeover's files in {}",
            dir.display()
        )
    };
    storage
        .batch(what, move |files| {
            remove_unfinished_files(files, &owned, epoch, is_engine_file)
        })
        .await
}

/// [`remove_unfinished`]'s calls, for a caller already in a batch.
pub(crate) fn remove_unfinished_files(
    files: &dyn Files,
    dir: &Path,
    epoch: u32,
    is_engine_file: fn(&str) -> bool,
) -> std::io::Result<()> {
    for name in files.list(dir)? {
        if is_engine_file(&name) && file_epoch(&name) == epoch {
            files.remove(&dir.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_suffixes_round_trip() {
        assert_eq!(with_epoch("recovery-point", 0), "recovery-point");
        assert_eq!(with_epoch("recovery-point", 7), "recovery-point-e7");
        assert_eq!(split_epoch("recovery-point-e7"), ("recovery-point", 7));
        assert_eq!(
            split_epoch("leader-epoch-checkpoint"),
            ("leader-epoch-checkpoint", 0)
        );
        assert_eq!(split_epoch("x-e07"), ("x-e07", 0));
        assert_eq!(split_epoch("x-e"), ("x-e", 0));
        assert_eq!(file_epoch("00000000000000000042-e3.log"), 3);
        assert_eq!(file_epoch("00000000000000000042.log"), 0);
        assert_eq!(file_epoch("leader-epoch-checkpoint-e12.tmp"), 12);
        assert_eq!(file_epoch("offsets-e4.log.tmp"), 4);
    }

    fn fenced_by(result: Result<()>) -> Option<u32> {
        match result {
            Err(EngineError::Fenced { by_epoch, .. }) => Some(by_epoch),
            _ => None,
        }
    }

    #[test]
    fn a_claim_skipping_epochs_fences_every_older_leader() {
        futures_lite::future::block_on(async {
            let storage = Storage::memory();
            let dir = Path::new("topics/t/0");
            assert!(matches!(
                claim(&storage, dir, 1).await,
                Ok(Claimed::Takeover { base_epoch: 0, .. })
            ));
            check(&storage, dir, 1).await.expect("epoch 1 leads");
            // Epoch 2 claims but never finishes; 1 is superseded all the same.
            claim(&storage, dir, 2).await.expect("claim 2");
            assert_eq!(fenced_by(check(&storage, dir, 1).await), Some(2));
            // The controller skips to 7: 2's check must fail although 3 is never claimed.
            claim(&storage, dir, 7).await.expect("claim 7");
            assert_eq!(fenced_by(check(&storage, dir, 2).await), Some(7));
            assert_eq!(fenced_by(check(&storage, dir, 1).await), Some(7));
            check(&storage, dir, 7).await.expect("epoch 7 leads");
            // A late claimant below the newest claim never leads, and its token fences
            // nobody else.
            assert_eq!(fenced_by(claim(&storage, dir, 5).await.map(drop)), Some(7));
            check(&storage, dir, 7).await.expect("epoch 7 still leads");
        });
    }

    #[test]
    fn records_round_trip_and_reject_damage() {
        let record = ClaimRecord {
            epoch: 3,
            end_offset: 99,
            segments: vec![(0, 4096), (50, 123)],
        };
        let bytes = record.encode();
        assert_eq!(ClaimRecord::decode(&bytes).expect("decode"), record);
        assert_eq!(record.length_of(50), Some(123));
        assert_eq!(record.length_of(51), None);
        for cut in 0..bytes.len() {
            assert!(ClaimRecord::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for flip in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[flip] ^= 0x10;
            assert!(ClaimRecord::decode(&damaged).is_err(), "flip at {flip}");
        }
    }
}
