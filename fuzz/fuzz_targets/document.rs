#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| server::fuzz_checks::document(data));
