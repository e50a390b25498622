//! How a group appears in ListGroups and DescribeGroups.

use crate::groups::classic::ClassicState;
use crate::groups::group::{Group, GroupState};
use crate::protocol::messages::describe_groups::{DescribedGroup, DescribedGroupMember};
use crate::protocol::messages::list_groups::ListedGroup;
use crate::protocol::ErrorCode;

impl Group {
    /// The group's ListGroups entry.
    pub fn listing(&self) -> ListedGroup {
        match &*self.state.borrow() {
            GroupState::Classic(classic) => ListedGroup {
                group_id: self.id.clone(),
                protocol_type: classic.protocol_type().unwrap_or_default().to_string(),
                group_state: classic.state().as_str().to_string(),
                group_type: "classic".into(),
            },
            GroupState::Consumer(consumer) => ListedGroup {
                group_id: self.id.clone(),
                protocol_type: "consumer".into(),
                group_state: consumer.state().as_str().to_string(),
                group_type: "consumer".into(),
            },
        }
    }

    /// The DescribeGroups entry of a classic group; `None` for other groups.
    pub fn describe_classic(&self) -> Option<DescribedGroup> {
        let state = self.state.borrow();
        let GroupState::Classic(classic) = &*state else {
            return None;
        };
        let stable = classic.state() == ClassicState::Stable;
        let protocol = classic.protocol_name().unwrap_or_default().to_string();
        let members = classic
            .members()
            .map(|m| DescribedGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Default::default()
                },
                member_assignment: if stable {
                    m.assignment.clone()
                } else {
                    Default::default()
                },
            })
            .collect();
        Some(DescribedGroup {
            error_code: ErrorCode::None.code(),
            group_id: self.id.clone(),
            group_state: classic.state().as_str().to_string(),
            protocol_type: classic.protocol_type().unwrap_or_default().to_string(),
            protocol_data: if stable { protocol } else { String::new() },
            members,
            ..Default::default()
        })
    }
}
