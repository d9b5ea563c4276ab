//! `ringmq admin`'s ACL 2.0 commands (createUser, updateUser, deleteUser, getUser, listUser,
//! createAcl, updateAcl, deleteAcl, getAcl, listAcl) against a broker with authentication and
//! authorization on: tables and `--json` checked against the broker's state, requests signed
//! with `--access-key/--secret-key`, with `ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY` and with
//! `$ROCKETMQ_HOME/conf/tools.yml`; a refused request prints the broker's remark and exits 1.

use crate::raw_support;

use std::process::Command;

use raw_support::admin::AdminRun;
use raw_support::RawBroker;
use serde_json::{json, Value};

const ROOT_PW: &str = "root-secret-2";

fn start() -> RawBroker {
    RawBroker::start(&[
        "pinCores=false",
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        r#"initAuthenticationUser={"username":"root","password":"root-secret-2"}"#,
    ])
}

/// `ringmq admin <args> -n <namesrv>` with the credential variables given in `env` only.
fn run_env(b: &RawBroker, args: &[&str], env: &[(&str, &str)]) -> AdminRun {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.arg("admin")
        .args(args)
        .args(["-n", &b.namesrv.to_string()])
        .env_remove("NAMESRV_ADDR")
        .env_remove("ROCKETMQ_HOME")
        .env_remove("ROCKETMQ_ACCESS_KEY")
        .env_remove("ROCKETMQ_SECRET_KEY")
        .envs(env.iter().copied());
    let out = cmd.output().expect("run ringmq admin");
    AdminRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// As root, through the global flags, on the broker (`-b`).
fn root(b: &RawBroker, args: &[&str]) -> AdminRun {
    let addr = b.broker.to_string();
    let mut all = args.to_vec();
    all.extend(["-b", &addr, "--access-key", "root", "--secret-key", ROOT_PW]);
    run_env(b, &all, &[])
}

fn refused(r: &AdminRun, remark: &str) {
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains(remark), "the remark {remark:?}: {r:?}");
}

/// The `--json` answer of the only broker asked.
fn only(r: AdminRun) -> Value {
    let v = r.ok().json();
    let a = v.as_array().expect("one answer per broker");
    assert_eq!(a.len(), 1, "{v}");
    a[0].clone()
}

/// Every command, its table and its `--json`, against what the broker then answers.
#[test]
fn user_and_acl_commands() {
    let b = start();
    let addr = b.broker.to_string();

    let r = root(&b, &["createUser", "-u", "alice", "-p", "alice-pw"]).ok();
    assert_eq!(r.stdout, format!("create user to {addr} success.\n"));
    let r = root(&b, &["getUser", "-u", "alice"]).ok();
    assert!(r.stdout.starts_with("#UserName"), "{r:?}");
    assert_eq!(r.first_row(), ["alice", "alice-pw", "Normal", "enable"]);
    let v = only(root(&b, &["getUser", "-u", "alice", "--json"]));
    assert_eq!(v["brokerAddr"], addr.as_str());
    assert_eq!(
        v["users"],
        json!([{"username": "alice", "password": "alice-pw", "userType": "Normal", "userStatus": "enable"}])
    );
    refused(
        &root(&b, &["createUser", "-u", "alice", "-p", "x"]),
        "The user is existed",
    );
    let r = root(&b, &["getUser", "-u", "nobody"]);
    assert_eq!(r.code, 1, "{r:?}");

    // -c: every master of the cluster (this one).
    let r = run_env(
        &b,
        &[
            "listUser",
            "-c",
            "DefaultCluster",
            "--json",
            "--access-key",
            "root",
            "--secret-key",
            ROOT_PW,
        ],
        &[],
    );
    let v = only(r);
    let names: Vec<&str> = v["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alice", "root"]);
    let r = root(&b, &["listUser", "-f", "lic"]).ok();
    assert_eq!(r.stdout.lines().count(), 2, "{r:?}");
    assert_eq!(r.first_row()[0], "alice");

    let r = root(
        &b,
        &[
            "updateUser",
            "-u",
            "alice",
            "-t",
            "Super",
            "-p",
            "alice-pw2",
        ],
    )
    .ok();
    assert_eq!(r.stdout, format!("update user to {addr} success.\n"));
    assert_eq!(
        root(&b, &["getUser", "-u", "alice"]).ok().first_row(),
        ["alice", "alice-pw2", "Super", "enable"]
    );
    assert_eq!(
        root(&b, &["updateUser", "-u", "alice"]).code,
        2,
        "nothing to change"
    );

    // ACLs: created, merged, filtered, deleted one resource then whole.
    let r = root(
        &b,
        &[
            "createAcl",
            "-s",
            "User:alice",
            "-r",
            "Topic:orders,Topic:audit",
            "-a",
            "Pub,Sub",
            "-i",
            "127.0.0.1,10.0.0.0/8",
            "-d",
            "Allow",
        ],
    )
    .ok();
    assert_eq!(r.stdout, format!("create acl to {addr} success.\n"));
    let r = root(&b, &["getAcl", "-s", "User:alice"]).ok();
    assert!(r.stdout.starts_with("#Subject"), "{r:?}");
    assert_eq!(
        r.first_row(),
        [
            "User:alice",
            "Custom",
            "Topic:orders",
            "Pub,Sub",
            "127.0.0.1,10.0.0.0/8",
            "Allow"
        ]
    );
    assert_eq!(r.stdout.lines().count(), 3, "{r:?}");
    root(
        &b,
        &[
            "updateAcl",
            "-s",
            "User:alice",
            "-r",
            "Topic:orders",
            "-a",
            "Pub",
            "-d",
            "Deny",
        ],
    )
    .ok();
    let v = only(root(&b, &["getAcl", "-s", "User:alice", "--json"]));
    assert_eq!(
        v["acls"],
        json!([{"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
            {"resource": "Topic:orders", "actions": ["Pub"], "decision": "Deny"},
            {"resource": "Topic:audit", "actions": ["Pub", "Sub"], "sourceIps": ["127.0.0.1", "10.0.0.0/8"], "decision": "Allow"}
        ]}]}])
    );
    let v = only(root(&b, &["listAcl", "-r", "audit", "--json"]));
    assert_eq!(
        v["acls"][0]["policies"][0]["entries"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        v["acls"][0]["policies"][0]["entries"][0]["resource"],
        "Topic:audit"
    );
    let v = only(root(&b, &["listAcl", "-s", "bob", "--json"]));
    assert_eq!(v["acls"], json!([]));
    refused(
        &root(
            &b,
            &[
                "createAcl",
                "-s",
                "User:alice",
                "-r",
                "Topic:x",
                "-a",
                "Publish",
                "-d",
                "Allow",
            ],
        ),
        "The action Publish is illegal.",
    );
    refused(
        &root(
            &b,
            &[
                "createAcl",
                "-s",
                "User:nobody",
                "-r",
                "Topic:x",
                "-a",
                "Pub",
                "-d",
                "Allow",
            ],
        ),
        "The subject of User:nobody is not exist.",
    );
    let r = root(&b, &["deleteAcl", "-s", "User:alice", "-r", "Topic:audit"]).ok();
    assert_eq!(r.stdout, format!("delete acl to {addr} success.\n"));
    let r = root(&b, &["getAcl", "-s", "User:alice"]).ok();
    assert_eq!(r.stdout.lines().count(), 2, "{r:?}");
    root(&b, &["deleteAcl", "-s", "User:alice"]).ok();
    assert_eq!(root(&b, &["getAcl", "-s", "User:alice"]).code, 1);

    let r = root(&b, &["deleteUser", "-u", "alice"]).ok();
    assert_eq!(r.stdout, format!("delete user to {addr} success.\n"));
    assert_eq!(root(&b, &["getUser", "-u", "alice"]).code, 1);
    let v = only(root(&b, &["listUser", "--json"]));
    assert_eq!(v["users"].as_array().unwrap().len(), 1);
}

