//! The runtime's tests, one binary: the agent loop as configured (`agent_loop`,
//! `compaction`, `tool_modes`) and as a surface builds it (`run_options`), the
//! scheduler, the session tools, and the one-writer rule across every pair of entry
//! points (`no_overlap`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod agent_loop;
mod common;
mod compaction;
mod cron;
mod no_overlap;
mod run_options;
mod scheduler;
mod session_tools;
mod tool_modes;
mod traces;
