//! DescribeAcls (key 29): SECURITY_DISABLED, as Apache Kafka answers without an authorizer.

use crate::handlers::acl_requests::DESCRIBE_MESSAGE;
use crate::protocol::messages::describe_acls::{DescribeAclsRequest, DescribeAclsResponse};
use crate::protocol::ErrorCode;

/// Answers DescribeAcls.
pub fn handle(_request: DescribeAclsRequest) -> DescribeAclsResponse {
    DescribeAclsResponse {
        error_code: ErrorCode::SecurityDisabled.code(),
        error_message: Some(DESCRIBE_MESSAGE.into()),
        ..Default::default()
    }
}
