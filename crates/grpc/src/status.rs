//! The gRPC layer's errors and the one place they become an answer: a business error is an
//! in-band `Status{code, message}` (the RPC itself succeeds, as Java's proxy answers), and the
//! broker's Remoting response codes map onto `Code` here and nowhere else.

use crate::pb::{Code, Status};
use ringmq_protocol::codes::response_code as rc;

/// Why a call failed, as the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GrpcError {
    pub code: Code,
    pub message: String,
}

impl GrpcError {
    pub fn new(code: Code, message: impl Into<String>) -> GrpcError {
        GrpcError {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> GrpcError {
        GrpcError::new(Code::BadRequest, message)
    }

    pub fn internal(message: impl Into<String>) -> GrpcError {
        GrpcError::new(Code::InternalServerError, message)
    }

    /// The broker's shards did not take or finish the job (full mailbox, stopping).
    pub fn busy() -> GrpcError {
        GrpcError::new(Code::TooManyRequests, "broker busy, try again later")
    }

    /// A broker answer other than SUCCESS, mapped as Java's proxy maps it.
    pub fn from_remoting(code: i32, remark: Option<&str>) -> GrpcError {
        let message = remark.unwrap_or("").to_string();
        GrpcError {
            code: code_of(code),
            message: if message.is_empty() {
                format!("broker answered code {code}")
            } else {
                message
            },
        }
    }

    pub fn status(&self) -> Status {
        Status {
            code: self.code as i32,
            message: self.message.clone(),
        }
    }
}

/// OK, as every successful answer says it.
pub fn ok() -> Status {
    Status {
        code: Code::Ok as i32,
        message: "OK".to_string(),
    }
}

/// The status of an answer: OK, or the error.
pub fn status_of<T>(r: &Result<T, GrpcError>) -> Status {
    match r {
        Ok(_) => ok(),
        Err(e) => e.status(),
    }
}

/// A Remoting response code as a gRPC `Code` (`ResponseBuilder`'s table, and the send
/// path's persistence codes).
pub fn code_of(remoting: i32) -> Code {
    match remoting {
        rc::SUCCESS => Code::Ok,
        rc::SYSTEM_BUSY => Code::TooManyRequests,
        rc::REQUEST_CODE_NOT_SUPPORTED => Code::NotImplemented,
        rc::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
        rc::TOPIC_NOT_EXIST => Code::TopicNotFound,
        rc::NO_PERMISSION => Code::Forbidden,
        rc::MESSAGE_ILLEGAL => Code::BadRequest,
        rc::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        rc::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        rc::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        rc::POLLING_FULL => Code::TooManyRequests,
        rc::POLLING_TIMEOUT | rc::PULL_NOT_FOUND => Code::MessageNotFound,
        rc::SERVICE_NOT_AVAILABLE => Code::TooManyRequests,
        _ => Code::InternalServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remoting_codes_map_as_the_proxy_maps_them() {
        assert_eq!(code_of(rc::SUCCESS), Code::Ok);
        assert_eq!(code_of(rc::SYSTEM_BUSY), Code::TooManyRequests);
        assert_eq!(code_of(rc::TOPIC_NOT_EXIST), Code::TopicNotFound);
        assert_eq!(
            code_of(rc::FLUSH_SLAVE_TIMEOUT),
            Code::SlavePersistenceTimeout
        );
        assert_eq!(code_of(rc::SYSTEM_ERROR), Code::InternalServerError);
        let e = GrpcError::from_remoting(rc::SUBSCRIPTION_GROUP_NOT_EXIST, None);
        assert_eq!(e.status().code, Code::ConsumerGroupNotFound as i32);
        assert!(e.message.contains("26"), "{e}");
    }
}
