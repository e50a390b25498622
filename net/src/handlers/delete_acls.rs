//! DeleteAcls (key 31): SECURITY_DISABLED for every filter, as Apache Kafka answers without
//! an authorizer.

use crate::handlers::acl_requests::CHANGE_MESSAGE;
use crate::protocol::messages::delete_acls::{
    DeleteAclsFilterResult, DeleteAclsRequest, DeleteAclsResponse,
};
use crate::protocol::ErrorCode;

/// Answers DeleteAcls: one result per filter, in request order, matching nothing.
pub fn handle(request: DeleteAclsRequest) -> DeleteAclsResponse {
    DeleteAclsResponse {
        filter_results: request
            .filters
            .iter()
            .map(|_| DeleteAclsFilterResult {
                error_code: ErrorCode::SecurityDisabled.code(),
                error_message: Some(CHANGE_MESSAGE.into()),
                matching_acls: Vec::new(),
            })
            .collect(),
        ..Default::default()
    }
}
