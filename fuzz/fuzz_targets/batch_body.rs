//! libFuzzer target: `ringmq_fuzz::batch_body` (see fuzz/src/lib.rs for the properties it asserts).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringmq_fuzz::batch_body(data));
