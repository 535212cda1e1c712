//! Local stand-ins for the external APIs Zenbu talks to, speaking their wire formats (errors and
//! limits included). Tests drive the real clients against them; `server fake …` runs one by hand.

pub mod anilist;
