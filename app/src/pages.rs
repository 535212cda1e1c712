//! Pages of the site, one component each, in the language of the request (`crate::i18n`).

mod account;
mod anime;
mod errors;
mod home;
mod premium;

pub use account::{AccountPage, ConfirmPage, LoginPage, RegisterPage, RegisterSentPage, SiteNav};
pub use anime::AnimePage;
pub use errors::{NotFound, ServerError, Unavailable};
pub use home::HomePage;
pub use premium::{PremiumCancelledPage, PremiumPage, PremiumSuccessPage};

use leptos::prelude::*;

use crate::{i18n::use_lang, search::AnimeCard};

/// One anime: linked title, English title, year, format, genres, the start of its synopsis.
#[component]
fn Card(card: AnimeCard) -> impl IntoView {
    let lang = use_lang();
    let facts: Vec<String> = [card.year.map(|y| y.to_string()), card.format.clone()]
        .into_iter()
        .flatten()
        .collect();
    let genres: Vec<&str> = card.genres.iter().map(|g| lang.genre(g)).collect();
    view! {
        <article class="card">
            <h3><a href=format!("/anime/{}", card.id)>{card.title.clone()}</a></h3>
            {card.english_title.clone().map(|english| view! { <p class="english">{english}</p> })}
            <p class="facts">
                {facts.join(" · ")}
                {(!genres.is_empty()).then(|| format!(" — {}", genres.join(", ")))}
            </p>
            <p class="snippet">{card.snippet.clone()}</p>
        </article>
    }
}
