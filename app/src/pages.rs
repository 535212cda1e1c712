//! Pages of the site, one component each.

mod account;
mod premium;

pub use account::{AccountPage, ConfirmPage, LoginPage, RegisterPage, RegisterSentPage, SiteNav};
pub use premium::{PremiumCancelledPage, PremiumPage, PremiumSuccessPage};

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::Form,
    hooks::{use_params_map, use_query_map},
};

use crate::{
    api::{load_anime, search},
    search::{
        AnimeCard, AnimeDetails, Branch, Filters, MAX_QUERY_CHARS, QuotaInfo, Ranking, Refusal,
        SearchResults,
    },
};

/// Example descriptions a visitor can try with one click.
const EXAMPLES: [&str; 3] = [
    "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
    "a boy who can see ghosts joins a club at school",
    "piratas buscando un tesoro legendario",
];

/// AniList formats offered as a filter: (code, label).
const FORMATS: [(&str, &str); 7] = [
    ("TV", "TV"),
    ("MOVIE", "Movie"),
    ("OVA", "OVA"),
    ("ONA", "ONA"),
    ("SPECIAL", "Special"),
    ("TV_SHORT", "TV short"),
    ("MUSIC", "Music video"),
];

/// AniList's genres.
const GENRES: [&str; 18] = [
    "Action",
    "Adventure",
    "Comedy",
    "Drama",
    "Ecchi",
    "Fantasy",
    "Horror",
    "Mahou Shoujo",
    "Mecha",
    "Music",
    "Mystery",
    "Psychological",
    "Romance",
    "Sci-Fi",
    "Slice of Life",
    "Sports",
    "Supernatural",
    "Thriller",
];

/// The search as the URL states it: `/?q=…&format=TV&from=2000&to=2010&genre=Drama`, so a
/// search can be bookmarked and shared. Unknown or malformed values are ignored.
fn filters_from_query(query: &leptos_router::params::ParamsMap) -> Filters {
    let year = |key: &str| {
        query
            .get(key)
            .and_then(|v| v.trim().parse::<i32>().ok())
            .filter(|y| (1900..=2100).contains(y))
    };
    let known = |value: Option<String>, allowed: &[&str]| -> Vec<String> {
        value
            .filter(|v| allowed.contains(&v.as_str()))
            .into_iter()
            .collect()
    };
    Filters {
        formats: known(query.get("format"), &FORMATS.map(|(code, _)| code)),
        year_from: year("from"),
        year_to: year("to"),
        genres: known(query.get("genre"), &GENRES),
    }
}

