//! The integration tests: one test binary (linking the library once per build), one module per
//! subject, so that a test's name starts with its module (`cargo test --test integration
//! codec::` runs one module). A new subject is a file here and a `mod` line below. Tests that
//! measure or change what the process has once (its heap, memory-reuse store, thread pools,
//! test-hook counters) are in tests/process_wide instead; tests here share the process and run
//! in parallel threads.

#[path = "../common/mod.rs"]
mod common;

mod alignment;
mod codec;
mod concurrency;
mod crash_safe_save;
mod deep_nesting;
mod dlpack;
mod documented_defaults;
mod encrypted_external;
mod encryption;
mod external_data;
mod fuzz_regressions;
mod generated_files;
mod input_files;
mod large_external;
mod large_model;
mod list_limit;
mod onnxcry1;
mod out_of_memory;
mod params;
mod prepacked;
mod quadratic_paths;
mod shared_ranges;
mod windows_paths;

// Source checks, the same on every target: not built for the cross-compiled runs under qemu
// and Wine (scripts/test.d/70-cross.sh).
#[cfg(not(any(windows, target_arch = "aarch64")))]
mod layers;
#[cfg(not(any(windows, target_arch = "aarch64")))]
mod stands_alone;
#[cfg(not(any(windows, target_arch = "aarch64")))]
mod versioning;
