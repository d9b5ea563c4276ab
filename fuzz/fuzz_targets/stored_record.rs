//! libFuzzer target: `ringmq_fuzz::stored_record` (see fuzz/src/lib.rs for the properties it asserts).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringmq_fuzz::stored_record(data));
