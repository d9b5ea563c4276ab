//! Runtimes of a test: the tokio runtime every test body runs on ([`run`], with the per-test
//! time budget), deadlines for single awaits ([`within`]), and the client library's own
//! runtime with raised blocking-lane limits ([`client_runtime`]).

use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rocketmq_client_rust::{ClientRuntime, ClientRuntimeConfig, TelemetryHandle};
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ScopeId};

use super::next_id;

/// Whole-test budget: the brief requires every test to finish in under 60 s.
pub const TEST_BUDGET: Duration = Duration::from_secs(55);

/// Runs a test body on a fresh 2-worker multi-thread tokio runtime, failing the test if it takes
/// longer than [`TEST_BUDGET`].
pub fn run<F: Future<Output = ()>>(body: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build tokio runtime");
    rt.block_on(async {
        if tokio::time::timeout(TEST_BUDGET, body).await.is_err() {
            panic!("test exceeded its {TEST_BUDGET:?} budget");
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
}

/// Awaits `fut` for at most `secs` seconds; panics naming `what` on timeout.
pub async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not complete within {secs} s"),
    }
}

/// The client library's own runtime owner, shared by all clients of one test binary. Its
/// blocking-lane limits are raised: with the defaults a push consumer on 2 cores rejects
/// consume tasks (`runtime.capacity.exhausted`) and stalls.
static CLIENT_OWNER: LazyLock<RuntimeOwner> = LazyLock::new(|| {
    let mut config = RuntimeConfig {
        thread_name: "ringmq-test-client".to_string(),
        ..Default::default()
    };
    config.blocking_lane_policies.metadata_io.max_queue_depth = 65536;
    config.blocking_lane_policies.metadata_io.max_concurrency = 8;
    config.max_blocking_threads = config.max_blocking_threads.max(8);
    RuntimeOwner::plan(config)
        .expect("client runtime config is valid")
        .build()
        .expect("client runtime owner starts")
});

/// A fresh client runtime scope (each client gets its own scope name).
pub fn client_runtime(scope: &str) -> Arc<ClientRuntime> {
    let scope = ScopeId::try_from(format!("{scope}-{}", next_id())).expect("valid scope name");
    ClientRuntime::try_new(
        CLIENT_OWNER.root_context().component(scope),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .expect("client runtime")
}
