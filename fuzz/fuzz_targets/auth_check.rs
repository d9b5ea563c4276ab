//! libFuzzer target: `ringmq_fuzz::auth_check` (see fuzz/src/lib.rs for the properties it asserts).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringmq_fuzz::auth_check(data));
