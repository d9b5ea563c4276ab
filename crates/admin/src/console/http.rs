//! The console's HTTP/1.1, as much of it as a browser talking to the console needs: one request
//! per connection (every answer says `Connection: close`), its head parsed by `httparse` from a
//! buffer of at most `CONSOLE_MAX_HEAD_BYTES`, a body of at most `CONSOLE_MAX_BODY_BYTES`
//! (`Content-Length` only; chunked uploads are refused), the socket's reads and writes bounded
//! by `CONSOLE_IO_TIMEOUT_MS` and the whole request by twice that. Called by the console's
//! workers (`console::server`); knows nothing of routes.

use std::borrow::Cow;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::constants::{
    CONSOLE_IO_TIMEOUT_MS, CONSOLE_MAX_BODY_BYTES, CONSOLE_MAX_HEADERS, CONSOLE_MAX_HEAD_BYTES,
};

/// One request as the routes see it.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's `name=value` pairs, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// The `Content-Type` header's media type (before any `;`), lower-cased; empty if none.
    pub content_type: String,
    /// The `Host` header (`host[:port]`), if any.
    pub host: Option<String>,
    /// The `Origin` header, if any (browsers send it with cross-origin and non-GET requests).
    pub origin: Option<String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of query parameter `name`, if any and not empty.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }
}

/// Why no request could be read. `Malformed` and `TooLarge` are answered (400, 413); the others
/// only close the connection.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    #[error("the client closed the connection")]
    Closed,
    #[error("the request took longer than its deadline")]
    Deadline,
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("request too large: {0}")]
    TooLarge(&'static str),
}

/// One answer.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Cow<'static, [u8]>,
    /// `Cache-Control` value; `no-store` unless said otherwise.
    pub cache: &'static str,
}

impl Response {
    pub fn new(
        status: u16,
        content_type: &'static str,
        body: impl Into<Cow<'static, [u8]>>,
    ) -> Self {
        Response {
            status,
            content_type,
            body: body.into(),
            cache: "no-store",
        }
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Self {
        // Serializing a Value cannot fail (its keys are strings).
        let body = serde_json::to_vec(value).unwrap_or_default();
        Response::new(status, "application/json; charset=utf-8", body)
    }
}

/// The reason phrase of the statuses the console sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Sets the socket's timeouts for one exchange.
pub fn prepare(stream: &TcpStream) -> io::Result<()> {
    let t = Some(Duration::from_millis(CONSOLE_IO_TIMEOUT_MS));
    stream.set_read_timeout(t)?;
    stream.set_write_timeout(t)?;
    stream.set_nodelay(true)
}

/// Reads one request from `stream`, within bounds of size and time.
pub fn read_request(stream: &mut TcpStream) -> Result<Request, HttpError> {
    let deadline = Instant::now() + Duration::from_millis(2 * CONSOLE_IO_TIMEOUT_MS);
    let mut buf = vec![0u8; CONSOLE_MAX_HEAD_BYTES];
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(HttpError::TooLarge("request head"));
        }
        let n = read_some(stream, &mut buf[len..], deadline)?;
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; CONSOLE_MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => continue,
            Err(e) => return Err(HttpError::Malformed(e.to_string())),
        };
        let method = req.method.unwrap_or_default().to_string();
        let target = req.path.unwrap_or_default();
        let mut content_length = 0usize;
        let mut content_type = String::new();
        let (mut host, mut origin) = (None, None);
        for h in req.headers.iter() {
            let text = || String::from_utf8_lossy(h.value).trim().to_string();
            if h.name.eq_ignore_ascii_case("host") {
                host = Some(text());
            } else if h.name.eq_ignore_ascii_case("origin") {
                origin = Some(text());
            } else if h.name.eq_ignore_ascii_case("content-type") {
                let v = String::from_utf8_lossy(h.value);
                content_type = v
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
            } else if h.name.eq_ignore_ascii_case("content-length") {
                content_length = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| HttpError::Malformed("bad Content-Length".into()))?;
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(HttpError::Malformed(
                    "chunked bodies are not accepted".into(),
                ));
            }
        }
        if content_length > CONSOLE_MAX_BODY_BYTES {
            return Err(HttpError::TooLarge("request body"));
        }
        let (path, query) = split_target(target)?;
        let mut body = buf[head_len..len].to_vec();
        body.truncate(content_length);
        let mut chunk = [0u8; 4096];
        while body.len() < content_length {
            let want = (content_length - body.len()).min(chunk.len());
            let n = read_some(stream, &mut chunk[..want], deadline)?;
            body.extend_from_slice(&chunk[..n]);
        }
        return Ok(Request {
            method,
            path,
            query,
            content_type,
            host,
            origin,
            body,
        });
    }
}

/// One read: at least one byte, or an error (end of stream, timeout, deadline passed).
fn read_some(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<usize, HttpError> {
    if Instant::now() >= deadline {
        return Err(HttpError::Deadline);
    }
    match stream.read(buf) {
        Ok(0) => Err(HttpError::Closed),
        Ok(n) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(HttpError::Io(e)),
    }
}

/// Splits a request target into its decoded path and query pairs. Only origin-form targets
/// (`/path?query`) are accepted.
fn split_target(target: &str) -> Result<(String, Vec<(String, String)>), HttpError> {
    if !target.starts_with('/') {
        return Err(HttpError::Malformed(format!("target {target:?}")));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = percent_decode(raw_path, false)
        .ok_or_else(|| HttpError::Malformed("path is not UTF-8 once decoded".into()))?;
    Ok((path, parse_query(raw_query)?))
}

/// `a=1&b=x%20y` as pairs; `+` is a space, as browsers encode forms.
pub fn parse_query(raw: &str) -> Result<Vec<(String, String)>, HttpError> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match (percent_decode(k, true), percent_decode(v, true)) {
                (Some(k), Some(v)) => Ok((k, v)),
                _ => Err(HttpError::Malformed(
                    "query is not UTF-8 once decoded".into(),
                )),
            }
        })
        .collect()
}

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`); a bad escape is kept as
/// written; `None` if the bytes are not UTF-8.
fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Writes `resp` and closes the exchange (`Connection: close`).
pub fn write_response(stream: &mut TcpStream, resp: &Response) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {}\r\n\
         X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\n\
         Content-Security-Policy: frame-ancestors 'none'\r\nConnection: close\r\n\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len(),
        resp.cache,
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&resp.body)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Escapes decode to their bytes, `+` only in queries, and a bad escape stays as written.
    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c", true).unwrap(), "a b c");
        assert_eq!(percent_decode("a%20b+c", false).unwrap(), "a b+c");
        assert_eq!(percent_decode("100%", true).unwrap(), "100%");
        assert_eq!(percent_decode("%zz%4", true).unwrap(), "%zz%4");
        assert_eq!(percent_decode("%E2%9C%93", true).unwrap(), "\u{2713}");
        assert!(percent_decode("%FF", true).is_none());
    }

    /// A target splits into its decoded path and query pairs; a target that is not a path is
    /// malformed.
    #[test]
    fn targets() {
        let (path, query) = split_target("/api/topics/T%25x?key=k+1&id=&x").unwrap();
        assert_eq!(path, "/api/topics/T%x");
        assert_eq!(
            query,
            vec![
                ("key".into(), "k 1".into()),
                ("id".into(), String::new()),
                ("x".into(), String::new())
            ]
        );
        assert!(split_target("http://host/").is_err());
    }
}
