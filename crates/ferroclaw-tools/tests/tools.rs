//! The tools crate's integration tests, one binary: real files, real child processes in
//! the real sandbox, local HTTP servers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod common;
mod web_support;

mod apply_patch;
mod approvals;
mod custom_tools;
mod exec;
mod exec_guard;
mod fs_tools;
mod input_guard;
mod mcp;
mod memory;
mod path_attacks;
mod policy;
mod process;
mod rate_limit;
mod registry;
mod sandbox;
mod scrub;
mod ssrf;
mod web_fetch;
mod web_search;
