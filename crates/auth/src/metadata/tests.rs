use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::bodies::AclInfo;
use crate::model::{Action, Decision};

fn change(name: &str, pw: Option<&str>, t: Option<UserType>) -> UserChange {
    UserChange {
        username: name.into(),
        password: pw.map(str::to_string),
        user_type: t,
        user_status: None,
    }
}

fn acl(subject: &str, resources: &[&str], actions: &[&str], decision: &str) -> Acl {
    let r: Vec<String> = resources.iter().map(|s| s.to_string()).collect();
    let a: Vec<String> = actions.iter().map(|s| s.to_string()).collect();
    acl_of_info(&AclInfo::of(subject, &r, &a, &[], decision), None).unwrap()
}

fn rejected_msg(r: Result<Touched, MetadataError>) -> String {
    match r {
        Err(MetadataError::Rejected(m)) => m,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// Create, update, get, list and delete users with Java's rules and messages.
#[test]
fn users_lifecycle() {
    let mut m = AuthMetadata::default();
    m.create_user(&change("alice", Some("pw1"), None)).unwrap();
    let u = m.user("alice").unwrap();
    assert_eq!(
        (u.user_type, u.user_status),
        (UserType::Normal, UserStatus::Enable)
    );
    assert_eq!(
        rejected_msg(m.create_user(&change("alice", Some("x"), None))),
        "The user is existed"
    );
    assert_eq!(
        rejected_msg(m.create_user(&change("bob", Some("  "), None))),
        "password can not be blank"
    );
    assert_eq!(
        rejected_msg(m.create_user(&change(" ", Some("p"), None))),
        "username can not be blank"
    );
    assert_eq!(
        rejected_msg(m.update_user(&change("carol", Some("p"), None))),
        "The user is not exist"
    );
    // A blank password is no change; the type is.
    m.update_user(&change("alice", Some(""), Some(UserType::Super)))
        .unwrap();
    let u = m.user("alice").unwrap();
    assert_eq!((u.password.as_str(), u.user_type), ("pw1", UserType::Super));
    m.update_user(&UserChange {
        username: "alice".into(),
        user_status: Some(UserStatus::Disable),
        ..UserChange::default()
    })
    .unwrap();
    assert_eq!(m.user("alice").unwrap().user_status, UserStatus::Disable);
    m.create_user(&change("bob", Some("pw2"), None)).unwrap();
    let names = |v: Vec<&User>| v.iter().map(|u| u.username.clone()).collect::<Vec<_>>();
    assert_eq!(names(m.list_users(None)), ["alice", "bob"]);
    assert_eq!(names(m.list_users(Some("li"))), ["alice"]);
    assert_eq!(names(m.list_users(Some(" "))), ["alice", "bob"]);
    assert!(m.is_super_user("alice").unwrap());
    assert!(!m.is_super_user("bob").unwrap());
    assert_eq!(
        m.is_super_user("zed").unwrap_err().to_string(),
        "User:zed is not found"
    );
    // Deleting a user drops its ACL; an unknown user is no change.
    m.put_acl(acl("User:bob", &["Topic:t"], &["Pub"], "Allow"))
        .unwrap();
    let t = m.delete_user("bob").unwrap();
    assert_eq!((t.users, t.acls), (true, true));
    assert!(m.acl("User:bob").is_none());
    let t = m.delete_user("nobody").unwrap();
    assert_eq!((t.users, t.acls), (false, false));
}

/// createAcl merges: a new resource is added, the same resource replaced, another policy
/// type kept apart; the user must exist.
#[test]
fn acl_merge_and_delete() {
    let mut m = AuthMetadata::default();
    assert_eq!(
        rejected_msg(m.put_acl(acl("User:alice", &["Topic:a"], &["Pub"], "Allow"))),
        "The subject of User:alice is not exist."
    );
    m.create_user(&change("alice", Some("pw"), None)).unwrap();
    m.put_acl(acl(
        "User:alice",
        &["Topic:a", "Topic:b"],
        &["Pub"],
        "Allow",
    ))
    .unwrap();
    m.put_acl(acl("User:alice", &["Topic:b", "Group:g"], &["Sub"], "Deny"))
        .unwrap();
    let a = m.acl("User:alice").unwrap();
    assert_eq!(a.policies.len(), 1);
    let keys: Vec<(String, Vec<Action>, Decision)> = a.policies[0]
        .entries
        .iter()
        .map(|e| (e.resource.key(), e.actions.clone(), e.decision))
        .collect();
    assert_eq!(
        keys,
        [
            ("Topic:a".to_string(), vec![Action::Pub], Decision::Allow),
            ("Topic:b".to_string(), vec![Action::Sub], Decision::Deny),
            ("Group:g".to_string(), vec![Action::Sub], Decision::Deny),
        ]
    );
    let mut def = acl("User:alice", &["Topic:c"], &["Pub"], "Allow");
    def.policies[0].policy_type = PolicyType::Default;
    m.put_acl(def).unwrap();
    assert_eq!(m.acl("User:alice").unwrap().policies.len(), 2);

    // listAcl filters by subject and by resource (Java's `contains`).
    assert_eq!(m.list_acls(Some("alice"), None).len(), 1);
    assert!(m.list_acls(Some("bob"), None).is_empty());
    let only_b = m.list_acls(None, Some("Topic:b"));
    assert_eq!(only_b[0].policies.len(), 1);
    assert_eq!(only_b[0].policies[0].entries.len(), 1);
    assert!(m.list_acls(None, Some("Topic:zzz")).is_empty());

    // Deleting one resource of the Custom policy, then the Default policy's only one.
    let rb = Resource::parse("Topic:b").unwrap();
    m.delete_acl("User:alice", None, Some(&rb)).unwrap();
    assert_eq!(m.acl("User:alice").unwrap().policies[0].entries.len(), 2);
    let rc = Resource::parse("Topic:c").unwrap();
    m.delete_acl("User:alice", Some(PolicyType::Default), Some(&rc))
        .unwrap();
    assert_eq!(m.acl("User:alice").unwrap().policies.len(), 1);
    // The whole ACL; then it is gone.
    m.delete_acl("User:alice", None, None).unwrap();
    assert!(m.get_acl("User:alice").unwrap().is_none());
    assert_eq!(
        rejected_msg(m.delete_acl("User:alice", None, None)),
        "The acl is not exist."
    );
    assert_eq!(
        rejected_msg(m.delete_acl("User:nobody", None, None)),
        "The subject is not exist."
    );
    assert_eq!(
        m.get_acl("User:nobody").unwrap_err().to_string(),
        "The subject is not exist."
    );
}

/// What is written reads back the same; the files are 0600; a malformed file is an error
/// naming it; absent files are an empty store.
#[test]
fn files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = AuthMetadata::load(dir.path()).unwrap();
    assert!(m.list_users(None).is_empty());
    m.ensure_super_user("root", "rootpw");
    m.create_user(&change("alice", Some("pw"), None)).unwrap();
    let mut a = acl("User:alice", &["Topic:orders*"], &["Pub", "Sub"], "Allow");
    a.policies[0].entries[0].source_ips =
        vec![crate::model::SourceIp::parse("10.0.0.0/8").unwrap()];
    m.put_acl(a).unwrap();
    for (path, bytes) in m.files_of(Touched {
        users: true,
        acls: true,
    }) {
        write_file(&path, &bytes).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let back = AuthMetadata::load(dir.path()).unwrap();
    assert_eq!(back.user("root"), m.user("root"));
    assert_eq!(back.user("alice"), m.user("alice"));
    assert_eq!(back.acl("User:alice"), m.acl("User:alice"));
    assert_eq!(back.user("root").unwrap().user_type, UserType::Super);

    std::fs::write(dir.path().join(ACLS_FILE), b"{not json").unwrap();
    let e = AuthMetadata::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("acls.json"), "{e}");
    std::fs::write(
        dir.path().join(USERS_FILE),
        br#"[{"username":"x","userType":"Admin","password":"p"}]"#,
    )
    .unwrap();
    let e = AuthMetadata::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("users.json") && e.contains("Admin"), "{e}");
}
