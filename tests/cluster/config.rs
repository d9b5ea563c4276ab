//! `ringmq controller -c` refuses a bad controller.conf at start-up with an error naming the key.

use std::process::Command;

/// Each bad file makes the process exit 1 with the offending key in its error message.
#[test]
fn bad_config_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let base = "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:1\ncontrollerDLegerSelfId=n0\n";
    for (extra, key) in [
        ("noSuchKey=1\n", "noSuchKey"),
        (
            "enableElectUncleanMaster=perhaps\n",
            "enableElectUncleanMaster",
        ),
        (
            "scanNotActiveBrokerInterval=-5\n",
            "scanNotActiveBrokerInterval",
        ),
        ("controllerType=jRaft\n", "controllerType"),
    ] {
        let conf = dir.path().join("c.conf");
        std::fs::write(&conf, format!("{base}{extra}")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
            .args(["controller", "-c"])
            .arg(&conf)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{extra}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{extra}: {err}");
    }
    let conf = dir.path().join("missing.conf");
    std::fs::write(&conf, "controllerDLegerGroup=g\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["controller", "-c"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("controllerDLegerPeers"));
}
