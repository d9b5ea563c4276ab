//! The controller's one error enum: every refusal a controller answers with, and its one
//! mapping to RocketMQ's response codes (`ControllerError::response_code`). The broker has its
//! own enum; the controller does not reach into the broker.
//!
//! Refusals carry the remark the client sees; the codes and the order in which requests are
//! checked are those of Java's `ReplicasInfoManager` and `ControllerRequestProcessor`.

use crate::protocol::codes::response_code as rc;
use crate::protocol::ProtocolError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    FencedMasterEpoch(String),
    #[error("{0}")]
    FencedSyncStateSetEpoch(String),
    #[error("{0}")]
    InvalidMaster(String),
    #[error("{0}")]
    InvalidReplicas(String),
    #[error("{0}")]
    MasterNotAvailable(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    BrokerNotAlive(String),
    #[error("The controller is not in leader state")]
    NotLeader,
    #[error("{0}")]
    BrokerMetadataNotExist(String),
    #[error("{0}")]
    InvalidCleanBrokerMetadata(String),
    #[error("{0}")]
    BrokerNeedToBeRegistered(String),
    #[error("{0}")]
    MasterStillExist(String),
    #[error("{0}")]
    ElectMasterFailed(String),
    #[error("{0}")]
    AlterSyncStateSetFailed(String),
    #[error("{0}")]
    BrokerIdInvalid(String),
    /// A header or body that does not decode.
    #[error("bad request: {0}")]
    Protocol(String),
    /// The Raft engine failed to commit (no quorum in time, shut down, storage error).
    #[error("raft: {0}")]
    Raft(String),
    #[error("request code {0} not supported")]
    NotSupported(i32),
}

impl From<ProtocolError> for ControllerError {
    fn from(e: ProtocolError) -> Self {
        ControllerError::Protocol(e.to_string())
    }
}

impl ControllerError {
    /// The one mapping to the response code a client sees.
    pub fn response_code(&self) -> i32 {
        match self {
            ControllerError::FencedMasterEpoch(_) => rc::CONTROLLER_FENCED_MASTER_EPOCH,
            ControllerError::FencedSyncStateSetEpoch(_) => {
                rc::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
            }
            ControllerError::InvalidMaster(_) => rc::CONTROLLER_INVALID_MASTER,
            ControllerError::InvalidReplicas(_) => rc::CONTROLLER_INVALID_REPLICAS,
            ControllerError::MasterNotAvailable(_) => rc::CONTROLLER_MASTER_NOT_AVAILABLE,
            ControllerError::InvalidRequest(_) => rc::CONTROLLER_INVALID_REQUEST,
            ControllerError::BrokerNotAlive(_) => rc::CONTROLLER_BROKER_NOT_ALIVE,
            ControllerError::NotLeader => rc::CONTROLLER_NOT_LEADER,
            ControllerError::BrokerMetadataNotExist(_) => rc::CONTROLLER_BROKER_METADATA_NOT_EXIST,
            ControllerError::InvalidCleanBrokerMetadata(_) => {
                rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA
            }
            ControllerError::BrokerNeedToBeRegistered(_) => {
                rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
            }
            ControllerError::MasterStillExist(_) => rc::CONTROLLER_MASTER_STILL_EXIST,
            ControllerError::ElectMasterFailed(_) => rc::CONTROLLER_ELECT_MASTER_FAILED,
            ControllerError::AlterSyncStateSetFailed(_) => {
                rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
            }
            ControllerError::BrokerIdInvalid(_) => rc::CONTROLLER_BROKER_ID_INVALID,
            // Java's processor throws on an undecodable header or body, and the remoting
            // server answers the exception as SYSTEM_ERROR.
            ControllerError::Protocol(_) => rc::SYSTEM_ERROR,
            ControllerError::Raft(_) => rc::SYSTEM_ERROR,
            ControllerError::NotSupported(_) => rc::REQUEST_CODE_NOT_SUPPORTED,
        }
    }
}
