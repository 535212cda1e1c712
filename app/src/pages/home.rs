//! `/`: a search box for a description of an anime, filters, the allowance, and the results.

use leptos::prelude::*;
use leptos_router::{components::Form, hooks::use_query_map};

use super::Card;
use crate::{
    api::{PageError, load_viewer, search},
    i18n::{Lang, use_lang},
    search::{
        Branch, FORMATS, FilterProblem, Filters, GENRES, MAX_QUERY_CHARS, QuotaInfo, Ranking,
        Refusal, SearchHit, SearchResults, YEARS,
    },
};

/// Example descriptions a visitor can try with one click, per language.
fn examples(lang: Lang) -> [&'static str; 3] {
    match lang {
        Lang::En => [
            "a quiet story about someone who travels alone and helps people",
            "a boy who can see ghosts joins a club at school",
            "pirates looking for a legendary treasure",
        ],
        Lang::Es => [
            "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
            "un chico que ve fantasmas se une a un club del instituto",
            "piratas buscando un tesoro legendario",
        ],
    }
}

/// The search as the URL states it: `/?q=…&format=TV&from=2000&to=2010&genre=Drama`, so a
/// search can be bookmarked and shared. An empty value means any (the form's first option); a
/// value the search cannot apply (a hand-edited link) is refused with the reason, not dropped:
/// dropped, the search would run, and be charged, without the filter the link asked for.
fn filters_from_query(query: &leptos_router::params::ParamsMap) -> Result<Filters, FilterProblem> {
    let given = |key: &str| {
        query
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let year = |key: &str| {
        given(key)
            .map(|v| v.parse::<i32>().map_err(|_| FilterProblem::BadYear(v)))
            .transpose()
    };
    let filters = Filters {
        formats: given("format").into_iter().collect(),
        year_from: year("from")?,
        year_to: year("to")?,
        genres: given("genre").into_iter().collect(),
    };
    match filters.problem() {
        Some(problem) => Err(problem),
        None => Ok(filters),
    }
}

/// The home page. The form is a GET to `/`, so it works without JavaScript and the URL holds
/// the search; the route renders completely on the server before it is sent
/// (`SsrMode::Async`). Once hydrated, the router submits the form without reloading the page,
/// "Searching…" shows while the search runs, and the allowance line updates in place.
#[component]
pub fn HomePage() -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
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
    let (text, set_text) = signal(initial.clone());
    let results = Resource::new(
        move || (submitted(), filters()),
        |(q, filters)| async move {
            match (q, filters) {
                (None, _) => None,
                (Some(_), Err(problem)) => {
                    Some(Err(PageError::Refused(Refusal::BadFilter(problem))))
                }
                (Some(q), Ok(filters)) => Some(search(q, filters).await),
            }
        },
    );
    let viewer = Resource::new(|| (), |_| load_viewer());

    view! {
        <main class="home">
            <header class="brand">
                <h1><a href="/">"Zenbu"</a></h1>
                <p class="tagline">{t.tagline}</p>
            </header>
            <SearchForm initial text set_text filters=filters().unwrap_or_default() />
            <Show when=move || submitted().is_none()>
                <Examples set_text />
                // Before any search: where the visitor stands.
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        viewer.await.ok().map(|viewer| view! { <QuotaCounter quota=viewer.quota /> })
                    })}
                </Suspense>
            </Show>
            <Suspense fallback=move || view! { <p class="notice" role="status" aria-live="polite">{t.searching}</p> }>
                {move || Suspend::new(async move {
                    match results.await {
                        None => ().into_any(),
                        Some(Ok(results)) => view! { <Results results /> }.into_any(),
                        Some(Err(PageError::Refused(refusal))) => view! { <RefusalNotice refusal /> }.into_any(),
                        Some(Err(error)) => super::errors::failure_view(&error, Some(t.search_failed)),
                    }
                })}
            </Suspense>
        </main>
    }
}

/// The description box and the filters, filled in from the URL (`initial`, `filters`); the box
/// follows `text` once hydrated, which the examples set.
#[component]
fn SearchForm(
    initial: String,
    text: ReadSignal<String>,
    set_text: WriteSignal<String>,
    filters: Filters,
) -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <Form method="GET" action="/" attr:class="search" attr:role="search">
            <label for="q">{t.search_label}</label>
            <div class="search-row">
                <input
                    id="q"
                    name="q"
                    type="search"
                    autocomplete="off"
                    maxlength=MAX_QUERY_CHARS
                    placeholder=t.search_placeholder
                    // `value` for the server-rendered HTML (works without JavaScript),
                    // `prop:value` to follow the signal once hydrated.
                    value=initial
                    prop:value=text
                    on:input=move |ev| set_text.set(event_target_value(&ev))
                />
                <button type="submit">{t.search_button}</button>
            </div>
            <FilterFields filters />
        </Form>
    }
}

