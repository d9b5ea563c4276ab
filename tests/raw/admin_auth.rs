//! ACL 2.0's user and ACL management over the raw protocol, AUTH_CREATE_USER..AUTH_LIST_ACL
//! (3001-3010), against a broker with authentication and authorization on and
//! `initAuthenticationUser` root: Java's bodies (`UserInfo`, `AclInfo` with its `PolicyInfo`
//! and `PolicyEntryInfo`), codes and remarks (`AdminBrokerProcessor`, the metadata managers),
//! the Super-user rules, the new table reaching every shard, and the users and ACLs kept
//! across a restart in `users.json`/`acls.json` (mode 0600).

use crate::raw_support;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use raw_support::{create_topic_cmd, send_cmd, Conn, RawBroker};
use ringmq::auth::signature::sign_request;
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;
use serde_json::{json, Value};

const ROOT_PW: &str = "root-secret-1";
const INIT: &str = r#"initAuthenticationUser={"username":"root","password":"root-secret-1"}"#;

fn opts() -> Vec<&'static str> {
    vec![
        "shardCount=2",
        "pinCores=false",
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        INIT,
    ]
}

fn signed(mut cmd: RemotingCommand, ak: &str, sk: &str) -> RemotingCommand {
    sign_request(&mut cmd, ak, sk).expect("sign");
    cmd
}

fn root(cmd: RemotingCommand) -> RemotingCommand {
    signed(cmd, "root", ROOT_PW)
}

fn user_cmd(code: i32, name: &str, body: Option<Value>) -> RemotingCommand {
    let c = RemotingCommand::new_request(code).with_ext("username", name);
    match body {
        Some(b) => c.with_body(b.to_string()),
        None => c,
    }
}

fn acl_cmd(code: i32, subject: &str, body: Value) -> RemotingCommand {
    RemotingCommand::new_request(code)
        .with_ext("subject", subject)
        .with_body(body.to_string())
}

/// Java's `AclInfo.of`: one policy, an entry per resource.
fn acl_body(subject: &str, resources: &[&str], actions: &[&str], ips: &[&str], d: &str) -> Value {
    let entries: Vec<Value> = resources
        .iter()
        .map(|r| json!({"resource": r, "actions": actions, "sourceIps": ips, "decision": d}))
        .collect();
    json!({"subject": subject, "policies": [{"entries": entries}]})
}

fn ok(r: &RemotingCommand, what: &str) {
    assert_eq!(r.code, rc::SUCCESS, "{what}: {:?}", r.remark);
}

fn refused(r: &RemotingCommand, code: i32, remark: &str, what: &str) {
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (code, Some(remark)),
        "{what}"
    );
}

fn body(r: &RemotingCommand) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&r.body)))
}

