//! Who is searching: anonymous visitors (signed cookie) now; registered users and sessions next.

pub mod visitor;