/// Credentials from the environment and from tools.yml sign as the flags do; a wrong secret
/// or none at all is refused with the broker's remark (exit 1); half a pair is a usage error.
#[test]
fn credentials_from_flags_env_and_tools_yml() {
    let b = start();
    let addr = b.broker.to_string();
    let list = ["listUser", "-b", &addr];

    refused(&run_env(&b, &list, &[]), "username cannot be null.");
    let mut wrong = list.to_vec();
    wrong.extend(["--access-key", "root", "--secret-key", "not-it"]);
    refused(&run_env(&b, &wrong, &[]), "check signature failed.");
    let mut half = list.to_vec();
    half.extend(["--access-key", "root"]);
    assert_eq!(run_env(&b, &half, &[]).code, 2);

    let env = [
        ("ROCKETMQ_ACCESS_KEY", "root"),
        ("ROCKETMQ_SECRET_KEY", ROOT_PW),
    ];
    run_env(&b, &list, &env).ok();
    // The flags win over the environment.
    let bad_env = [
        ("ROCKETMQ_ACCESS_KEY", "root"),
        ("ROCKETMQ_SECRET_KEY", "nope"),
    ];
    refused(&run_env(&b, &list, &bad_env), "check signature failed.");
    let mut flagged = list.to_vec();
    flagged.extend(["--access-key", "root", "--secret-key", ROOT_PW]);
    run_env(&b, &flagged, &bad_env).ok();

    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("conf")).unwrap();
    let yml = home.path().join("conf/tools.yml");
    std::fs::write(&yml, format!("accessKey: root\nsecretKey: {ROOT_PW}\n")).unwrap();
    let h = home.path().to_str().unwrap();
    let r = run_env(
        &b,
        &["createUser", "-b", &addr, "-u", "carol", "-p", "c-pw"],
        &[("ROCKETMQ_HOME", h)],
    )
    .ok();
    assert!(r.stdout.contains("success"), "{r:?}");
    let v = only(run_env(
        &b,
        &["getUser", "-b", &addr, "-u", "carol", "--json"],
        &[("ROCKETMQ_HOME", h)],
    ));
    assert_eq!(v["users"][0]["password"], "c-pw");
    std::fs::write(&yml, "accessKey: root\nsecretKey: wrong\n").unwrap();
    refused(
        &run_env(&b, &list, &[("ROCKETMQ_HOME", h)]),
        "check signature failed.",
    );
}