/// The entries of an `AclInfo` as (resource, actions, decision), in order.
fn entries(acl: &Value) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    for p in acl["policies"].as_array().expect("policies") {
        for e in p["entries"].as_array().expect("entries") {
            let actions = e["actions"].as_array().unwrap();
            out.push((
                e["resource"].as_str().unwrap().to_string(),
                actions
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect(),
                e["decision"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// Create, get, list, update and delete users and ACLs; Java's errors; the Super-user rules;
/// and alice's ACL deciding her sends on every connection (so on every shard).
#[test]
fn users_and_acls_managed_and_enforced() {
    let b = RawBroker::start(&opts());
    let mut c = Conn::connect(b.broker);

    // Unsigned: refused by authentication before the handler.
    let r = c.call(RemotingCommand::new_request(req::AUTH_LIST_USER));
    assert_eq!(r.code, rc::NO_PERMISSION, "{:?}", r.remark);

    // Java's UserInfo: username, password, userType, userStatus.
    let alice = json!({"username": "alice", "password": "alice-pw", "userType": "Normal"});
    ok(
        &c.call(root(user_cmd(
            req::AUTH_CREATE_USER,
            "alice",
            Some(alice.clone()),
        ))),
        "create alice",
    );
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "alice", None)));
    ok(&r, "get alice");
    assert_eq!(
        body(&r),
        json!({"username": "alice", "password": "alice-pw", "userType": "Normal", "userStatus": "enable"})
    );
    // An unknown user: SUCCESS without a body, as Java.
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "nobody", None)));
    ok(&r, "get nobody");
    assert!(r.body.is_empty());
    let r = c.call(root(RemotingCommand::new_request(req::AUTH_LIST_USER)));
    ok(&r, "list");
    let names: Vec<String> = body(&r)
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["alice", "root"]);
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_LIST_USER).with_ext("filter", "lic"),
    ));
    assert_eq!(body(&r).as_array().unwrap().len(), 1);
    assert_eq!(body(&r)[0]["username"], "alice");

    // Errors, with Java's codes and remarks.
    refused(
        &c.call(root(user_cmd(req::AUTH_CREATE_USER, "alice", Some(alice)))),
        rc::NO_PERMISSION,
        "The user is existed",
        "existing user",
    );
    refused(
        &c.call(root(user_cmd(
            req::AUTH_CREATE_USER,
            "",
            Some(json!({"password": "p"})),
        ))),
        rc::INVALID_PARAMETER,
        "The username is blank",
        "blank username",
    );
    refused(
        &c.call(root(user_cmd(
            req::AUTH_CREATE_USER,
            "bob",
            Some(json!({"password": " "})),
        ))),
        rc::NO_PERMISSION,
        "password can not be blank",
        "blank password",
    );
    refused(
        &c.call(root(user_cmd(
            req::AUTH_UPDATE_USER,
            "bob",
            Some(json!({"password": "p"})),
        ))),
        rc::NO_PERMISSION,
        "The user is not exist",
        "update unknown",
    );
    refused(
        &c.call(root(acl_cmd(
            req::AUTH_CREATE_ACL,
            "User:nobody",
            acl_body("User:nobody", &["Topic:orders"], &["Pub"], &[], "Allow"),
        ))),
        rc::NO_PERMISSION,
        "The subject of User:nobody is not exist.",
        "ACL of an unknown user",
    );
    for (res, act, ip, d, remark) in [
        (
            "Queue:orders",
            "Pub",
            None,
            "Allow",
            "The resource Queue:orders is illegal.",
        ),
        (
            "Topic:orders",
            "Publish",
            None,
            "Allow",
            "The action Publish is illegal.",
        ),
        (
            "Topic:orders",
            "Any",
            None,
            "Allow",
            "The actions can not be Any.",
        ),
        (
            "Topic:orders",
            "Pub",
            Some("10.1.2.300"),
            "Allow",
            "The source ip is invalid.",
        ),
        (
            "Topic:orders",
            "Pub",
            None,
            "Perhaps",
            "The decision is null or illegal.",
        ),
    ] {
        let ips: Vec<&str> = ip.into_iter().collect();
        let r = c.call(root(acl_cmd(
            req::AUTH_CREATE_ACL,
            "User:alice",
            acl_body("User:alice", &[res], &[act], &ips, d),
        )));
        refused(&r, rc::NO_PERMISSION, remark, remark);
    }
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_CREATE_ACL).with_ext("subject", "User:alice"),
    ));
    refused(&r, rc::SYSTEM_ERROR, "The body of acl is null", "no body");

    // Update: a new password; the old one no longer signs.
    ok(
        &c.call(root(user_cmd(
            req::AUTH_UPDATE_USER,
            "alice",
            Some(json!({"password": "alice-pw2"})),
        ))),
        "update alice",
    );
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "alice", None)));
    assert_eq!(body(&r)["password"], "alice-pw2");

    // createAcl, then a second createAcl merged into it: Topic:orders replaced, Topic:audit
    // and the cluster added (Java's AclInfo back).
    for t in ["orders", "other", "audit"] {
        ok(&c.call(root(create_topic_cmd(t, 4))), "create topic");
    }
    ok(
        &c.call(root(acl_cmd(
            req::AUTH_CREATE_ACL,
            "User:alice",
            acl_body(
                "User:alice",
                &["Topic:orders"],
                &["Sub"],
                &["127.0.0.1"],
                "Deny",
            ),
        ))),
        "create acl",
    );
    let merged = acl_body(
        "User:alice",
        &["Topic:orders", "Topic:audit", "Cluster:DefaultCluster"],
        &["Pub", "Get", "Update"],
        &[],
        "Allow",
    );
    ok(
        &c.call(root(acl_cmd(req::AUTH_UPDATE_ACL, "User:alice", merged))),
        "merge acl",
    );
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_GET_ACL).with_ext("subject", "User:alice"),
    ));
    ok(&r, "get acl");
    let acl = body(&r);
    assert_eq!(acl["subject"], "User:alice");
    assert_eq!(acl["policies"][0]["policyType"], "Custom");
    let three = |r: &str| {
        (
            r.to_string(),
            vec!["Pub".to_string(), "Get".into(), "Update".into()],
            "Allow".to_string(),
        )
    };
    assert_eq!(
        entries(&acl),
        [
            three("Topic:orders"),
            three("Topic:audit"),
            three("Cluster:DefaultCluster")
        ]
    );
    // The replaced entry lost its source address: sourceIps absent, as Java leaves it null.
    assert!(
        acl["policies"][0]["entries"][0].get("sourceIps").is_none(),
        "{acl}"
    );
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_LIST_ACL).with_ext("resourceFilter", "audit"),
    ));
    assert_eq!(entries(&body(&r)[0]), [three("Topic:audit")]);
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_LIST_ACL).with_ext("subjectFilter", "bob"),
    ));
    ok(&r, "list none");
    assert!(r.body.is_empty());

    // Alice may publish to orders, from every connection (they land on both shards), and
    // not to other.
    for i in 0..6 {
        let mut ci = Conn::connect(b.broker);
        let r = ci.call(signed(
            send_cmd("orders", i % 4, b"hi", ""),
            "alice",
            "alice-pw2",
        ));
        ok(&r, "alice sends to orders");
        let r = ci.call(signed(
            send_cmd("other", 0, b"hi", ""),
            "alice",
            "alice-pw2",
        ));
        assert_eq!(r.code, rc::NO_PERMISSION, "alice to other: {:?}", r.remark);
        let r = ci.call(signed(
            send_cmd("orders", 0, b"hi", ""),
            "alice",
            "alice-pw",
        ));
        assert_eq!(
            r.code,
            rc::NO_PERMISSION,
            "the old password: {:?}",
            r.remark
        );
    }

    // A Normal user with the cluster's Update: may create Normal users, never Super ones,
    // nor change or delete a Super user.
    let alice = |cmd| signed(cmd, "alice", "alice-pw2");
    ok(
        &c.call(alice(user_cmd(
            req::AUTH_CREATE_USER,
            "carol",
            Some(json!({"password": "c"})),
        ))),
        "alice creates carol",
    );
    refused(
        &c.call(alice(user_cmd(
            req::AUTH_CREATE_USER,
            "eve",
            Some(json!({"password": "e", "userType": "Super"})),
        ))),
        rc::SYSTEM_ERROR,
        "The super user can only be create by super user",
        "alice creates a Super user",
    );
    refused(
        &c.call(alice(user_cmd(
            req::AUTH_UPDATE_USER,
            "carol",
            Some(json!({"userType": "Super"})),
        ))),
        rc::SYSTEM_ERROR,
        "The super user can only be update by super user",
        "alice makes carol Super",
    );
    refused(
        &c.call(alice(user_cmd(
            req::AUTH_UPDATE_USER,
            "root",
            Some(json!({"password": "x"})),
        ))),
        rc::NO_PERMISSION,
        "The super user can only be update by super user",
        "alice changes root",
    );
    refused(
        &c.call(alice(user_cmd(req::AUTH_DELETE_USER, "root", None))),
        rc::NO_PERMISSION,
        "The super user can only be update by super user",
        "alice deletes root",
    );

    // deleteAcl of one resource, then of the whole ACL.
    let del = |res: Option<&str>| {
        let c =
            RemotingCommand::new_request(req::AUTH_DELETE_ACL).with_ext("subject", "User:alice");
        root(match res {
            Some(r) => c.with_ext("resource", r),
            None => c,
        })
    };
    ok(&c.call(del(Some("Topic:audit"))), "delete one resource");
    let r = c.call(root(
        RemotingCommand::new_request(req::AUTH_GET_ACL).with_ext("subject", "User:alice"),
    ));
    assert_eq!(
        entries(&body(&r)),
        [three("Topic:orders"), three("Cluster:DefaultCluster")]
    );
    ok(&c.call(del(None)), "delete the ACL");
    refused(
        &c.call(del(None)),
        rc::NO_PERMISSION,
        "The acl is not exist.",
        "delete again",
    );
    let r = c.call(signed(
        send_cmd("orders", 0, b"hi", ""),
        "alice",
        "alice-pw2",
    ));
    assert_eq!(
        r.code,
        rc::NO_PERMISSION,
        "alice without an ACL: {:?}",
        r.remark
    );

    // Deleting a user: gone, and so is its signature; deleting it again is no error.
    ok(
        &c.call(root(user_cmd(req::AUTH_DELETE_USER, "alice", None))),
        "delete alice",
    );
    ok(
        &c.call(root(user_cmd(req::AUTH_DELETE_USER, "alice", None))),
        "delete alice again",
    );
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "alice", None)));
    assert!(r.body.is_empty());
    refused(
        &c.call(root(
            RemotingCommand::new_request(req::AUTH_GET_ACL).with_ext("subject", "User:alice"),
        )),
        rc::NO_PERMISSION,
        "The subject is not exist.",
        "ACL of a deleted user",
    );
}

