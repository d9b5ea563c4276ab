//! Requests signed as a RocketMQ client signs them, checked against a table.

use super::*;
use crate::model::{Action, Decision, Policy, PolicyEntry, PolicyType, Resource};
use crate::plain_acl;
use crate::protocol::codes::request_code as rc;
use crate::signature::{sign, SIGNATURE};

fn user(name: &str, secret: &str, t: UserType) -> User {
    User {
        username: name.into(),
        password: secret.into(),
        user_type: t,
        user_status: UserStatus::Enable,
    }
}

fn allow(subject: &str, resource: &str, actions: &[Action]) -> Acl {
    Acl {
        subject: subject.into(),
        policies: vec![Policy {
            policy_type: PolicyType::Custom,
            entries: vec![PolicyEntry {
                resource: Resource::parse(resource).unwrap(),
                actions: actions.to_vec(),
                source_ips: vec![],
                decision: Decision::Allow,
            }],
        }],
    }
}

fn table() -> AuthTable {
    AuthTable::new(
        vec![
            user("alice", "alice-secret", UserType::Normal),
            user("root", "root-secret", UserType::Super),
            User {
                user_status: UserStatus::Disable,
                ..user("gone", "x", UserType::Super)
            },
        ],
        vec![allow("User:alice", "Topic:orders", &[Action::Pub])],
    )
}

fn settings() -> AuthSettings {
    AuthSettings {
        authentication: true,
        authorization: true,
        cluster: "DefaultCluster".into(),
        ..AuthSettings::default()
    }
}

fn send(topic: &str, key: Option<(&str, &str)>) -> RemotingCommand {
    let mut c = RemotingCommand::new_request(rc::SEND_MESSAGE_V2)
        .with_ext("a", "pg")
        .with_ext("b", topic);
    c.body = bytes::Bytes::from_static(b"hello");
    if let Some((ak, sk)) = key {
        c.set_ext(ACCESS_KEY, ak);
        let s = sign(sk, &c.ext_fields, &c.body).unwrap();
        c.set_ext(SIGNATURE, s);
    }
    c
}

fn peer() -> IpAddr {
    "127.0.0.1".parse().unwrap()
}

#[test]
fn the_right_key_passes_and_everything_else_is_refused() {
    let t = table();
    let s = settings();
    assert_eq!(
        t.check(&s, &send("orders", Some(("alice", "alice-secret"))), peer()),
        Ok(())
    );
    let refused = |c: &RemotingCommand| t.check(&s, c, peer()).unwrap_err().to_string();
    assert_eq!(refused(&send("orders", None)), "username cannot be null.");
    assert_eq!(
        refused(&send("orders", Some(("bob", "x")))),
        "User:bob is not found."
    );
    assert_eq!(
        refused(&send("orders", Some(("gone", "x")))),
        "User:gone is disabled."
    );
    assert_eq!(
        refused(&send("orders", Some(("alice", "wrong")))),
        "check signature failed."
    );
    let mut tampered = send("orders", Some(("alice", "alice-secret")));
    tampered.body = bytes::Bytes::from_static(b"HELLO");
    assert_eq!(refused(&tampered), "check signature failed.");
    let mut replayed = send("orders", Some(("alice", "alice-secret")));
    replayed.set_ext("b", "billing");
    assert_eq!(refused(&replayed), "check signature failed.");
    assert_eq!(
        refused(&send("billing", Some(("alice", "alice-secret")))),
        "User:alice has no permission to access Topic:billing from 127.0.0.1, no matched policies. (needs Pub)"
    );
    assert_eq!(
        t.check(&s, &send("billing", Some(("root", "root-secret"))), peer()),
        Ok(())
    );
}

