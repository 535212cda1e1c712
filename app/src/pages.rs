//! Pages of the site, one component each, in the language of the request (`crate::i18n`).

mod account;
mod anime;
mod errors;
mod home;
mod premium;

pub use account::{
    AccountPage, ConfirmEmailPage, ConfirmPage, ForgotPasswordPage, ForgotSentPage, LoginPage,
    RegisterPage, RegisterSentPage, ResetPasswordPage, SiteNav,
};
pub use anime::AnimePage;
pub use errors::{NotFound, ServerError, Unavailable};
pub use home::HomePage;
pub use premium::{PremiumCancelledPage, PremiumPage, PremiumSuccessPage};

use leptos::prelude::*;

use crate::{
    i18n::use_lang,
    search::{AnimeCard, COVER_HEIGHT, COVER_WIDTH},
};

/// One anime: linked title, English title, year, format, genres, the start of its synopsis, with
/// `mark` (a part of that start, e.g. the passage a search matched) marked when it is there.
#[component]
fn Card(card: AnimeCard, #[prop(default = None)] mark: Option<String>) -> impl IntoView {
    let lang = use_lang();
    let facts: Vec<String> = [card.year.map(|y| y.to_string()), card.format.clone()]
        .into_iter()
        .flatten()
        .collect();
    let genres: Vec<&str> = card.genres.iter().map(|g| lang.genre(g)).collect();
    view! {
        <article class="card">
            <Poster card=card.clone() width=COVER_WIDTH height=COVER_HEIGHT class="poster" />
            <h3><a href=format!("/anime/{}", card.id)>{card.title.clone()}</a></h3>
            {card.english_title.clone().map(|english| view! { <p class="english">{english}</p> })}
            <p class="facts">
                {facts.join(" · ")}
                {(!genres.is_empty()).then(|| format!(" — {}", genres.join(", ")))}
            </p>
            <p class="snippet">{marked(&card.snippet, mark.as_deref())}</p>
        </article>
    }
}

/// An anime's poster at a fixed size (so nothing moves when it loads), over a block of its
/// colour that shows while it loads; where AniList has no poster, the block with the title's
/// initials. The block is an inline SVG painted by its `fill` attribute: the pages' Content
/// Security Policy allows no inline style.
#[component]
fn Poster(
    card: AnimeCard,
    width: u32,
    height: u32,
    class: &'static str,
    #[prop(default = true)] lazy: bool,
) -> impl IntoView {
    let loading = if lazy { "lazy" } else { "eager" };
    let color = card.block_color();
    let view_box = format!("0 0 {width} {height}");
    let block = |initials: Option<String>| {
        view! {
            <svg class="poster-block" viewBox=view_box.clone() aria-hidden="true" focusable="false">
                <rect width="100%" height="100%" fill=color.clone() />
                {initials.map(|letters| view! {
                    <text x="50%" y="50%" dominant-baseline="central" text-anchor="middle"
                        fill="#ffffff" font-size=(height / 5).to_string() font-weight="600">{letters}</text>
                })}
            </svg>
        }
    };
    match card.cover.clone() {
        Some(src) => view! {
            <div class=class>
                {block(None)}
                <img src=src alt=card.title.clone() loading=loading decoding="async"
                    width=width.to_string() height=height.to_string() />
            </div>
        }
        .into_any(),
        None => view! {
            <div class=format!("{class} poster-missing") role="img" aria-label=card.title.clone()>
                {block(Some(card.initials()))}
            </div>
        }
        .into_any(),
    }
}

/// The Open Graph tags of a page, so a shared link shows its title and, when there is one, a
/// poster.
#[component]
fn OpenGraph(title: String, description: String, image: Option<String>) -> impl IntoView {
    use leptos_meta::Meta;
    view! {
        <Meta property="og:site_name" content="Zenbu" />
        <Meta property="og:type" content="website" />
        <Meta property="og:title" content=title />
        <Meta property="og:description" content=description />
        {image.map(|path| view! { <Meta property="og:image" content=crate::security::absolute(&path) /> })}
    }
}

/// `text` with the first occurrence of `mark` in a `<mark>` (all of it plain when `mark` is
/// absent, empty or not in it).
fn marked(text: &str, mark: Option<&str>) -> impl IntoView + use<> {
    let split = mark
        .filter(|m| !m.is_empty())
        .and_then(|m| text.find(m).map(|at| (at, at + m.len())));
    match split {
        Some((start, end)) => {
            let (before, middle, after) = (&text[..start], &text[start..end], &text[end..]);
            view! { {before.to_string()}<mark>{middle.to_string()}</mark>{after.to_string()} }
                .into_any()
        }
        None => text.to_string().into_any(),
    }
}
