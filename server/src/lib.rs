//! Zenbu's server: the axum binary, its command line and the backend services.
//!
//! One module per capability; `main.rs` only parses the command line and calls [`cli::run`].

pub mod accounts;
pub mod billing;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod db;
pub mod files;
pub mod http;
pub mod images;
pub mod mail;
pub mod metrics;
pub mod openai;
pub mod pypi;
pub mod quality;
pub mod quota;
pub mod retention;
pub mod search;
pub mod startup;