#[test]
fn admin_requests_need_the_cluster() {
    let t = table();
    let s = settings();
    let mut c = RemotingCommand::new_request(rc::UPDATE_BROKER_CONFIG);
    c.set_ext(ACCESS_KEY, "alice");
    let sig = sign("alice-secret", &c.ext_fields, &c.body).unwrap();
    c.set_ext(SIGNATURE, sig);
    assert_eq!(
        t.check(&s, &c, peer()).unwrap_err().to_string(),
        "User:alice has no permission to access Cluster:DefaultCluster from 127.0.0.1, no matched policies. (needs Update)"
    );
}

/// ACL 1.0's rules: the requests 1.0 checked resources for are authorized; one that changes
/// the broker or touches the cluster needs an admin; any other needs only its signature.
#[test]
fn v1_rules() {
    let t = table();
    let s = AuthSettings {
        v1_rules: true,
        ..settings()
    };
    let signed = |code: i32, fields: &[(&str, &str)]| {
        let mut c = RemotingCommand::new_request(code);
        for (k, v) in fields {
            c.set_ext(k, *v);
        }
        c.set_ext(ACCESS_KEY, "alice");
        let sig = sign("alice-secret", &c.ext_fields, &c.body).unwrap();
        c.set_ext(SIGNATURE, sig);
        c
    };
    assert_eq!(
        t.check(&s, &send("orders", Some(("alice", "alice-secret"))), peer()),
        Ok(())
    );
    assert!(t
        .check(
            &s,
            &send("billing", Some(("alice", "alice-secret"))),
            peer()
        )
        .is_err());
    let max = signed(
        rc::GET_MAX_OFFSET,
        &[("topic", "billing"), ("queueId", "0")],
    );
    assert_eq!(t.check(&s, &max, peer()), Ok(()));
    let create = signed(rc::UPDATE_AND_CREATE_TOPIC, &[("topic", "t")]);
    assert_eq!(
        t.check(&s, &create, peer()).unwrap_err().to_string(),
        "Need admin permission for request code=17, but accessKey=alice is not"
    );
    let config = signed(rc::UPDATE_BROKER_CONFIG, &[]);
    assert!(t.check(&s, &config, peer()).is_err());
    let unsigned = RemotingCommand::new_request(rc::GET_MAX_OFFSET);
    assert!(t.check(&s, &unsigned, peer()).is_err());
}

#[test]
fn switches_and_whitelists() {
    let t = table();
    let off = AuthSettings::default();
    assert_eq!(t.check(&off, &send("billing", None), peer()), Ok(()));
    let authn_only = AuthSettings {
        authorization: false,
        ..settings()
    };
    assert_eq!(
        t.check(
            &authn_only,
            &send("billing", Some(("alice", "alice-secret"))),
            peer()
        ),
        Ok(())
    );
    let code_white = AuthSettings {
        authentication_whitelist: vec![rc::SEND_MESSAGE_V2],
        authorization_whitelist: vec![rc::SEND_MESSAGE_V2],
        ..settings()
    };
    assert_eq!(t.check(&code_white, &send("billing", None), peer()), Ok(()));

    let plain = plain_acl::parse(
        "globalWhiteRemoteAddresses: ['10.9.*']\naccounts:\n  - accessKey: legacy\n    secretKey: s3\n    whiteRemoteAddress: 10.8.0.*\n    defaultTopicPerm: PUB\n",
    )
    .unwrap();
    let t = table().with_plain_acl(&plain);
    let s = settings();
    assert_eq!(
        t.check(&s, &send("x", None), "10.9.1.1".parse().unwrap()),
        Ok(())
    );
    let unsigned = send("x", None).with_ext(ACCESS_KEY, "legacy");
    assert_eq!(t.check(&s, &unsigned, "10.8.0.5".parse().unwrap()), Ok(()));
    assert_eq!(
        t.check(&s, &unsigned, "10.7.0.5".parse().unwrap())
            .unwrap_err()
            .to_string(),
        "check signature failed."
    );
    assert_eq!(
        t.check(&s, &send("x", Some(("legacy", "s3"))), peer()),
        Ok(())
    );
}