fn conf_files(dir: &std::path::Path) -> [std::path::PathBuf; 2] {
    [dir.join("config/users.json"), dir.join("config/acls.json")]
}

/// Users and ACLs written before a SIGTERM are there after the restart, in 0600 files; a
/// malformed file stops the start with an error naming it.
#[test]
fn users_and_acls_survive_a_restart() {
    let b = RawBroker::start(&opts());
    let mut c = Conn::connect(b.broker);
    ok(
        &c.call(root(user_cmd(
            req::AUTH_CREATE_USER,
            "bob",
            Some(json!({"password": "bob-pw"})),
        ))),
        "create bob",
    );
    ok(
        &c.call(root(acl_cmd(
            req::AUTH_CREATE_ACL,
            "User:bob",
            acl_body(
                "User:bob",
                &["Topic:logs*"],
                &["Pub", "Sub"],
                &["10.0.0.0/8"],
                "Allow",
            ),
        ))),
        "acl",
    );
    let before = c.call(root(
        RemotingCommand::new_request(req::AUTH_GET_ACL).with_ext("subject", "User:bob"),
    ));
    ok(&before, "get acl");
    // Changes sent at once on several connections (both shards) are all kept: each is
    // applied to what the one before it left.
    let broker = b.broker;
    let threads: Vec<_> = (0..8)
        .map(|i| {
            std::thread::spawn(move || {
                let mut ci = Conn::connect(broker);
                let name = format!("u{i}");
                let body = json!({"password": format!("pw{i}")});
                ci.call(root(user_cmd(req::AUTH_CREATE_USER, &name, Some(body))))
            })
        })
        .collect();
    for t in threads {
        ok(&t.join().unwrap(), "concurrent create");
    }
    let r = c.call(root(RemotingCommand::new_request(req::AUTH_LIST_USER)));
    assert_eq!(body(&r).as_array().unwrap().len(), 10, "root, bob, u0..u7");

    // A write that fails answers SYSTEM_ERROR and changes nothing (a directory where the
    // temporary file goes makes it fail, even for root).
    let blocker = b.dir.path().join("config/users.json.tmp");
    std::fs::create_dir_all(blocker.join("x")).unwrap();
    let r = c.call(root(user_cmd(
        req::AUTH_CREATE_USER,
        "dave",
        Some(json!({"password": "d"})),
    )));
    assert_eq!(r.code, rc::SYSTEM_ERROR, "{:?}", r.remark);
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "dave", None)));
    ok(&r, "get dave");
    assert!(r.body.is_empty(), "dave was kept after a failed write");
    std::fs::remove_dir_all(&blocker).unwrap();
    drop(c);
    let dir = b.stop();
    for f in conf_files(dir.path()) {
        let mode = std::fs::metadata(&f)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", f.display());
    }

    let b = RawBroker::start_in(dir, &opts());
    let mut c = Conn::connect(b.broker);
    let r = c.call(root(user_cmd(req::AUTH_GET_USER, "bob", None)));
    assert_eq!(body(&r)["password"], "bob-pw");
    let after = c.call(root(
        RemotingCommand::new_request(req::AUTH_GET_ACL).with_ext("subject", "User:bob"),
    ));
    assert_eq!(body(&after), body(&before));
    assert_eq!(
        body(&after)["policies"][0]["entries"][0]["sourceIps"],
        json!(["10.0.0.0/8"])
    );
    // bob is still known after the restart: the refusal is his ACL's, naming the topic, not
    // an unknown user's.
    let r = c.call(signed(send_cmd("other", 0, b"x", ""), "bob", "bob-pw"));
    assert_eq!(r.code, rc::NO_PERMISSION);
    assert!(
        r.remark.as_deref().unwrap_or("").contains("other"),
        "{:?}",
        r.remark
    );
    let r = c.call(root(RemotingCommand::new_request(req::AUTH_LIST_USER)));
    assert_eq!(
        body(&r).as_array().unwrap().len(),
        10,
        "root once, bob, u0..u7"
    );
    drop(c);
    let dir = b.stop();

    std::fs::write(&conf_files(dir.path())[0], b"[{\"username\":").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args([
        "serve",
        "--console-listen",
        "off",
        "--namesrv-listen",
        "127.0.0.1:0",
        "--broker-listen",
        "127.0.0.1:0",
        "--store-dir",
    ])
    .arg(dir.path())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for o in opts()
        .into_iter()
        .chain(["mappedFileSizeCommitLog=16777216"])
    {
        cmd.args(["-o", o]);
    }
    let mut child = cmd.spawn().expect("spawn ringmq");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ringmq started with a malformed users.json");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("users.json"),
        "the error names the file: {stderr}"
    );
}

/// A slave refuses every change of the users and ACLs, and still answers reads.
#[test]
fn a_slave_refuses_changes() {
    let master = RawBroker::start(&[]);
    let slave = RawBroker::start_broker(master.namesrv, &["brokerRole=SLAVE", "brokerId=1"]);
    let mut c = Conn::connect(slave.broker);
    let remark =
        "Can't modify users or ACLs from slave broker, please execute it from master broker.";
    let r = c.call(user_cmd(
        req::AUTH_CREATE_USER,
        "bob",
        Some(json!({"password": "p"})),
    ));
    refused(&r, rc::SYSTEM_ERROR, remark, "create on a slave");
    let r = c.call(acl_cmd(
        req::AUTH_CREATE_ACL,
        "User:bob",
        acl_body("User:bob", &["Topic:t"], &["Pub"], &[], "Allow"),
    ));
    refused(&r, rc::SYSTEM_ERROR, remark, "acl on a slave");
    let r = c.call(user_cmd(req::AUTH_DELETE_USER, "bob", None));
    refused(&r, rc::SYSTEM_ERROR, remark, "delete on a slave");
    ok(
        &c.call(RemotingCommand::new_request(req::AUTH_LIST_USER)),
        "list on a slave",
    );
}
