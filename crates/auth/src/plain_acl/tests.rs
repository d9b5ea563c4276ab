//! `plain_acl.yml` as RocketMQ 5.3.2 ships it, read and turned into users and ACLs.

use super::*;
use crate::authorize::{decide, Refusal};
use crate::model::Requested;

/// The file RocketMQ's distribution ships (`distribution/conf/plain_acl.yml`), in substance.
const SHIPPED: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn the_shipped_file_reads() {
    let cfg = parse(SHIPPED).unwrap();
    assert_eq!(cfg.accounts.len(), 2);
    assert!(cfg
        .global_white
        .iter()
        .any(|r| r.contains(ip("10.10.103.7"))));
    assert!(!cfg
        .global_white
        .iter()
        .any(|r| r.contains(ip("10.10.104.7"))));
    let rocketmq = &cfg.accounts[0];
    assert_eq!(
        rocketmq.secret_key, "12345678",
        "a numeric secret is read as text"
    );
    assert_eq!(rocketmq.white, None);
    assert_eq!(rocketmq.user().user_type, UserType::Normal);
    let admin = &cfg.accounts[1];
    assert_eq!(admin.user().user_type, UserType::Super);
    assert!(admin.white.as_ref().unwrap().contains(ip("192.168.1.20")));
    assert!(admin.acl().is_none());
}

#[test]
fn permissions_decide_as_the_file_says() {
    let cfg = parse(SHIPPED).unwrap();
    let acl = cfg.accounts[0].acl().unwrap();
    let pubs = [Action::Pub];
    let subs = [Action::Sub];
    let d = |r: Requested<'_>, a: &[Action]| decide(Some(&acl), &r, a, None);
    assert_eq!(d(Requested::topic("topicA"), &subs), Err(Refusal::Denied));
    assert_eq!(d(Requested::topic("topicB"), &pubs), Ok(()));
    assert_eq!(d(Requested::topic("topicC"), &subs), Ok(()));
    assert_eq!(
        d(Requested::topic("topicC"), &pubs),
        Err(Refusal::Denied),
        "no Custom entry allows Pub on topicC, so the Default DENY decides"
    );
    assert_eq!(
        d(Requested::topic("other"), &pubs),
        Err(Refusal::Denied),
        "defaultTopicPerm: DENY"
    );
    assert_eq!(d(Requested::group("groupA"), &subs), Err(Refusal::Denied));
    assert_eq!(d(Requested::group("%RETRY%groupC"), &subs), Ok(()));
    assert_eq!(
        d(Requested::group("anyGroup"), &subs),
        Ok(()),
        "defaultGroupPerm: SUB"
    );
}

#[test]
fn whitelist_patterns() {
    let cases = [
        ("*", "1.2.3.4", true),
        ("10.1.*", "10.1.200.3", true),
        ("10.1.*", "10.2.0.1", false),
        ("10.1.2.3-9", "10.1.2.9", true),
        ("10.1.2.3-9", "10.1.2.10", false),
        ("10.1.2.{3,4}", "10.1.2.4", true),
        ("10.1.2.{3,4}", "10.1.2.5", false),
        ("10.0.0.1,10.0.0.2", "10.0.0.2", true),
        ("10.0.0.1", "::ffff:10.0.0.1", true),
        ("::1", "::1", true),
        ("10.1.*", "::1", false),
    ];
    for (rule, addr, hit) in cases {
        assert_eq!(
            AddressRule::parse(rule).unwrap().contains(ip(addr)),
            hit,
            "{rule} {addr}"
        );
    }
    for bad in ["10.1.2.9-3", "10.x.*", "1.2.3.4.5", "300.1.1.1"] {
        assert!(AddressRule::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn bad_files_are_refused_with_a_reason() {
    assert!(matches!(
        parse("accounts: [\n"),
        Err(PlainAclError::Yaml(_))
    ));
    assert_eq!(
        parse("accounts:\n  - secretKey: x\n"),
        Err(PlainAclError::Invalid("account 1 has no accessKey".into()))
    );
    assert_eq!(
        parse("accounts:\n  - accessKey: a\n"),
        Err(PlainAclError::Invalid("account a has no secretKey".into()))
    );
    assert_eq!(parse("").unwrap(), PlainAclConfig::default());
}
