//! The ACL 2.0 decision over hand-built ACLs.

use std::net::IpAddr;

use super::*;
use crate::model::{Policy, Resource, SourceIp};

fn entry(resource: &str, actions: &[Action], ips: &[&str], decision: Decision) -> PolicyEntry {
    PolicyEntry {
        resource: Resource::parse(resource).unwrap(),
        actions: actions.to_vec(),
        source_ips: ips.iter().map(|s| SourceIp::parse(s).unwrap()).collect(),
        decision,
    }
}

fn acl(custom: Vec<PolicyEntry>, default: Vec<PolicyEntry>) -> Acl {
    let mut policies = vec![Policy {
        policy_type: PolicyType::Custom,
        entries: custom,
    }];
    if !default.is_empty() {
        policies.push(Policy {
            policy_type: PolicyType::Default,
            entries: default,
        });
    }
    Acl {
        subject: "User:alice".into(),
        policies,
    }
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

#[test]
fn the_most_specific_entry_decides() {
    let a = acl(
        vec![
            entry("Topic:*", &[Action::Pub], &[], Decision::Deny),
            entry("Topic:orders*", &[Action::Pub], &[], Decision::Allow),
            entry("Topic:orders-secret*", &[Action::Pub], &[], Decision::Deny),
            entry(
                "Topic:orders-secret-ok",
                &[Action::Pub],
                &[],
                Decision::Allow,
            ),
        ],
        vec![],
    );
    let pubs = [Action::Pub];
    assert_eq!(
        decide(Some(&a), &Requested::topic("orders-1"), &pubs, None),
        Ok(())
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("orders-secret-1"), &pubs, None),
        Err(Refusal::Denied)
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("orders-secret-ok"), &pubs, None),
        Ok(())
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("billing"), &pubs, None),
        Err(Refusal::Denied)
    );
}

#[test]
fn actions_and_sources_must_match() {
    let a = acl(
        vec![
            entry("Topic:t", &[Action::Sub], &[], Decision::Allow),
            entry(
                "Group:g",
                &[Action::All],
                &["10.1.0.0/16", "::1"],
                Decision::Allow,
            ),
        ],
        vec![],
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("t"), &[Action::Pub], None),
        Err(Refusal::NoMatchedPolicy)
    );
    assert_eq!(
        decide(
            Some(&a),
            &Requested::topic("t"),
            &[Action::Sub, Action::Get],
            None
        ),
        Ok(())
    );
    let g = Requested::group("%RETRY%g");
    assert_eq!(g.name, "g");
    assert_eq!(decide(Some(&a), &g, &[Action::Sub], ip("10.1.2.3")), Ok(()));
    assert_eq!(
        decide(Some(&a), &g, &[Action::Sub], ip("::ffff:10.1.2.3")),
        Ok(())
    );
    assert_eq!(decide(Some(&a), &g, &[Action::Sub], ip("::1")), Ok(()));
    assert_eq!(
        decide(Some(&a), &g, &[Action::Sub], ip("10.2.0.1")),
        Err(Refusal::NoMatchedPolicy)
    );
    assert_eq!(
        decide(Some(&a), &g, &[Action::Sub], None),
        Err(Refusal::NoMatchedPolicy)
    );
}

#[test]
fn default_policy_only_when_no_custom_entry_matches() {
    let a = acl(
        vec![entry("Topic:t", &[Action::Pub], &[], Decision::Deny)],
        vec![entry("*", &[Action::All], &[], Decision::Allow)],
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("t"), &[Action::Pub], None),
        Err(Refusal::Denied)
    );
    assert_eq!(
        decide(Some(&a), &Requested::topic("u"), &[Action::Pub], None),
        Ok(())
    );
    assert_eq!(
        decide(None, &Requested::topic("u"), &[Action::Pub], None),
        Err(Refusal::NoMatchedPolicy)
    );
}

#[test]
fn deny_wins_between_equally_specific_entries() {
    for order in [
        [Decision::Allow, Decision::Deny],
        [Decision::Deny, Decision::Allow],
    ] {
        let a = acl(
            order
                .iter()
                .map(|d| entry("Topic:t", &[Action::Pub], &[], *d))
                .collect(),
            vec![],
        );
        assert_eq!(
            decide(Some(&a), &Requested::topic("t"), &[Action::Pub], None),
            Err(Refusal::Denied)
        );
    }
}

#[test]
fn resource_keys_parse_as_java_does() {
    for (key, back) in [
        ("*", Some("*")),
        ("Topic:*", Some("Topic:*")),
        ("topic:a", Some("Topic:a")),
        ("Group:g*", Some("Group:g*")),
        ("Topic:a*b*", Some("Topic:a*")),
        ("Topic:a*b", Some("Topic:a*b")),
        ("Cluster:DefaultCluster", Some("Cluster:DefaultCluster")),
        ("Queue:x", None),
        ("  ", None),
    ] {
        assert_eq!(
            Resource::parse(key).map(|r| r.key()).as_deref(),
            back,
            "{key}"
        );
    }
    for bad in ["10.0.0.0/33", "10.0.0", "x", "::1/129", "1.2.3.4/"] {
        assert!(SourceIp::parse(bad).is_none(), "{bad}");
    }
}
