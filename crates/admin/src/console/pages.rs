//! The answers the console writes itself rather than draws with its script: errors, as JSON
//! `{"error": message}` for the API or as the small HTML page `assets/error.html` (with a link
//! home) otherwise.

use serde_json::json;

use super::assets;
use super::http::Response;

/// An error answer: JSON `{"error": message}` for the API, a small HTML page otherwise.
pub fn error_response(status: u16, message: &str, api: bool) -> Response {
    if api {
        return Response::json(status, &json!({ "error": message }));
    }
    let body = assets::ERROR_HTML
        .replace("{{status}}", &status.to_string())
        .replace("{{message}}", &html_escape(message));
    Response::new(status, "text/html; charset=utf-8", body.into_bytes())
}

/// `s` safe to put in HTML text.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
