//! CreateAcls (key 30): SECURITY_DISABLED for every creation, as Apache Kafka answers
//! without an authorizer.

use crate::handlers::acl_requests::CHANGE_MESSAGE;
use crate::protocol::messages::create_acls::{
    AclCreationResult, CreateAclsRequest, CreateAclsResponse,
};
use crate::protocol::ErrorCode;

/// Answers CreateAcls: one result per creation, in request order.
pub fn handle(request: CreateAclsRequest) -> CreateAclsResponse {
    CreateAclsResponse {
        results: request
            .creations
            .iter()
            .map(|_| AclCreationResult {
                error_code: ErrorCode::SecurityDisabled.code(),
                error_message: Some(CHANGE_MESSAGE.into()),
            })
            .collect(),
        ..Default::default()
    }
}
