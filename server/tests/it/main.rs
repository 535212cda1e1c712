//! The server's integration tests, in one binary (one link of the whole server instead of one
//! per area): a module per area, and `common` with the helpers they share.
//!
//! All tests share this process: the local model (`common::model`), the lock that lets one test
//! at a time fill the vector cache (`common::demo_engine`), and the server's process-wide state
//! (the Prometheus recorder of `server::metrics`, the password-hashing permits). No test sets
//! environment variables. Run one area with e.g. `cargo test -p server --test it search::`.

mod common;

mod accounts;
mod allowance;
mod anilist;
mod billing;
mod catalog;
mod database;
mod e5;
mod embedded_postgres;
mod http;
mod in_memory;
mod limits;
mod mail;
mod module_graph;
mod posters;
mod premise;
mod quota;
mod replica;
mod search;
mod second_view;
mod translate;
