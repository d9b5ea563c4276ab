//! House rules over the repository's own files, and the fuzz targets' bodies run on their corpora.
//!
//! One test binary of several files (each a module below), so the suite links the broker once
//! per group instead of once per file.

mod fuzz_smoke;
mod imports;
mod rules;
