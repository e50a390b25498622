//! The campaign for the `kaas-controller` Lease as a state machine with no I/O: the Lease
//! adapter feeds it what it observed (a version of the Lease from a watch or a read, the
//! outcome of a request it asked for) and the time as a [`MonotonicTime`], and carries out the
//! [`Action`]s it returns, in order: requests to the API server and events to publish
//! (raft-rs' `step` style, like [`crate::controller`]). One campaign runs on every broker.
//!
//! # When the Lease counts as free
//!
//! It has no holder (never held, or released); or this broker's own identity holds it (an
//! earlier run of this pod that died without releasing: a StatefulSet never runs one pod
//! name twice); or its `resourceVersion` has not changed for the lease duration (the larger
//! of this broker's and the Lease's own `leaseDurationSeconds`) as measured on this broker's
//! monotonic clock from when this broker first saw that version ([`Sighting::free_at`]).
//! Expiry is judged by observation, as client-go's leader election does, not by the holder's
//! `renewTime`, so a skewed wall clock on either side changes nothing (which is why
//! [`ObservedLease`] carries no renew time); the price is that a broker that starts while a
//! dead holder's Lease is there waits one full lease duration.
//!
//! A version is seen when a watch delivers it ([`Input::Watched`]), when the answer to a read
//! (or a write's conflict) returns it (seen when the answer arrived, never when the request
//! was sent: the version may have been written after the send), or when a write of this
//! broker made it (seen when the write was sent); a version seen twice keeps the earlier
//! sighting.
//! A follower wakes when the version it saw becomes free ([`Campaign::next_wake`]), once per
//! version, and reads the Lease to take it over; besides, it reads the Lease every renew
//! period (for a watch that is down or lagging).
//!
//! # Terms and deadlines
//!
//! Every acquisition raises `leaseTransitions` (the epoch), a re-acquisition by the same
//! broker too; a renewal keeps it. The renew deadline published with [`Event::Acquired`] and
//! [`Event::Renewed`] is `sent + lease duration − renew period`, where `sent` is when the
//! successful request was sent. Why that is safe: another broker takes the Lease over only
//! with a compare-and-swap on the last version it saw, after that version went unchanged for
//! a lease duration since it saw it; it saw it when a watch delivered it or an answer
//! returned it, both after the version existed, so after this broker sent the write that
//! made it, however long that write, the read or its answer took on the way. So no other
//! broker leads before `sent + lease duration`, and the renew period is the margin for the
//! final rename and for clocks that tick at slightly different rates. [`Event::Acquired`] names the holder taken over
//! from when the Lease was taken because it expired (`expired_holder`).
//!
//! A failed request (an error, or no answer within [`CampaignConfig::request_timeout`]) is
//! tried again at the next renew period; a holder keeps its term until its deadline (the
//! controller stops writing then by itself) and writes again if a later renewal goes
//! through. A write that loses its compare-and-swap is [`Event::Lost`] for a holder, and so
//! is a watched version of a higher epoch held by another broker.
//!
//! [`Input::TakeOverAbove`] re-acquires the held Lease with `leaseTransitions` above a given
//! epoch; [`Input::Release`] releases it at once (holder cleared, transitions re-sent) and
//! keeps this broker from campaigning for one lease duration, so another broker takes over
//! without waiting for expiry.
//!
//! One request is in flight at a time: [`Campaign::tick`] starts nothing while one is, and a
//! command that arrives meanwhile waits for its answer.
//!
//! # Taking the Lease over before it expires
//!
//! A controller that dies would otherwise cost a lease duration. The adapter feeds what the
//! broker sees of the holder outside the Lease ([`Input::Holder`]): since when its heartbeat
//! stream to the holder's endpoint has been down, and whether the EndpointSlice calls the
//! holder not ready. A holder whose stream is down counts as dead at once when it is not
//! ready, else once the stream stayed down for [`CampaignConfig::holder_silence`]. A follower
//! then reads the Lease (once per version) and, if the version read is still that holder's,
//! acquires it by compare-and-swap on that `resourceVersion` at `leaseTransitions + 1`,
//! naming the holder as the one taken over from. Brokers that suspect together race on the
//! same version: the API server lets exactly one compare-and-swap through, and the others
//! get a conflict, learn the winner and follow it.
//!
//! The holder may be alive (paused, or cut off from this broker only), and then believes it
//! may write until its renew deadline: two brokers may believe so at once. Safety then rests
//! on epochs alone, never on timing: the new holder's epoch is above the old one's; every
//! broker's follower raises its epoch fence to the Lease's epoch as soon as its own campaign
//! observes it (`Event::Epoch`; the watch delivers it within milliseconds), so a file the old
//! holder renames afterwards is refused; a broker that had not observed it yet may apply at
//! most that file, whose leader epochs come from the old controller epoch's own range
//! (`crate::balancer`), below every epoch of the new one, so the new controller's leaders win
//! every claim; and the old holder stops at once when it learns of the newer term: from a
//! watched version of a higher epoch held by another broker ([`Event::Lost`] without waiting
//! for its renewal to conflict), or from its next renewal's conflict.

mod campaign;
mod observed;
#[cfg(test)]
mod tests;

pub use campaign::{Action, Answer, Campaign, CampaignConfig, Event, HolderSignal, Input, Request};
pub use observed::{MonotonicTime, ObservedLease, Sighting};
