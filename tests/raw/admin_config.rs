//! UPDATE_BROKER_CONFIG (25), byte-level: a run-time key changed by an admin shows in
//! GET_BROKER_CONFIG (26) and takes effect at once on every shard; Java's black-listed keys,
//! keys ringmq cannot change while it runs, and bad values are refused and change nothing; a
//! broker started with `-c broker.conf` keeps the change in that file across a restart.

use crate::raw_support;

use raw_support::{send_cmd, Conn, RawBroker};
use ringmq::protocol::codes::{request_code as req, response_code as rc};
use ringmq::protocol::RemotingCommand;

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::new_request(req::UPDATE_BROKER_CONFIG).with_body(body.to_owned())
}

fn config(c: &mut Conn) -> String {
    let r = c.call(RemotingCommand::new_request(req::GET_BROKER_CONFIG));
    assert_eq!(r.code, rc::SUCCESS);
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Turning autoCreateTopicEnable off shows in 26 and stops sends to new topics on every shard;
/// turning it on again lets them through.
#[test]
fn a_runtime_key_changes_config_and_behaviour() {
    let b = RawBroker::start(&["shardCount=2", "pinCores=false"]);
    let mut c = Conn::connect(b.broker);
    assert!(config(&mut c).contains("autoCreateTopicEnable=true\n"));
    let r = c.call(update(
        "autoCreateTopicEnable=false\nmaxReconsumeTimes = 3\n",
    ));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let text = config(&mut c);
    assert!(text.contains("autoCreateTopicEnable=false\n"), "{text}");
    assert!(text.contains("maxReconsumeTimes=3\n"), "{text}");
    // Every connection, whichever shard serves it.
    for i in 0..4 {
        let mut other = Conn::connect(b.broker);
        let r = other.call(send_cmd(&format!("NewT{i}"), 0, b"x", ""));
        assert_eq!(r.code, rc::TOPIC_NOT_EXIST, "send {i}: {:?}", r.remark);
    }
    let r = c.call(update("autoCreateTopicEnable=true"));
    assert_eq!(r.code, rc::SUCCESS);
    let r = c.call(send_cmd("NewT0", 0, b"x", ""));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
}

/// Black-listed keys get Java's NO_PERMISSION remark; keys ringmq cannot change at run time
/// are all named; a value that does not parse, and a body that is not text, are refused; none
/// of them changes anything, and an empty body succeeds as on Java.
#[test]
fn refused_updates_change_nothing() {
    let b = RawBroker::start(&[]);
    let mut c = Conn::connect(b.broker);
    let before = config(&mut c);
    let r = c.call(update(
        "brokerConfigPath=/tmp/x.conf\nmaxReconsumeTimes=1\n",
    ));
    assert_eq!(r.code, rc::NO_PERMISSION);
    assert_eq!(
        r.remark.as_deref(),
        Some("Can not update config in black list.")
    );
    let r = c.call(update("maxReconsumeTimes=1\nlistenPort=1\nbrokerName=x\n"));
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    let remark = r.remark.unwrap_or_default();
    assert!(remark.contains(": listenPort, brokerName ("), "{remark}");
    let r = c.call(update("maxReconsumeTimes=many"));
    assert_eq!(r.code, rc::INVALID_PARAMETER);
    assert!(r.remark.unwrap_or_default().contains("maxReconsumeTimes"));
    let r = c.call(
        RemotingCommand::new_request(req::UPDATE_BROKER_CONFIG)
            .with_body(vec![0xff, 0xfe, b'=', b'1']),
    );
    assert_eq!(r.code, rc::INVALID_PARAMETER, "a body that is not text");
    assert_eq!(c.call(update("")).code, rc::SUCCESS);
    assert_eq!(config(&mut c), before);
}

/// With `-c broker.conf`, a change is written into the file (its other lines and its mode
/// kept) and is the broker's configuration after a restart.
#[test]
fn a_change_is_persisted_into_broker_conf() {
    let conf_dir = tempfile::tempdir().unwrap();
    let conf = conf_dir.path().join("broker.conf");
    std::fs::write(
        &conf,
        "# test broker\nmaxReconsumeTimes=16\nbrokerName=conf-broker\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).unwrap();
    let b = RawBroker::start_with_conf(tempfile::tempdir().unwrap(), &conf, &[]);
    let mut c = Conn::connect(b.broker);
    let r = c.call(update("maxReconsumeTimes=4\nlongPollingEnable=false\n"));
    assert_eq!(r.code, rc::SUCCESS, "{:?}", r.remark);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let want =
        "# test broker\nmaxReconsumeTimes=4\nbrokerName=conf-broker\nlongPollingEnable=false\n";
    while std::fs::read_to_string(&conf).unwrap() != want {
        assert!(
            std::time::Instant::now() < deadline,
            "broker.conf: {}",
            std::fs::read_to_string(&conf).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o600,
        "the rewrite widened broker.conf's mode to {mode:o}"
    );
    drop(c);
    let dir = b.stop();
    let b = RawBroker::start_with_conf(dir, &conf, &[]);
    let mut c = Conn::connect(b.broker);
    let text = config(&mut c);
    assert!(text.contains("maxReconsumeTimes=4\n"), "{text}");
    assert!(text.contains("longPollingEnable=false\n"), "{text}");
    assert!(text.contains("brokerName=conf-broker\n"), "{text}");
}
