//! `sqlx::migrate!` embeds the migration files at compile time; without this, cargo would not
//! rebuild the server when only a migration changed, and it would run stale SQL.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
