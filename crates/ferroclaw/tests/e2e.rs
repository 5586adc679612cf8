//! The binary's end-to-end tests, one test binary: each `tests/*.rs` would link the
//! whole stack again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod channels_e2e;
mod cli;
mod crash_safety;
mod dashboard_e2e;
mod executor_e2e;
mod first_run;
mod gateway_e2e;
mod gateway_services;
mod integrity;
mod openclaw_e2e;
