//! What the console answers at each path: the pages (one HTML shell, `app.html`, whose script
//! draws the page the path names), the embedded assets under `/assets/`, and the JSON API
//! under `/api/` (`console::api`). A path that names nothing is a 404 page with a link home, or
//! under `/api/` a JSON error; every API error is `{"error": message}` with a status that says
//! whose fault it was (400 the request, 404 a missing topic or group, 502 a name server or
//! broker that did not answer).

use super::assets;
use super::http::{Request, Response};
use super::pages::error_response;
use super::Console;

/// The page paths the HTML shell draws (with a name after the prefixes that end in `/`).
const PAGES: &[&str] = &["/", "/cluster", "/topics", "/groups", "/messages"];
const PAGES_WITH_NAME: &[&str] = &["/topics/", "/groups/"];

/// The answer to `req`.
pub fn route(console: &Console, req: &Request) -> Response {
    if let Some(refused) = super::guard::check(req, &console.allowed_hosts) {
        return refused;
    }
    let path = req.path.as_str();
    if path == "/api" || path.starts_with("/api/") {
        return super::api::handle(console, req);
    }
    if req.method != "GET" {
        return error_response(405, &format!("{} is not allowed here", req.method), false);
    }
    if let Some(name) = path.strip_prefix("/assets/") {
        return match assets::find(name) {
            Some(a) => {
                let mut r = Response::new(200, a.content_type, a.bytes);
                r.cache = "max-age=300";
                r
            }
            None => not_found_page(path),
        };
    }
    let named = PAGES_WITH_NAME.iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    });
    if PAGES.contains(&path) || named {
        return Response::new(200, "text/html; charset=utf-8", assets::APP_HTML.as_bytes());
    }
    not_found_page(path)
}

fn not_found_page(path: &str) -> Response {
    error_response(404, &format!("There is no page at {path}."), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn get(path: &str) -> Request {
        Request {
            method: "GET".into(),
            path: path.into(),
            query: Vec::new(),
            content_type: String::new(),
            host: Some("127.0.0.1:8080".into()),
            origin: None,
            body: Vec::new(),
        }
    }

    fn console() -> Console {
        Console::new(&[SocketAddr::from(([127, 0, 0, 1], 1))]).unwrap()
    }

    /// Every page path is the HTML shell, an asset is its own bytes, and any other path is a
    /// 404 page that links home and shows the path escaped.
    #[test]
    fn pages_assets_and_missing_pages() {
        for p in [
            "/",
            "/cluster",
            "/topics",
            "/topics/T1",
            "/groups/G1",
            "/messages",
        ] {
            let r = route(&console(), &get(p));
            assert_eq!(
                (r.status, r.content_type),
                (200, "text/html; charset=utf-8"),
                "{p}"
            );
            assert_eq!(&*r.body, assets::APP_HTML.as_bytes(), "{p}");
        }
        let css = route(&console(), &get("/assets/app.css"));
        assert_eq!(
            (css.status, css.content_type),
            (200, "text/css; charset=utf-8")
        );
        for p in [
            "/nope",
            "/topics/",
            "/topics/a/b",
            "/assets/nope.js",
            "/<b>",
        ] {
            let r = route(&console(), &get(p));
            assert_eq!(r.status, 404, "{p}");
            let html = String::from_utf8(r.body.to_vec()).unwrap();
            assert!(html.contains("href=\"/\""), "{p}: no link home");
            assert!(!html.contains("<b>"), "{p}: path not escaped");
        }
        let post = Request {
            method: "POST".into(),
            ..get("/topics")
        };
        assert_eq!(route(&console(), &post).status, 405);
    }
}
