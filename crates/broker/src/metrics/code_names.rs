//! The label values of `rocketmq_rpc_latency`: a request or response code as the lower-cased
//! name of its Java constant (`RequestCode`, `ResponseCode`), which Java's `RemotingHelper`
//! produces with reflection; a code without a name is written as its number.
//!
//! The names are `protocol::codes`' tables, lower-cased once on first use (at a scrape, never on
//! a request's path).

use std::sync::OnceLock;

use crate::protocol::codes::{request_code, response_code};

/// `names` lower-cased, in the same order (so one index finds a code in both).
fn lowered(names: &[(i32, &str)]) -> Vec<String> {
    names.iter().map(|(_, n)| n.to_ascii_lowercase()).collect()
}

fn lookup(
    names: &'static [(i32, &'static str)],
    lower: &'static OnceLock<Vec<String>>,
    code: i32,
) -> Option<&'static str> {
    let i = names.binary_search_by_key(&code, |e| e.0).ok()?;
    Some(lower.get_or_init(|| lowered(names))[i].as_str())
}

/// The `request_code` label of a request code, None when ringmq knows no name for it.
pub fn request_code_name(code: i32) -> Option<&'static str> {
    static LOWER: OnceLock<Vec<String>> = OnceLock::new();
    lookup(request_code::NAMES, &LOWER, code)
}

/// The `response_code` label of a response code, None when ringmq knows no name for it.
pub fn response_code_name(code: i32) -> Option<&'static str> {
    static LOWER: OnceLock<Vec<String>> = OnceLock::new();
    lookup(response_code::NAMES, &LOWER, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's spellings: SEND_MESSAGE_V2 is `send_message_v2`, PULL_NOT_FOUND `pull_not_found`;
    /// every code of the tables has its label.
    #[test]
    fn java_names() {
        assert_eq!(request_code_name(310), Some("send_message_v2"));
        assert_eq!(request_code_name(11), Some("pull_message"));
        assert_eq!(response_code_name(0), Some("success"));
        assert_eq!(response_code_name(19), Some("pull_not_found"));
        assert_eq!(request_code_name(-7), None);
        for (code, name) in request_code::NAMES {
            assert_eq!(request_code_name(*code), Some(&*name.to_ascii_lowercase()));
        }
    }
}
