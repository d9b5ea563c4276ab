//! The console's JSON API: `GET /api/cluster`, `GET|POST /api/topics`, `GET /api/topics/NAME`,
//! `GET /api/groups`, `GET /api/groups/NAME`, `POST /api/groups/NAME/reset-offset`,
//! `GET /api/messages?id=ID[&topic=T]` or `?topic=T&key=K`. Each answer is built from admin
//! calls (`crate::AdminClient`) made on the worker thread that serves the request; a
//! failure is `{"error": message}` with the status `ConsoleError::status` gives it.

mod cluster;
mod groups;
mod messages;
mod topics;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ConsoleError;
use super::http::{Request, Response};
use super::pages::error_response;
use super::Console;

/// The answer to an API request (its path starts with `/api`).
pub fn handle(console: &Console, req: &Request) -> Response {
    let rest = req.path.strip_prefix("/api").unwrap_or_default();
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let method = req.method.as_str();
    // A form from another site's page cannot be sent as JSON without the browser asking this
    // console first (CORS), which it never allows: so only the console's own pages can post.
    if method == "POST" && req.content_type != "application/json" {
        return error_response(
            415,
            "the API takes forms as Content-Type: application/json",
            true,
        );
    }
    let result = match (method, segs.as_slice()) {
        ("GET", ["cluster"]) => cluster::cluster(console),
        ("GET", ["topics"]) => topics::list(console),
        ("POST", ["topics"]) => form(&req.body).and_then(|f| topics::create(console, f)),
        ("GET", ["topics", name]) => topics::detail(console, name),
        ("GET", ["groups"]) => groups::list(console),
        ("GET", ["groups", name]) => groups::detail(console, name),
        ("POST", ["groups", name, "reset-offset"]) => {
            form(&req.body).and_then(|f| groups::reset_offset(console, name, f))
        }
        ("GET", ["messages"]) => messages::lookup(console, req),
        (_, ["cluster" | "topics" | "groups" | "messages", ..]) => {
            return error_response(
                405,
                &format!("{method} is not allowed on {}", req.path),
                true,
            )
        }
        _ => return error_response(404, &format!("There is no API at {}.", req.path), true),
    };
    match result {
        Ok(v) => Response::json(200, &v),
        Err(e) => {
            tracing::debug!(path = %req.path, error = %e, "console: API error");
            error_response(e.status(), &e.to_string(), true)
        }
    }
}

/// A form posted as JSON.
fn form<T: DeserializeOwned>(body: &[u8]) -> Result<T, ConsoleError> {
    serde_json::from_slice(body)
        .map_err(|e| ConsoleError::BadRequest(format!("the form is not what this API takes: {e}")))
}

/// A JSON answer (serializing the console's own types cannot fail).
fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
