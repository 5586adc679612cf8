//! The store's tests, one binary: the embedded backend against real files
//! (`file_store`, `integrity`) and both backends through one conformance suite.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failed fixture should stop the test

mod conformance;
mod file_store;
mod integrity;
mod tls;
