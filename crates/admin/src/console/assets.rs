//! The console's pages, style and script, embedded in the binary at build time from
//! `crates/admin/src/console/assets/` (plain HTML, CSS and JavaScript written for ringmq; no
//! build step, no third-party code), so a console needs no files beside the binary.

/// The shell of every page: its script draws the page the path names.
pub const APP_HTML: &str = include_str!("assets/app.html");
/// The page of an error the server answers itself (a missing page): `{{status}}` and
/// `{{message}}` are filled in (the message HTML-escaped).
pub const ERROR_HTML: &str = include_str!("assets/error.html");

/// One file under `/assets/`.
pub struct Asset {
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

const ASSETS: &[(&str, Asset)] = &[
    (
        "app.js",
        Asset {
            content_type: "text/javascript; charset=utf-8",
            bytes: include_bytes!("assets/app.js"),
        },
    ),
    (
        "charts.js",
        Asset {
            content_type: "text/javascript; charset=utf-8",
            bytes: include_bytes!("assets/charts.js"),
        },
    ),
    (
        "app.css",
        Asset {
            content_type: "text/css; charset=utf-8",
            bytes: include_bytes!("assets/app.css"),
        },
    ),
    (
        "favicon.svg",
        Asset {
            content_type: "image/svg+xml",
            bytes: include_bytes!("assets/favicon.svg"),
        },
    ),
];

/// The asset named `name` (the path after `/assets/`).
pub fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|(n, _)| *n == name).map(|(_, a)| a)
}
