// A broker that cannot start all of its executors says why and exits, instead of running with
// a shard missing while it prints that it listens.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Under a locked-memory limit too low for io_uring's rings, `serve` exits non-zero within
/// seconds and names the limit to raise.
#[test]
fn too_little_locked_memory_fails_the_start() {
    let store = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringmq"));
    cmd.args(["serve", "--console-listen", "off", "--store-dir"])
        .arg(store.path())
        .args([
            "--namesrv-listen",
            "127.0.0.1:0",
            "--broker-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64 << 10,
                rlim_max: 64 << 10,
            };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn ringmq");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ringmq kept running without its executors");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!status.success(), "exit status {status}");
    assert!(
        stderr.contains("RLIMIT_MEMLOCK"),
        "the error names the limit: {stderr}"
    );
    assert!(
        !stdout.contains("listening"),
        "nothing claims to listen: {stdout}"
    );
}
