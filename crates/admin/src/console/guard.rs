//! Who may drive the console from a browser. The console changes the cluster (topics, groups,
//! offsets), so a web page the operator happens to open must not be able to use it:
//!
//! - **DNS rebinding**: a page on a name its owner points at 127.0.0.1 is same-origin with the
//!   console in the browser's eyes, but its requests carry that name in `Host`. Only an IP
//!   literal, `localhost`, or a name the operator allowed (`--console-host`, for a console behind
//!   a reverse proxy) is served.
//! - **Cross-origin requests**: a request that carries an `Origin` must come from the console's
//!   own origin (the `Host` it was sent to). Browsers send `Origin` with every cross-origin fetch
//!   and form post; a plain link (a top-level GET) carries none and still works.
//!
//! Pure: `routes` asks here before it answers anything.

use std::net::IpAddr;

use super::http::{Request, Response};
use super::pages::error_response;

/// The hosts a request may name: IP literals and `localhost` always, else `allowed` (lower
/// case, without port).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host);
    name.parse::<IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

/// `host[:port]` without the port; an IPv6 literal loses its brackets.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The authority (`host[:port]`) of an `Origin` value, None for `null` or a malformed one.
fn origin_authority(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    Some(rest.trim_end_matches('/'))
}

/// The refusal of `req`, or None when it may be served.
pub fn check(req: &Request, allowed_hosts: &[String]) -> Option<Response> {
    let api = req.path.starts_with("/api");
    let Some(host) = req.host.as_deref() else {
        return Some(error_response(400, "A Host header is required.", api));
    };
    if !host_allowed(host, allowed_hosts) {
        let name = host_name(host);
        tracing::warn!(
            host = name,
            "console request for a host it does not serve refused"
        );
        return Some(error_response(
            403,
            &format!(
                "This console is not served as {name}. Reach it by its IP address, or start it \
                 with --console-host {name} when a proxy forwards that name."
            ),
            api,
        ));
    }
    if let Some(origin) = req.origin.as_deref() {
        if origin_authority(origin).is_none_or(|a| !a.eq_ignore_ascii_case(host)) {
            tracing::warn!(origin, "cross-origin console request refused");
            return Some(error_response(
                403,
                "Requests from other web sites are refused.",
                api,
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(host: Option<&str>, origin: Option<&str>) -> Request {
        Request {
            method: "POST".into(),
            path: "/api/topics".into(),
            query: Vec::new(),
            content_type: "application/json".into(),
            host: host.map(String::from),
            origin: origin.map(String::from),
            body: Vec::new(),
        }
    }

    /// IP literals, localhost and allowed names pass; any other name (a rebinding attacker's)
    /// and a missing Host are refused.
    #[test]
    fn hosts() {
        let allowed = vec!["mq.example.org".to_string()];
        for ok in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "localhost:8080",
            "10.1.2.3",
            "MQ.example.org",
        ] {
            assert!(check(&req(Some(ok), None), &allowed).is_none(), "{ok}");
        }
        for bad in ["evil.example:8080", "127.0.0.1.nip.io", "localhost.evil"] {
            let r = check(&req(Some(bad), None), &allowed).expect(bad);
            assert_eq!(r.status, 403, "{bad}");
        }
        assert_eq!(check(&req(None, None), &allowed).unwrap().status, 400);
    }

    /// An Origin must be the console's own; a request without one (a link, curl) passes.
    #[test]
    fn origins() {
        let host = Some("127.0.0.1:8080");
        assert!(check(&req(host, Some("http://127.0.0.1:8080")), &[]).is_none());
        assert!(check(&req(host, None), &[]).is_none());
        for bad in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:9090",
            "garbage",
        ] {
            let r = check(&req(host, Some(bad)), &[]).expect(bad);
            assert_eq!(r.status, 403, "{bad}");
        }
    }
}
