//! Pages of the site, one component each.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// Longest description the search box accepts; the server enforces the same bound once search
/// exists, this only stops a browser from sending more.
pub const MAX_QUERY_CHARS: usize = 500;

/// Example descriptions a visitor can try with one click.
const EXAMPLES: [&str; 3] = [
    "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
    "a boy who can see ghosts joins a club at school",
    "piratas buscando un tesoro legendario",
];

/// The home page: a search box for a description of an anime.
///
/// The form is a plain GET to `/` so it works without JavaScript. Search itself is not built
/// yet: when a query arrives the page says so instead of showing invented results.
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
    let initial = submitted().unwrap_or_default();
    let (text, set_text) = signal(initial.clone());

    view! {
        <main class="home">
            <header class="brand">
                <h1>"Zenbu"</h1>
                <p class="tagline">"Find an anime from a description, not a title."</p>
            </header>
            <form class="search" method="get" action="/" role="search">
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
            </form>
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
            <Show when=move || submitted().is_some()>
                <p class="notice" role="status">
                    "Search is not available yet: the catalog and the search engine are still being built. You asked for: "
                    <q>{submitted}</q>
                </p>
            </Show>
        </main>
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
