//! One group as the coordinator holds it: its protocol state and its durable store.

use std::cell::{Cell, RefCell};

use bytes::Bytes;
use kaas_engine::group_store::{GroupChange, GroupStore};

use crate::groups::classic::ClassicGroup;
use crate::protocol::ErrorCode;

/// The protocol a group runs.
#[derive(Debug)]
pub enum GroupState {
    /// Classic protocol (JoinGroup/SyncGroup), or a group that only stores offsets.
    Classic(ClassicGroup),
}

/// A group: protocol state plus its committed offsets and persisted metadata.
pub struct Group {
    /// Group id.
    pub id: String,
    /// Offsets and metadata on the data volume.
    pub store: GroupStore,
    /// Protocol state; never borrowed across an await.
    pub state: RefCell<GroupState>,
    /// Requests working on the group's store right now (it is not dropped meanwhile).
    busy: Cell<u32>,
}

/// Marks a group busy while alive.
pub struct BusyGuard<'a>(&'a Group);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.busy.set(self.0.busy.get() - 1);
    }
}

impl Group {
    /// Rebuilds a group from its store (a new classic group when nothing usable is stored).
    pub fn from_store(store: GroupStore, now_ms: i64) -> Self {
        let id = store.group_id().to_string();
        let state = store
            .metadata()
            .filter(|blob| !blob.is_empty())
            .and_then(|blob| match ClassicGroup::decode(&id, &blob, now_ms) {
                Ok(group) => Some(GroupState::Classic(group)),
                Err(error) => {
                    tracing::warn!(group = %id, %error, "ignoring unreadable group metadata");
                    None
                }
            })
            .unwrap_or_else(|| GroupState::Classic(ClassicGroup::new(&id)));
        Group {
            id,
            store,
            state: RefCell::new(state),
            busy: Cell::new(0),
        }
    }

    /// Keeps the group from being dropped as unused while the guard lives.
    pub fn busy(&self) -> BusyGuard<'_> {
        self.busy.set(self.busy.get() + 1);
        BusyGuard(self)
    }

    /// The blob to persist if the protocol state changed since the last call.
    pub fn take_changed_metadata(&self) -> Option<Bytes> {
        match &mut *self.state.borrow_mut() {
            GroupState::Classic(group) => group.take_dirty().then(|| Bytes::from(group.encode())),
        }
    }

    /// Persists the protocol state if it changed; failures are logged (members recover by
    /// rejoining, offsets are unaffected).
    pub async fn persist_if_changed(&self) {
        if let Some(blob) = self.take_changed_metadata() {
            if let Err(error) = self.store.apply(vec![GroupChange::Metadata(blob)]).await {
                tracing::error!(group = %self.id, %error, "persisting group metadata");
            }
        }
    }

    /// Whether the group has no members and no committed offsets.
    pub fn is_unused(&self) -> bool {
        let no_members = match &*self.state.borrow() {
            GroupState::Classic(group) => group.is_empty(),
        };
        no_members && self.busy.get() == 0 && self.store.offsets().is_empty()
    }

    /// The error for an OffsetFetch by `member` (id and epoch, OffsetFetch v9+).
    pub fn validate_offset_fetch(&self, member: Option<&(String, i32)>) -> ErrorCode {
        match &*self.state.borrow() {
            GroupState::Classic(_) => {
                let _ = member;
                ErrorCode::None
            }
        }
    }

    /// Whether the group has no members (offsets may remain).
    pub fn has_no_members(&self) -> bool {
        match &*self.state.borrow() {
            GroupState::Classic(group) => group.is_empty(),
        }
    }
}
