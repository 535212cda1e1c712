//! `/anime/:id`: the facts of one anime, its franchise in order, and "similar to this".

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::{Card, NotFound};
use crate::{
    api::load_anime,
    i18n::{Lang, use_lang},
    search::{AnimeCard, AnimeDetails},
};

#[component]
pub fn AnimePage() -> impl IntoView {
    let t = use_lang().texts();
    let params = use_params_map();
    let id = move || {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<i32>().ok())
    };
    let details = Resource::new(id, |id| async move {
        match id {
            Some(id) => load_anime(id).await,
            None => Ok(None),
        }
    });
    view! {
        <main class="anime">
            <p class="back"><a href="/">{t.back_to_search}</a></p>
            <Suspense fallback=move || view! { <p role="status">{t.loading}</p> }>
                {move || Suspend::new(async move {
                    match details.await {
                        Ok(Some(details)) => view! { <AnimeView details /> }.into_any(),
                        Ok(None) => view! { <NotFound /> }.into_any(),
                        Err(error) => super::errors::failure_view(&error, None),
                    }
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn AnimeView(details: AnimeDetails) -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    let facts = facts(lang, &details);
    let card = details.card;
    let title = card.title.clone();
    let genres: Vec<&str> = card.genres.iter().map(|g| lang.genre(g)).collect();
    let current = card.id;
    view! {
        <Title text=format!("{title} — Zenbu") />
        <super::OpenGraph title=title.clone() description=card.snippet.clone() image=card.cover.clone() />
        <article class="anime-details">
            // Eager: it is the page's main image (and the largest paint).
            <super::Poster card=card.clone() width=230 height=326 class="poster poster-large" lazy=false />
            <h1>{title}</h1>
            {card.english_title.map(|english| view! { <p class="english">{english}</p> })}
            {details.native_title.map(|native| view! { <p class="native" lang="ja">{native}</p> })}
            <p class="facts">{facts}</p>
            {(!genres.is_empty())
                .then(|| view! { <p class="genres">{t.genres} " " {genres.join(", ")}</p> })}
            {(!details.themes.is_empty())
                .then(|| view! { <p class="themes">{t.themes} " " {details.themes.join(", ")}</p> })}
            {(!details.synonyms.is_empty()).then(|| {
                // Three names, the rest behind "more" (some anime have dozens).
                let (first, rest) = details.synonyms.split_at(details.synonyms.len().min(SHOWN_NAMES));
                view! {
                    <div class="synonyms">
                        {t.also_known_as} " " {first.join(" · ")}
                        {(!rest.is_empty()).then(|| view! {
                            <details class="more-names">
                                <summary>{format!("{} ({})", t.more_names, rest.len())}</summary>
                                {rest.join(" · ")}
                            </details>
                        })}
                    </div>
                }
            })}
            // The synopsis is AniList's, in English; the Spanish interface shows Apertium's
            // translation of it, said to be one, with the original a click away (a <details>:
            // no JavaScript needed).
            {match details.description_es.filter(|_| lang == Lang::Es) {
                Some(spanish) => view! {
                    <div class="description" lang="es">{paragraphs(&spanish)}</div>
                    <p class="machine-translated">{t.machine_translated}</p>
                    <details class="original-synopsis">
                        <summary>{t.show_original}</summary>
                        <div class="description" lang="en">{paragraphs(&details.description)}</div>
                    </details>
                }
                .into_any(),
                None => view! {
                    <div class="description" lang="en">{paragraphs(&details.description)}</div>
                }
                .into_any(),
            }}
        </article>
        {(details.franchise.len() > 1)
            .then(|| view! { <FranchiseList entries=details.franchise current /> })}
        <SimilarList cards=details.similar />
    }
}

/// Alternative names shown before "more".
const SHOWN_NAMES: usize = 3;

/// A text's lines as paragraphs.
fn paragraphs(text: &str) -> impl IntoView + use<> {
    text.lines()
        .map(|line| view! { <p>{line.to_string()}</p> })
        .collect_view()
}

/// "TV · Spring 2004 · 82%": format, season and year, average score, whichever are known.
fn facts(lang: Lang, details: &AnimeDetails) -> String {
    let card = &details.card;
    let facts: Vec<String> = [
        card.format.clone(),
        match (details.season.as_deref(), card.year) {
            (Some(season), Some(year)) => Some(format!("{} {year}", lang.season(season))),
            (None, Some(year)) => Some(year.to_string()),
            _ => None,
        },
        details.average_score.map(|s| lang.score(s)),
    ]
    .into_iter()
    .flatten()
    .collect();
    facts.join(" · ")
}

/// The franchise in order, each entry a link but the one shown (`current`).
#[component]
fn FranchiseList(entries: Vec<AnimeCard>, current: i32) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <section class="franchise" aria-labelledby="franchise-heading">
            <h2 id="franchise-heading">{t.franchise}</h2>
            <ol>
                {entries
                    .into_iter()
                    .map(|entry| {
                        let label = format!(
                            "{}{}",
                            entry.title,
                            entry.year.map(|y| format!(" ({y})")).unwrap_or_default(),
                        );
                        if entry.id == current {
                            view! { <li aria-current="page"><strong>{label}</strong></li> }.into_any()
                        } else {
                            view! { <li><a href=format!("/anime/{}", entry.id)>{label}</a></li> }.into_any()
                        }
                    })
                    .collect_view()}
            </ol>
        </section>
    }
}

/// "Similar to this": the nearest anime as cards.
#[component]
fn SimilarList(cards: Vec<AnimeCard>) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <section class="similar" aria-labelledby="similar-heading">
            <h2 id="similar-heading">{t.similar}</h2>
            {if cards.is_empty() {
                view! { <p>{t.nothing_similar}</p> }.into_any()
            } else {
                view! {
                    <ol class="hits">
                        {cards
                            .into_iter()
                            .map(|card| view! { <li class="hit"><Card card /></li> })
                            .collect_view()}
                    </ol>
                }
                    .into_any()
            }}
        </section>
    }
}
