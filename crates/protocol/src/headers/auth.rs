//! The headers of ACL 2.0's user and ACL management requests (AUTH_* 3001-3010), Java's
//! `{Create,Update,Delete,Get}UserRequestHeader`, `ListUsersRequestHeader`,
//! `{Create,Update,Delete,Get}AclRequestHeader` and `ListAclsRequestHeader`. Every field is
//! optional on the wire, as Java's are; the handlers answer a blank one.

use super::ext_header;

ext_header! {
    /// AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER and AUTH_GET_USER: the user.
    pub struct UserRequestHeader {
        pub username: Option<String> => "username",
    }
}

ext_header! {
    /// AUTH_LIST_USER: the users whose name contains `filter` (all without one).
    pub struct ListUsersRequestHeader {
        pub filter: Option<String> => "filter",
    }
}

ext_header! {
    /// AUTH_CREATE_ACL, AUTH_UPDATE_ACL and AUTH_GET_ACL: the subject (`User:<name>`).
    pub struct AclRequestHeader {
        pub subject: Option<String> => "subject",
    }
}

ext_header! {
    /// AUTH_DELETE_ACL: the subject's ACL, or with `resource` only that resource's entry of
    /// the `policyType` policy (Custom when absent).
    pub struct DeleteAclRequestHeader {
        pub subject: Option<String> => "subject",
        pub policy_type: Option<String> => "policyType",
        pub resource: Option<String> => "resource",
    }
}

ext_header! {
    /// AUTH_LIST_ACL: the ACLs whose subject contains `subjectFilter`, with only the entries
    /// whose resource contains `resourceFilter`.
    pub struct ListAclsRequestHeader {
        pub subject_filter: Option<String> => "subjectFilter",
        pub resource_filter: Option<String> => "resourceFilter",
    }
}
