//! The gRPC thread's way onto the broker's shards: every call is a job for a shard over the
//! mesh (never shard state touched from here), most of them a Remoting request run through the
//! broker's own dispatch on the client's virtual connection (`ringmq_broker::local`).

use std::future::Future;
use std::rc::Rc;

use ringmq_broker::local::{self, LocalError, Signed};
use ringmq_broker::Shard;
use ringmq_protocol::codes::response_code as rc;
use ringmq_protocol::RemotingCommand;
use ringmq_remoting::ConnInfo;
use ringmq_runtime::Mesh;

use crate::pb::Code;
use crate::status::GrpcError;

/// Reaches the broker's shards from the gRPC thread. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    mesh: Mesh<Shard>,
}

/// An in-process request's failure as the client is told it.
fn local_error(e: LocalError) -> GrpcError {
    match e {
        LocalError::Refused {
            authentication: true,
            reason,
        } => GrpcError::new(Code::Unauthorized, reason),
        LocalError::Refused { reason, .. } => GrpcError::new(Code::Forbidden, reason),
        other => GrpcError::internal(other.to_string()),
    }
}

impl Gateway {
    pub fn new(mesh: Mesh<Shard>) -> Gateway {
        Gateway { mesh }
    }

    /// How many shards the broker runs.
    pub fn shards(&self) -> usize {
        self.mesh.len()
    }

    /// Runs `f` on shard `target` and waits for its result.
    pub async fn on<R, F, Fut>(&self, target: usize, f: F) -> Result<R, GrpcError>
    where
        R: Send + 'static,
        F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        self.mesh
            .call(target, f)
            .await
            .map_err(|_| GrpcError::busy())
    }

    /// Posts `f` to shard `target` without waiting; false when its mailbox is full.
    pub fn post(&self, target: usize, f: impl FnOnce(&Rc<Shard>) + Send + 'static) -> bool {
        self.mesh.post(target, Box::new(f)).is_ok()
    }

    /// Runs Remoting request `cmd` on connection `conn` of shard `target`, as the user `signed`
    /// proves, and returns the broker's answer, whatever its code.
    pub async fn invoke(
        &self,
        target: usize,
        conn: ConnInfo,
        cmd: RemotingCommand,
        signed: Option<Signed>,
    ) -> Result<RemotingCommand, GrpcError> {
        let answer = self
            .on(target, move |s| local::invoke(s, conn, cmd, signed))
            .await?;
        answer.map_err(local_error)
    }

    /// As `invoke`, with any code but SUCCESS an error.
    pub async fn invoke_ok(
        &self,
        target: usize,
        conn: ConnInfo,
        cmd: RemotingCommand,
        signed: Option<Signed>,
    ) -> Result<RemotingCommand, GrpcError> {
        let answer = self.invoke(target, conn, cmd, signed).await?;
        if answer.code == rc::SUCCESS {
            Ok(answer)
        } else {
            Err(GrpcError::from_remoting(
                answer.code,
                answer.remark.as_deref(),
            ))
        }
    }
}
