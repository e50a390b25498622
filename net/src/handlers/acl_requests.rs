//! What the three ACL APIs (DescribeAcls, CreateAcls, DeleteAcls) share: kaas has no
//! authorizer, so, like Apache Kafka without one, it answers every well-formed ACL request
//! with SECURITY_DISABLED, and closes the connection on a filter or binding that names the
//! UNKNOWN (0) resource type, pattern type, operation or permission type (Kafka refuses to
//! parse such a request).

use crate::protocol::Request;

/// The wire code of `UNKNOWN` in ResourceType, PatternType, AclOperation and AclPermissionType.
const UNKNOWN: i8 = 0;

/// Kafka's message in DescribeAcls responses.
pub const DESCRIBE_MESSAGE: &str = "No Authorizer is configured on the broker";

/// Kafka's message in each CreateAcls and DeleteAcls result.
pub const CHANGE_MESSAGE: &str = "No Authorizer is configured.";

fn any_unknown(codes: [i8; 4]) -> bool {
    codes.contains(&UNKNOWN)
}

/// False for an ACL request that Kafka would refuse to parse (it then closes the connection);
/// true for every other request.
pub fn is_well_formed(request: &Request) -> bool {
    match request {
        Request::DescribeAcls(r) => !any_unknown([
            r.resource_type_filter,
            r.pattern_type_filter,
            r.operation,
            r.permission_type,
        ]),
        Request::CreateAcls(r) => !r.creations.iter().any(|c| {
            any_unknown([
                c.resource_type,
                c.resource_pattern_type,
                c.operation,
                c.permission_type,
            ])
        }),
        Request::DeleteAcls(r) => !r.filters.iter().any(|f| {
            any_unknown([
                f.resource_type_filter,
                f.pattern_type_filter,
                f.operation,
                f.permission_type,
            ])
        }),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::create_acls::{AclCreation, CreateAclsRequest};
    use crate::protocol::messages::delete_acls::{DeleteAclsFilter, DeleteAclsRequest};
    use crate::protocol::messages::describe_acls::DescribeAclsRequest;

    fn describe(codes: [i8; 4]) -> Request {
        Request::DescribeAcls(DescribeAclsRequest {
            resource_type_filter: codes[0],
            pattern_type_filter: codes[1],
            operation: codes[2],
            permission_type: codes[3],
            ..Default::default()
        })
    }

    #[test]
    fn unknown_elements_are_refused_and_unrecognised_codes_are_not() {
        assert!(is_well_formed(&describe([1, 1, 1, 1])));
        // Kafka compares with UNKNOWN's code only; 99 passes its check too.
        assert!(is_well_formed(&describe([99, 1, 1, 1])));
        for i in 0..4 {
            let mut codes = [1; 4];
            codes[i] = 0;
            assert!(!is_well_formed(&describe(codes)), "field {i}");
        }
        let creation = AclCreation {
            resource_type: 2,
            resource_pattern_type: 3,
            operation: 3,
            permission_type: 3,
            ..Default::default()
        };
        let create = |creations| Request::CreateAcls(CreateAclsRequest { creations });
        assert!(is_well_formed(&create(vec![creation.clone()])));
        let bad = AclCreation {
            operation: 0,
            ..creation.clone()
        };
        assert!(!is_well_formed(&create(vec![creation, bad])));
        let filter = DeleteAclsFilter {
            resource_type_filter: 1,
            pattern_type_filter: 1,
            operation: 1,
            permission_type: 0,
            ..Default::default()
        };
        assert!(!is_well_formed(&Request::DeleteAcls(DeleteAclsRequest {
            filters: vec![filter]
        })));
    }
}