/// Format, years and genre, open when the URL sets any of them.
#[component]
fn FilterFields(filters: Filters) -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    view! {
        <details class="filters" open=!filters.is_empty()>
            <summary>{t.filters}</summary>
            <div class="filter-row">
                <label>
                    {t.format}
                    <select name="format">
                        <option value="">{t.any}</option>
                        {FORMATS
                            .into_iter()
                            .map(|code| {
                                let selected = filters.formats.iter().any(|f| f == code);
                                view! { <option value=code selected=selected>{lang.format(code)}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    {t.from_year}
                    <input name="from" type="number" min=*YEARS.start() max=*YEARS.end() inputmode="numeric"
                        value=filters.year_from.map(|y| y.to_string()) />
                </label>
                <label>
                    {t.to_year}
                    <input name="to" type="number" min=*YEARS.start() max=*YEARS.end() inputmode="numeric"
                        value=filters.year_to.map(|y| y.to_string()) />
                </label>
                <label>
                    {t.genre}
                    <select name="genre">
                        <option value="">{t.any}</option>
                        {GENRES
                            .into_iter()
                            .map(|genre| {
                                let selected = filters.genres.iter().any(|g| g == genre);
                                view! { <option value=genre selected=selected>{lang.genre(genre)}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
            </div>
        </details>
    }
}

/// Example descriptions; a click puts one in the search box.
#[component]
fn Examples(set_text: WriteSignal<String>) -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    view! {
        <section class="examples" aria-labelledby="examples-heading">
            <h2 id="examples-heading">{t.try_these}</h2>
            <ul>
                {examples(lang)
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
    }
}

/// "7 of 10 searches left this year (resets on …)": shown before a search and under results,
/// so it changes in place as searches are made.
#[component]
fn QuotaCounter(quota: QuotaInfo) -> impl IntoView {
    let lang = use_lang();
    view! {
        <p class="quota" role="status" aria-live="polite">
            {lang.searches_left(quota.remaining(), quota.limit, &quota.period, &quota.resets_on)}
        </p>
    }
}

/// Why a search did not run; rendered on the server, the page answers 400 or 429.
#[component]
fn RefusalNotice(refusal: Refusal) -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    #[cfg(feature = "ssr")]
    crate::api::backend::set_status(match refusal {
        Refusal::EmptyQuery | Refusal::QueryTooLong { .. } | Refusal::BadFilter(_) => {
            http::StatusCode::BAD_REQUEST
        }
        Refusal::QuotaExhausted(_)
        | Refusal::TooManyNewVisitors { .. }
        | Refusal::TooManyFromNetwork { .. } => http::StatusCode::TOO_MANY_REQUESTS,
        Refusal::FromAnotherSite | Refusal::NotRequested => http::StatusCode::OK,
    });
    match refusal {
        Refusal::EmptyQuery => {
            view! { <p class="notice error" role="alert">{t.empty_query}</p> }.into_any()
        }
        Refusal::QueryTooLong { max } => {
            view! { <p class="notice error" role="alert">{lang.query_too_long(max)}</p> }.into_any()
        }
        Refusal::BadFilter(problem) => {
            view! { <p class="notice error" role="alert">{lang.bad_filter(&problem)}</p> }
                .into_any()
        }
        Refusal::FromAnotherSite => {
            view! { <p class="notice from-another-site" role="status">{t.from_another_site}</p> }
                .into_any()
        }
        Refusal::NotRequested => {
            view! { <p class="notice from-another-site" role="status">{t.not_requested}</p> }
                .into_any()
        }
        Refusal::QuotaExhausted(quota) => view! {
            <section class="notice error quota-exhausted" role="alert">
                <h2>{t.used_all}</h2>
                <p>{lang.quota_used_up(quota.limit, &quota.period, &quota.resets_on)}</p>
                <GetMore />
            </section>
        }
        .into_any(),
        Refusal::TooManyNewVisitors { per_day } => view! {
            <section class="notice error quota-exhausted" role="alert">
                <h2>{t.too_many_visitors}</h2>
                <p>{lang.too_many_new_visitors(per_day)}</p>
                <GetMore />
            </section>
        }
        .into_any(),
        Refusal::TooManyFromNetwork { per_day } => view! {
            <section class="notice error quota-exhausted" role="alert">
                <h2>{t.too_many_visitors}</h2>
                <p>{lang.too_many_network_searches(per_day)}</p>
                <GetMore />
            </section>
        }
        .into_any(),
    }
}

/// Where more searches come from.
#[component]
fn GetMore() -> impl IntoView {
    let t = use_lang().texts();
    view! {
        <p>
            {t.get_more_1} <a href="/register">{t.get_more_link_account}</a>
            {t.get_more_2} <a href="/premium">"Premium"</a> {t.get_more_3}
        </p>
    }
}

/// Where a result's closest passage stands against its card, which shows the synopsis's first
/// lines. The opening is the closest passage of many results; printed under the card as well,
/// the page said the same lines twice.
#[derive(Debug, PartialEq)]
enum PassageOnCard {
    /// The card shows all of it: marked there.
    Marked(String),
    /// It starts with what the card shows (marked there) and goes on past the card's cut.
    Continued { mark: String, rest: String },
    /// It is from further on: shown under the card.
    Apart(String),
}

impl PassageOnCard {
    fn read(snippet: &str, passage: &str) -> Self {
        let passage = passage.split_whitespace().collect::<Vec<_>>().join(" ");
        let shown = snippet.trim_end_matches('\u{2026}').trim_end();
        if shown.is_empty() {
            return Self::Apart(passage);
        }
        if shown.contains(passage.as_str()) {
            return Self::Marked(passage);
        }
        match passage.strip_prefix(shown) {
            // The card ends on a word, its trailing punctuation trimmed.
            Some(rest) => Self::Continued {
                mark: shown.to_string(),
                rest: rest
                    .trim_start_matches([',', ';', ':', '.'])
                    .trim_start()
                    .to_string(),
            },
            None => Self::Apart(passage),
        }
    }
}

#[component]
fn Results(results: SearchResults) -> impl IntoView {
    let lang = use_lang();
    let t = lang.texts();
    let count = results.hits.len();
    // The tab and a shared link name the search; the preview shows the first poster found.
    let title = format!("{} — Zenbu", lang.results_for(&results.query));
    let poster = results.hits.iter().find_map(|hit| hit.anime.cover.clone());
    let found: Vec<String> = results
        .hits
        .iter()
        .take(3)
        .map(|hit| hit.anime.title.clone())
        .collect();
    view! {
        <leptos_meta::Title text=title.clone() />
        <super::OpenGraph title description=found.join(" · ") image=poster />
        <section class="results" aria-labelledby="results-heading">
            <h2 id="results-heading">
                {if count == 0 { t.no_results.to_string() } else { lang.results_for(&results.query) }}
            </h2>
            {(!results.semantic)
                .then(|| view! { <p class="notice degraded" role="status">{t.lexical_only}</p> })}
            {(results.ranking == Ranking::Fallback)
                .then(|| view! { <p class="notice degraded" role="status">{t.fused_order}</p> })}
            {results.quota.map(|quota| view! { <QuotaCounter quota /> })}
            <ol class="hits">
                {results.hits.into_iter().map(|hit| view! { <Hit hit /> }).collect_view()}
            </ol>
            <p class="timing">{lang.results_timing(count, results.took_ms)}</p>
        </section>
    }
}

/// One result: its card, which search found it, and what matched.
#[component]
fn Hit(hit: SearchHit) -> impl IntoView {
    let t = use_lang().texts();
    let (branch, label) = match hit.branch {
        Branch::Lexical => ("lexical", t.branch_words),
        Branch::Vector => ("vector", t.branch_meaning),
        Branch::Both => ("both", t.branch_both),
        Branch::SameWork => ("same-work", t.branch_same_work),
    };
    // A part of a leading work is on the page for that reason, whatever else it matched.
    let why = match (hit.part_of, hit.matched_title, hit.matched_words.is_empty()) {
        (Some(work), _, _) => Some(format!("{} {work}", t.part_of)),
        (None, Some(title), _) => Some(format!("{} {title}", t.matched_title)),
        (None, None, false) => Some(format!(
            "{} {}",
            t.matched_words,
            hit.matched_words.join(", ")
        )),
        (None, None, true) => None,
    };
    let on_card = hit
        .matched_passage
        .as_deref()
        .map(|passage| PassageOnCard::read(&hit.anime.snippet, passage));
    let (mark, passage) = match on_card {
        Some(PassageOnCard::Marked(mark)) => {
            (Some(mark), Some(t.matched_passage_marked.to_string()))
        }
        Some(PassageOnCard::Continued { mark, rest }) => (
            Some(mark),
            Some(format!(
                "{} \u{201c}\u{2026}{rest}\u{201d}",
                t.matched_passage
            )),
        ),
        Some(PassageOnCard::Apart(passage)) => (
            None,
            Some(format!("{} \u{201c}{passage}\u{201d}", t.matched_passage)),
        ),
        None => (None, None),
    };
    view! {
        <li class="hit" data-branch=branch>
            <Card card=hit.anime mark />
            <span class=format!("badge badge-{branch}") title=t.branch_hint>{label}</span>
            {why.map(|why| view! { <p class="why">{why}</p> })}
            {passage.map(|passage| view! { <p class="why why-passage">{passage}</p> })}
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::{PassageOnCard, filters_from_query};
    use crate::search::{FilterProblem, Filters};

    fn filters(pairs: &[(&'static str, &str)]) -> Result<Filters, FilterProblem> {
        filters_from_query(&pairs.iter().map(|&(k, v)| (k, v.to_string())).collect())
    }

    #[test]
    fn a_link_with_a_filter_the_search_cannot_apply_is_refused_not_dropped() {
        assert_eq!(
            filters(&[
                ("q", "piratas"),
                ("format", "MOVIE"),
                ("from", " 1990 "),
                ("genre", "")
            ]),
            Ok(Filters {
                formats: vec!["MOVIE".into()],
                year_from: Some(1990),
                ..Filters::default()
            })
        );
        // The form's "any" sends empty values.
        assert_eq!(
            filters(&[("format", ""), ("from", ""), ("to", "")]),
            Ok(Filters::default())
        );
        assert_eq!(
            filters(&[("format", "MOVIES")]),
            Err(FilterProblem::UnknownFormat("MOVIES".into()))
        );
        assert_eq!(
            filters(&[("genre", "drama")]),
            Err(FilterProblem::UnknownGenre("drama".into()))
        );
        assert_eq!(
            filters(&[("from", "199O")]),
            Err(FilterProblem::BadYear("199O".into()))
        );
        assert_eq!(
            filters(&[("to", "20000")]),
            Err(FilterProblem::BadYear("20000".into()))
        );
        assert_eq!(
            filters(&[("from", "2020"), ("to", "1990")]),
            Err(FilterProblem::YearsReversed {
                from: 2020,
                to: 1990
            })
        );
        assert_eq!(
            filters(&[("from", "2000"), ("to", "2000")]).map(|f| (f.year_from, f.year_to)),
            Ok((Some(2000), Some(2000)))
        );
    }

    const CARD: &str = "Ginko travels the mountain villages of an old, misty Japan, tending to \
        people afflicted by mushi: faint, primal organisms. Each quiet episode is a \
        self-contained\u{2026}";

    #[test]
    fn the_opening_passage_is_marked_on_the_card_and_only_its_rest_shown() {
        let passage = "Ginko travels the mountain villages of an old, misty Japan, tending to \
            people afflicted by mushi: faint, primal organisms.   Each quiet episode is a \
            self-contained folk tale.";
        assert_eq!(
            PassageOnCard::read(CARD, passage),
            PassageOnCard::Continued {
                mark: CARD.trim_end_matches('\u{2026}').to_string(),
                rest: "folk tale.".to_string()
            }
        );
    }

    #[test]
    fn a_passage_inside_the_card_is_marked_there() {
        assert_eq!(
            PassageOnCard::read(CARD, "tending to people afflicted by mushi"),
            PassageOnCard::Marked("tending to people afflicted by mushi".to_string())
        );
        assert_eq!(
            PassageOnCard::read("A quiet story.", "A quiet story."),
            PassageOnCard::Marked("A quiet story.".to_string())
        );
    }

    #[test]
    fn a_passage_from_further_on_is_shown_apart() {
        assert_eq!(
            PassageOnCard::read(CARD, "He smokes."),
            PassageOnCard::Apart("He smokes.".to_string())
        );
        assert_eq!(
            PassageOnCard::read("", "He smokes."),
            PassageOnCard::Apart("He smokes.".to_string())
        );
    }
}