/// The home page: a search box for a description of an anime, filters, and the results.
///
/// The form is a GET to `/`, so it works without JavaScript and the URL holds the search; the
/// route renders completely on the server before it is sent (`SsrMode::Async`).
#[component]
pub fn HomePage() -> impl IntoView {
    let query = use_query_map();
    let submitted = move || {
        query
            .read()
            .get("q")
            .map(|q| q.trim().to_string())
            .filter(|q| !q.is_empty())
    };
    let filters = move || filters_from_query(&query.read());
    let initial = submitted().unwrap_or_default();
    let initial_filters = filters();
    let (text, set_text) = signal(initial.clone());
    let results = Resource::new(
        move || (submitted(), filters()),
        |(q, filters)| async move {
            match q {
                Some(q) => Some(search(q, filters).await),
                None => None,
            }
        },
    );

    view! {
        <main class="home">
            <header class="brand">
                <h1><a href="/">"Zenbu"</a></h1>
                <p class="tagline">"Find an anime from a description, not a title."</p>
            </header>
            <Form method="GET" action="/" attr:class="search" attr:role="search">
                <label for="q">"Describe the anime you are looking for"</label>
                <div class="search-row">
                    <input
                        id="q"
                        name="q"
                        type="search"
                        autocomplete="off"
                        maxlength=MAX_QUERY_CHARS
                        placeholder="a quiet story about someone who travels alone and helps people"
                        // `value` for the server-rendered HTML (works without JavaScript),
                        // `prop:value` to follow the signal once hydrated.
                        value=initial
                        prop:value=text
                        on:input=move |ev| set_text.set(event_target_value(&ev))
                    />
                    <button type="submit">"Search"</button>
                </div>
                <details class="filters" open=!initial_filters.is_empty()>
                    <summary>"Filters"</summary>
                    <div class="filter-row">
                        <label>
                            "Format"
                            <select name="format">
                                <option value="">"Any"</option>
                                {FORMATS
                                    .into_iter()
                                    .map(|(code, label)| {
                                        let selected = initial_filters.formats.iter().any(|f| f == code);
                                        view! { <option value=code selected=selected>{label}</option> }
                                    })
                                    .collect_view()}
                            </select>
                        </label>
                        <label>
                            "From year"
                            <input name="from" type="number" min="1900" max="2100" inputmode="numeric"
                                value=initial_filters.year_from.map(|y| y.to_string()) />
                        </label>
                        <label>
                            "To year"
                            <input name="to" type="number" min="1900" max="2100" inputmode="numeric"
                                value=initial_filters.year_to.map(|y| y.to_string()) />
                        </label>
                        <label>
                            "Genre"
                            <select name="genre">
                                <option value="">"Any"</option>
                                {GENRES
                                    .into_iter()
                                    .map(|genre| {
                                        let selected = initial_filters.genres.iter().any(|g| g == genre);
                                        view! { <option value=genre selected=selected>{genre}</option> }
                                    })
                                    .collect_view()}
                            </select>
                        </label>
                    </div>
                </details>
            </Form>
            <Show when=move || submitted().is_none()>
                <section class="examples" aria-labelledby="examples-heading">
                    <h2 id="examples-heading">"Try one of these"</h2>
                    <ul>
                        {EXAMPLES
                            .into_iter()
                            .map(|example| {
                                view! {
                                    <li>
                                        <button
                                            type="button"
                                            class="example"
                                            on:click=move |_| set_text.set(example.to_string())
                                        >
                                            {example}
                                        </button>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                </section>
            </Show>
            <Suspense fallback=|| view! { <p class="notice" role="status">"Searching…"</p> }>
                {move || Suspend::new(async move {
                    match results.await {
                        None => ().into_any(),
                        Some(Ok(Ok(results))) => view! { <Results results /> }.into_any(),
                        Some(Ok(Err(Refusal::BadQuery(message)))) => {
                            // Rendered on the server, the page itself answers 400.
                            #[cfg(feature = "ssr")]
                            crate::api::backend::set_status(http::StatusCode::BAD_REQUEST);
                            view! { <p class="notice error" role="alert">{message}</p> }.into_any()
                        }
                        Some(Ok(Err(Refusal::QuotaExhausted(quota)))) => {
                            #[cfg(feature = "ssr")]
                            crate::api::backend::set_status(http::StatusCode::TOO_MANY_REQUESTS);
                            view! { <QuotaExhausted quota /> }.into_any()
                        }
                        Some(Ok(Err(Refusal::TooManyNewVisitors { per_day }))) => {
                            #[cfg(feature = "ssr")]
                            crate::api::backend::set_status(http::StatusCode::TOO_MANY_REQUESTS);
                            view! { <TooManyNewVisitors per_day /> }.into_any()
                        }
                        Some(Err(_)) => {
                            view! {
                                <p class="notice error" role="alert">
                                    "Search failed on our side. Please try again in a moment."
                                </p>
                            }
                                .into_any()
                        }
                    }
                })}
            </Suspense>
        </main>
    }
}

/// What a searcher is told when their allowance is used up: the limit, when it resets, and how
/// to get more.
#[component]
fn QuotaExhausted(quota: QuotaInfo) -> impl IntoView {
    let period = if quota.period == "year" {
        "this year"
    } else {
        "this month"
    };
    view! {
        <section class="notice error quota-exhausted" role="alert">
            <h2>"You have used all your searches"</h2>
            <p>
                {format!(
                    "You have used all {} text searches {period}. They come back on {}.",
                    quota.limit,
                    quota.resets_on,
                )}
            </p>
            <GetMore />
        </section>
    }
}

/// Where more searches come from.
#[component]
fn GetMore() -> impl IntoView {
    view! {
        <p>
            "For more, " <a href="/register">"create a free account"</a>
            " (30 searches a month) or go " <a href="/premium">"Premium"</a>
            " (200 a month). Browsing titles and “similar to” lists stays free."
        </p>
    }
}

/// A new anonymous visitor whose network has started too many visitors today.
#[component]
fn TooManyNewVisitors(per_day: i64) -> impl IntoView {
    view! {
        <section class="notice error quota-exhausted" role="alert">
            <h2>"Too many new visitors from your network"</h2>
            <p>
                {format!(
                    "Your network has started {per_day} new anonymous visitors in the last 24 hours,                      the most we allow (clearing cookies does not reset the allowance)."
                )}
            </p>
            <GetMore />
        </section>
    }
}

#[component]
fn Results(results: SearchResults) -> impl IntoView {
    let count = results.hits.len();
    let quota = results.quota.clone();
    view! {
        <section class="results" aria-labelledby="results-heading">
            <h2 id="results-heading">
                {if count == 0 {
                    "No anime matched".to_string()
                } else {
                    format!("Results for “{}”", results.query)
                }}
            </h2>
            {(!results.semantic)
                .then(|| {
                    view! {
                        <p class="notice" role="status">
                            "Results without semantic ranking: only word matches were used this time."
                        </p>
                    }
                })}
            {(results.ranking == Ranking::Fallback)
                .then(|| {
                    view! {
                        <p class="notice" role="status">
                            "Results in their first-pass order: the final ranking step did not answer in time."
                        </p>
                    }
                })}
            <ol class="hits">
                {results
                    .hits
                    .into_iter()
                    .map(|hit| {
                        let branch = match hit.branch {
                            Branch::Lexical => "lexical",
                            Branch::Vector => "vector",
                            Branch::Both => "both",
                        };
                        view! {
                            <li class="hit" data-branch=branch>
                                <Card card=hit.anime />
                                <span class=format!("badge badge-{branch}") title="Which search found it">
                                    {hit.branch.label()}
                                </span>
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
            <p class="timing">{format!("{count} results in {:.0} ms", results.took_ms)}</p>
            {quota
                .map(|quota| {
                    let period = if quota.period == "year" { "this year" } else { "this month" };
                    view! {
                        <p class="quota" role="status">
                            {format!(
                                "{} of {} searches left {period} (resets on {}).",
                                quota.remaining(),
                                quota.limit,
                                quota.resets_on,
                            )}
                        </p>
                    }
                })}
        </section>
    }
}

/// One anime: linked title, English title, year, format, genres, the start of its synopsis.
#[component]
fn Card(card: AnimeCard) -> impl IntoView {
    let facts: Vec<String> = [card.year.map(|y| y.to_string()), card.format.clone()]
        .into_iter()
        .flatten()
        .collect();
    view! {
        <article class="card">
            <h3><a href=format!("/anime/{}", card.id)>{card.title.clone()}</a></h3>
            {card.english_title.clone().map(|english| view! { <p class="english">{english}</p> })}
            <p class="facts">
                {facts.join(" · ")}
                {(!card.genres.is_empty()).then(|| format!(" — {}", card.genres.join(", ")))}
            </p>
            <p class="snippet">{card.snippet.clone()}</p>
        </article>
    }
}

/// `/anime/:id`: the facts of one anime, its franchise in order, and "similar to this".
#[component]
pub fn AnimePage() -> impl IntoView {
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
            <p class="back"><a href="/">"← Search"</a></p>
            <Suspense fallback=|| view! { <p role="status">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match details.await {
                        Ok(Some(details)) => view! { <AnimeView details /> }.into_any(),
                        Ok(None) => view! { <NotFound /> }.into_any(),
                        Err(_) => {
                            view! {
                                <p class="notice error" role="alert">
                                    "This page could not be loaded. Please try again in a moment."
                                </p>
                            }
                                .into_any()
                        }
                    }
                })}
            </Suspense>
        </main>
    }
}

#[component]
fn AnimeView(details: AnimeDetails) -> impl IntoView {
    let card = details.card;
    let title = card.title.clone();
    let facts: Vec<String> = [
        card.format.clone(),
        match (details.season.as_deref(), card.year) {
            (Some(season), Some(year)) => Some(format!("{} {year}", season.to_lowercase())),
            (None, Some(year)) => Some(year.to_string()),
            _ => None,
        },
        details.average_score.map(|s| format!("score {s}/100")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let current = card.id;
    view! {
        <Title text=format!("{title} — Zenbu") />
        <article class="anime-details">
            <h1>{title}</h1>
            {card.english_title.map(|english| view! { <p class="english">{english}</p> })}
            {details.native_title.map(|native| view! { <p class="native" lang="ja">{native}</p> })}
            <p class="facts">{facts.join(" · ")}</p>
            {(!card.genres.is_empty())
                .then(|| view! { <p class="genres">"Genres: " {card.genres.join(", ")}</p> })}
            {(!details.themes.is_empty())
                .then(|| view! { <p class="themes">"Themes: " {details.themes.join(", ")}</p> })}
            {(!details.synonyms.is_empty())
                .then(|| view! { <p class="synonyms">"Also known as: " {details.synonyms.join(" · ")}</p> })}
            <div class="description">
                {details
                    .description
                    .lines()
                    .map(|line| view! { <p>{line.to_string()}</p> })
                    .collect_view()}
            </div>
        </article>
        {(details.franchise.len() > 1)
            .then(|| {
                view! {
                    <section class="franchise" aria-labelledby="franchise-heading">
                        <h2 id="franchise-heading">"The franchise, in order"</h2>
                        <ol>
                            {details
                                .franchise
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
            })}
        <section class="similar" aria-labelledby="similar-heading">
            <h2 id="similar-heading">"Similar to this"</h2>
            {if details.similar.is_empty() {
                view! { <p>"Nothing similar found yet."</p> }.into_any()
            } else {
                view! {
                    <ol class="hits">
                        {details
                            .similar
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

/// Shown for any path no route matches; answers with HTTP 404.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    {
        use leptos_axum::ResponseOptions;
        if let Some(response) = use_context::<ResponseOptions>() {
            response.set_status(http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <main class="not-found">
            <h1>"Page not found"</h1>
            <p>"There is nothing at this address. " <a href="/">"Back to search"</a></p>
        </main>
    }
}
