//! The console API's one error type, and the HTTP status each kind of failure answers with.

use crate::AdminError;

/// Why an API request failed; its text is what the page shows.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// A name server or broker call failed.
    #[error("{0}")]
    Admin(#[from] AdminError),
    /// The request itself is wrong (a missing parameter, a bad form value).
    #[error("{0}")]
    BadRequest(String),
    /// The topic, group or message asked for does not exist.
    #[error("{0}")]
    NotFound(String),
}

impl ConsoleError {
    /// 400 for the request's fault, 404 for what does not exist, 502 for a name server or
    /// broker that failed to answer or refused.
    pub fn status(&self) -> u16 {
        match self {
            ConsoleError::BadRequest(_) | ConsoleError::Admin(AdminError::InvalidArgument(_)) => {
                400
            }
            ConsoleError::NotFound(_) => 404,
            ConsoleError::Admin(e) if e.is_not_found() => 404,
            ConsoleError::Admin(_) => 502,
        }
    }

    /// `e`, or for a missing thing a `NotFound` that says what was looked for.
    pub fn not_found_as(e: AdminError, what: impl FnOnce() -> String) -> ConsoleError {
        if e.is_not_found() {
            ConsoleError::NotFound(format!("{} ({e})", what()))
        } else {
            ConsoleError::Admin(e)
        }
    }
}
