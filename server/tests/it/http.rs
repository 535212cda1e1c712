//! The HTTP app against a real PostgreSQL: each test gets its own database from `sqlx::test`.

use crate::common;

use server::accounts::visitor::COOKIE;
use sqlx::PgPool;

#[sqlx::test(migrations = "../migrations")]
async fn healthz_reports_postgres_and_pgvector_versions(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    assert!(
        body["postgres"].as_str().unwrap().starts_with("18."),
        "{body}"
    );
    assert!(
        body["pgvector"].as_str().unwrap().starts_with("0.8."),
        "{body}"
    );
    assert!(
        body.get("replica").is_none(),
        "no replica configured: {body}"
    );
}

/// Pages rendering while another app is being built, on another thread, still load their data.
/// Building an app's router generates its route list, which suppresses every resource load in
/// the process while it runs (a flag of Leptos' that is global to the process); generated once
/// per process, it cannot catch a page halfway. Generated per router, as before, this test's
/// pages hung on their viewer resource (the same hang the account tests hit about once in ten
/// runs, in whichever test rendered a page while another started its app).
#[sqlx::test(migrations = "../migrations")]
async fn pages_load_their_data_while_another_app_is_built(pool: PgPool) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let app = common::spawn_app(pool.clone()).await;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let built = std::sync::Arc::new(AtomicUsize::new(0));
    let builder = {
        let (stop, built) = (stop.clone(), built.clone());
        let options = (*pool.connect_options()).clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async move {
                    // Its own pool: connections belong to the runtime that opened them.
                    let pool = sqlx::postgres::PgPoolOptions::new()
                        .max_connections(2)
                        .connect_lazy_with(options);
                    let engine =
                        server::search::SearchEngine::new(pool.clone(), common::local_embedder());
                    while !stop.load(Ordering::Relaxed) {
                        drop(common::build_app_on(pool.clone(), engine.clone(), |_| {}).await);
                        built.fetch_add(1, Ordering::Relaxed);
                    }
                })
        })
    };
    let client = reqwest::Client::new();
    for round in 0..40 {
        let page = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let response = client.get(app.url("/login")).send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        })
        .await
        .unwrap_or_else(|_| panic!("GET /login #{round} hung while apps were being built"));
        assert!(page.contains(r#"name="csrf""#), "round {round}: {page}");
    }
    stop.store(true, Ordering::Relaxed);
    builder.join().unwrap();
    assert!(
        built.load(Ordering::Relaxed) >= 5,
        "only {} apps were built beside the pages",
        built.load(Ordering::Relaxed)
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn healthz_is_503_when_the_database_is_gone(pool: PgPool) {
    let addr = common::spawn_app(pool.clone()).await.addr;
    pool.close().await;
    let response = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"], "the database is unavailable");
}

#[sqlx::test(migrations = "../migrations")]
async fn home_page_is_server_rendered_with_the_hydration_script(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let response = reqwest::get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(
        html.contains(r#"<form"#) && html.contains(r#"role="search""#),
        "{html}"
    );
    assert!(html.contains(r#"name="q""#));
    assert!(html.contains("/pkg/zenbu.js"), "hydration script missing");
    assert!(html.contains("/pkg/zenbu.css"));
    assert!(html.contains("Try one of these"));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_search_page_is_complete_without_javascript(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let response = reqwest::get(format!("http://{addr}/?q=mushi%20shi&format=TV"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    // Results are in the HTML itself (the route renders fully before it is sent).
    assert!(
        html.contains(r#"<a href="/anime/457">Mushishi</a>"#),
        "{html}"
    );
    assert!(html.contains("words + meaning"), "branch badge missing");
    assert!(
        !html.contains("Searching…"),
        "a loading placeholder was sent instead"
    );
    // The search box and the filter keep what was searched.
    assert!(html.contains(r#"value="mushi shi""#), "{html}");
    assert!(html.contains(r#"<option value="TV" selected"#), "{html}");
}

/// A result placed as part of a leading work says whose part it is, in the page's language
/// (`search::parts`; on the demo catalog Kino's description has *Odd Taxi* third and its film
/// after the first ten).
#[sqlx::test(migrations = "../migrations")]
async fn a_part_of_a_leading_work_says_so_on_the_page(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let query = "una viajera que va en una moto que habla y nunca se queda mas de tres dias en cada pais, cada capitulo un pais distinto con costumbres raras";
    for (language, words) in [("en", "Part of Odd Taxi"), ("es", "Parte de Odd Taxi")] {
        let html = search_page(addr, query, language).await;
        assert!(html.contains(words), "{language}: {html}");
    }
}

/// The search page for `query`, rendered on the server in `language`.
async fn search_page(addr: std::net::SocketAddr, query: &str, language: &str) -> String {
    reqwest::Client::new()
        .get(format!("http://{addr}/"))
        .query(&[("q", query)])
        .header("accept-language", language)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A result whose closest passage is the opening its card already shows has that opening marked
/// on the card, and under it only what the card cut off: the page used to print the same lines
/// twice (Mushishi's, for the brief's example, on the demo catalog).
#[sqlx::test(migrations = "../migrations")]
async fn the_closest_passage_is_marked_on_the_card_not_printed_twice(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let query = "algo tranquilo, de alguien que viaja solo y ayuda a la gente";
    let api: serde_json::Value = reqwest::Client::new()
        .get(format!("http://{addr}/api/search"))
        .query(&[("q", query)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mushishi = api["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|hit| hit["anime"]["title"] == "Mushishi")
        .unwrap_or_else(|| panic!("{api}"));
    let snippet = mushishi["anime"]["snippet"].as_str().unwrap();
    let shown = snippet.trim_end_matches('\u{2026}');
    let passage = mushishi["matched_passage"].as_str().unwrap();
    assert!(passage.starts_with(shown), "{passage:?} / {snippet:?}");
    for (language, label) in [("en", "Closest passage:"), ("es", "Pasaje más cercano:")] {
        let html = search_page(addr, query, language).await;
        // Mushishi's result as the page shows it (the results travel once more as data, for
        // hydration, and its franchise's sequels may quote the same premise).
        let list = html.split_once("<a href=\"/anime/457\">").unwrap().1;
        let list = list.split_once("</li>").unwrap().0;
        assert!(
            list.contains(&format!("<mark>{shown}</mark>")),
            "{language}: {list}"
        );
        assert_eq!(list.matches(shown).count(), 1, "{language}: {list}");
        let rest = passage[shown.len()..].trim_start();
        assert!(
            list.contains(&format!("{label} \u{201c}\u{2026}{rest}\u{201d}")),
            "{language}: {list}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_too_long_query_is_refused_with_a_clear_message(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let long = "a".repeat(app::search::MAX_QUERY_CHARS + 1);
    let page = reqwest::get(format!("http://{addr}/?q={long}"))
        .await
        .unwrap();
    assert_eq!(page.status(), 400);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("The description is too long: at most 1000 characters.")
    );
    let api = reqwest::get(format!("http://{addr}/api/search?q={long}"))
        .await
        .unwrap();
    assert_eq!(api.status(), 400);
    let body: serde_json::Value = api.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("limited to 1000"),
        "{body}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn the_search_api_answers_json_with_branches_and_filters(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let body: serde_json::Value = reqwest::get(format!(
        "http://{addr}/api/search?q=piratas%20buscando%20un%20tesoro&format=MOVIE"
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let hits = body["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{body}");
    for hit in hits {
        assert_eq!(hit["anime"]["format"], "Movie", "{hit}");
        assert!(["Lexical", "Vector", "Both"].contains(&hit["branch"].as_str().unwrap()));
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn an_anime_page_shows_its_franchise_and_similar_titles(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let response = reqwest::get(format!("http://{addr}/anime/457"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(html.contains("<h1>Mushishi</h1>"), "{html}");
    assert!(html.contains("The franchise, in order"));
    assert!(html.contains("Similar to this"));
    let similar = html.split("Similar to this").nth(1).unwrap();
    assert!(
        similar.matches("<article class=\"card\">").count() >= 5,
        "{similar}"
    );
    assert!(
        !similar.contains(r#"href="/anime/457""#),
        "the anime itself is not similar to itself"
    );

    let missing = reqwest::get(format!("http://{addr}/anime/99999999"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let api = reqwest::get(format!("http://{addr}/api/anime/99999999/similar"))
        .await
        .unwrap();
    assert_eq!(api.status(), 404);
    let similar: Vec<serde_json::Value> =
        reqwest::get(format!("http://{addr}/api/anime/457/similar"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(similar.len(), server::search::SIMILAR_COUNT);
}

#[sqlx::test(migrations = "../migrations")]
async fn unknown_paths_are_404_pages(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let response = reqwest::get(format!("http://{addr}/no/such/page"))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("Page not found"));
}

#[sqlx::test(migrations = "../migrations")]
async fn visitors_get_a_signed_cookie_once_and_forged_ones_are_replaced(pool: PgPool) {
    let addr = common::spawn_app(pool).await.addr;
    let client = reqwest::Client::new();
    let visitor_cookie = |response: &reqwest::Response| {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with(&format!("{COOKIE}=")))
            .map(|v| v.split(';').next().unwrap().to_string())
    };
    let first = client.get(format!("http://{addr}/")).send().await.unwrap();
    let cookie = visitor_cookie(&first).expect("a new visitor gets a cookie");
    let full = first
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        full.contains("HttpOnly") && full.contains("SameSite=Lax"),
        "{full}"
    );

    // Coming back with it: no new cookie.
    let back = client
        .get(format!("http://{addr}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(visitor_cookie(&back), None);

    // A forged or unsigned id is ignored and replaced with a new signed one.
    for forged in [
        format!("{COOKIE}=0123456789abcdef0123456789abcdef"),
        cookie.replacen('=', "=x", 1),
    ] {
        let response = client
            .get(format!("http://{addr}/"))
            .header("cookie", &forged)
            .send()
            .await
            .unwrap();
        let replaced = visitor_cookie(&response).expect("a forged cookie is replaced");
        assert_ne!(replaced, forged);
        assert_ne!(replaced, cookie);
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn a_visitor_gets_ten_searches_a_year_and_the_eleventh_is_refused(pool: PgPool) {
    let year: i32 = sqlx::query_scalar("SELECT extract(year FROM now() AT TIME ZONE 'UTC')::int")
        .fetch_one(&pool)
        .await
        .unwrap();
    let addr = common::spawn_app(pool).await.addr;
    let client = reqwest::Client::new();
    let first = client.get(format!("http://{addr}/")).send().await.unwrap();
    let cookie = first
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let search = |q: String| {
        let client = client.clone();
        let cookie = cookie.clone();
        async move {
            client
                .get(format!("http://{addr}/api/search"))
                .query(&[("q", q)])
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
        }
    };
    // A query that cannot run costs nothing.
    assert_eq!(search("x".repeat(2_000)).await.status(), 400);
    for i in 1..=10 {
        let response = search(format!("pirates number {i}")).await;
        assert_eq!(response.status(), 200, "search {i}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["quota"]["used"], i, "{body}");
        assert_eq!(body["quota"]["limit"], 10);
    }
    // The same query again within three minutes is free.
    let repeat = search("Pirates  NUMBER 10".to_string()).await;
    assert_eq!(repeat.status(), 200);
    // The eleventh distinct search is refused, as JSON and as a page, with the reset date.
    let refused = search("pirates number 11".to_string()).await;
    assert_eq!(refused.status(), 429);
    let next_year = format!("{}-01-01", year + 1);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains(&next_year),
        "{body}"
    );
    let page = client
        .get(format!("http://{addr}/?q=pirates+number+12"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 429);
    let html = page.text().await.unwrap();
    assert!(html.contains("You have used all your searches"), "{html}");
    assert!(
        html.contains(&format!("They come back on {next_year}")),
        "{html}"
    );
    // Another visitor (no cookie) still has all ten.
    let fresh = client
        .get(format!("http://{addr}/api/search"))
        .query(&[("q", "pirates number 11")])
        .send()
        .await
        .unwrap();
    assert_eq!(fresh.status(), 200);
}

#[sqlx::test(migrations = "../migrations")]
async fn pages_speak_the_browsers_language_and_the_switch_sticks(pool: PgPool) {
    let app = common::spawn_app(pool).await;
    let client = common::client_without_redirects();
    let page = |accept: &'static str, cookie: Option<&'static str>| {
        let mut request = client.get(app.url("/")).header("accept-language", accept);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let spanish = page("es-ES,es;q=0.9,en;q=0.5", None).await;
    assert!(spanish.contains(r#"<html lang="es""#), "{spanish}");
    assert!(spanish.contains("Describe el anime que buscas"));
    let english = page("en-GB", None).await;
    assert!(english.contains(r#"<html lang="en""#));
    assert!(english.contains("Describe the anime you are looking for"));
    // Repeated header lines are one list.
    let two_lines = client
        .get(app.url("/"))
        .header("accept-language", "fr-FR")
        .header("accept-language", "es;q=0.9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(two_lines.contains(r#"<html lang="es""#));
    // The cookie wins over the header.
    let chosen = page("es", Some("zenbu_lang=en")).await;
    assert!(chosen.contains("Describe the anime you are looking for"));

    // The switch sets it and goes back to the page, never to another site.
    let switched = client
        .get(app.url("/lang?to=es&back=%2F%3Fq%3Dmushishi"))
        .send()
        .await
        .unwrap();
    assert_eq!(switched.status(), 303);
    assert_eq!(switched.headers()["location"], "/?q=mushishi");
    let cookie = switched.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("zenbu_lang=es;") && cookie.contains("Max-Age="),
        "{cookie}"
    );
    let away = client
        .get(app.url("/lang?to=en&back=https://evil.example"))
        .send()
        .await
        .unwrap();
    assert_eq!(away.headers()["location"], "/");
    let unknown = client.get(app.url("/lang?to=fr")).send().await.unwrap();
    assert_eq!(unknown.status(), 400);
}

#[sqlx::test(migrations = "../migrations")]
async fn pages_answer_503_with_a_clear_page_while_the_database_is_gone(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    pool.close().await;
    for path in ["/?q=mushishi", "/anime/457", "/account"] {
        let started = std::time::Instant::now();
        let response = reqwest::get(app.url(path)).await.unwrap();
        assert_eq!(response.status(), 503, "{path}");
        let html = response.text().await.unwrap();
        assert!(
            html.contains("Zenbu is briefly unavailable"),
            "{path}: {html}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "fails fast"
        );
    }
    let api = reqwest::get(app.url("/api/search?q=mushishi"))
        .await
        .unwrap();
    assert_eq!(api.status(), 503);
}

#[sqlx::test(migrations = "../migrations")]
async fn every_response_carries_security_headers_and_a_request_id(pool: PgPool) {
    let app = common::spawn_app(pool).await;
    let page = reqwest::get(app.url("/?q=mushishi")).await.unwrap();
    let headers = page.headers().clone();
    let html = page.text().await.unwrap();
    let policy = headers["content-security-policy"].to_str().unwrap();
    // The page's policy allows its own hydration script by nonce, and nothing inline else.
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce in the policy");
    assert!(html.contains(&format!(r#"nonce="{nonce}""#)), "{html}");
    assert!(policy.contains("frame-ancestors 'none'") && !policy.contains("unsafe-inline"));
    for response_headers in [
        headers,
        reqwest::get(app.url("/api/search?q=x"))
            .await
            .unwrap()
            .headers()
            .clone(),
        reqwest::get(app.url("/healthz"))
            .await
            .unwrap()
            .headers()
            .clone(),
    ] {
        assert_eq!(response_headers["x-content-type-options"], "nosniff");
        assert_eq!(response_headers["x-frame-options"], "DENY");
        assert_eq!(
            response_headers["referrer-policy"],
            "strict-origin-when-cross-origin"
        );
        assert!(response_headers.contains_key("content-security-policy"));
        assert_eq!(response_headers["x-request-id"].len(), 36, "a UUID");
    }
    // A proxy's request id is kept.
    let response = reqwest::Client::new()
        .get(app.url("/healthz"))
        .header("x-request-id", "from-the-proxy-1")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "from-the-proxy-1");
}

/// Pages holding a form token or an address are kept by no cache (`no-store`); other pages are
/// the visitor's own (`private`); over https, HSTS and `__Host-` cookies.
#[sqlx::test(migrations = "../migrations")]
async fn pages_say_who_may_keep_them_and_https_gets_hsts_and_host_cookies(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let cache_control = |response: &reqwest::Response| {
        response
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_string())
    };
    let home = reqwest::get(app.url("/?q=mushishi")).await.unwrap();
    assert_eq!(cache_control(&home).as_deref(), Some("private, no-cache"));
    assert!(
        !home.headers().contains_key("strict-transport-security"),
        "not over http"
    );
    for form in ["/login", "/register", "/password/forgot", "/account"] {
        let page = reqwest::get(app.url(form)).await.unwrap();
        assert_eq!(
            cache_control(&page).as_deref(),
            Some("private, no-store"),
            "{form}"
        );
    }
    // Signed in, every page shows the address and a log-out form.
    common::insert_user(&pool, "kept@example.com", "a long enough password").await;
    let browser = common::Browser::new(&app);
    let csrf = browser.csrf().await;
    browser
        .post(
            "/login",
            &[
                ("email", "kept@example.com"),
                ("password", "a long enough password"),
                ("csrf", &csrf),
            ],
        )
        .await;
    let signed_in = browser.get("/").await;
    assert_eq!(
        cache_control(&signed_in).as_deref(),
        Some("private, no-store")
    );
    assert!(signed_in.text().await.unwrap().contains("kept@example.com"));

    let https = common::spawn_app_with(pool.clone(), |config| {
        config.public_url = Some("https://zenbu.example".into())
    })
    .await;
    let page = reqwest::get(https.url("/")).await.unwrap();
    assert_eq!(
        page.headers()["strict-transport-security"],
        "max-age=31536000"
    );
    let cookies: Vec<String> = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert!(
        cookies
            .iter()
            .any(|c| c.starts_with("__Host-zenbu_visitor=")
                && c.contains("Secure")
                && c.contains("Path=/")
                && !c.contains("Domain")),
        "{cookies:?}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn oversized_bodies_and_hostile_queries_get_clear_answers(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let client = reqwest::Client::new();
    // A form far beyond any real one: refused before it is read.
    let huge = "x".repeat(100 * 1024);
    let response = client
        .post(app.url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("email={huge}&password=x&csrf=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    // Invalid UTF-8 in a form (percent-encoded or raw): decoded with replacement characters,
    // so the form is answered like any wrong one (here: no valid token), never a 5xx.
    let no_redirects = common::client_without_redirects();
    for body in [
        b"email=%FF%FE&password=x&csrf=x".to_vec(),
        b"email=\xff\xfe&password=\xc3&csrf=x".to_vec(),
    ] {
        let response = no_redirects
            .post(app.url("/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        assert_eq!(response.headers()["location"], "/login?error=form");
    }
    // A 10,000-character query: 400 with the limit, as JSON and as a page.
    let long = "palabra ".repeat(1_250);
    let api = client
        .get(app.url("/api/search"))
        .query(&[("q", long.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 400);
    // Filters the search cannot apply: formats and genres outside AniList's (a NUL once reached
    // PostgreSQL this way and answered 500), years out of range or backwards. 400 with the
    // reason, as JSON and as a page (a hand-edited link once ran, and was charged, without the
    // filter), and nothing is counted.
    let bad_filters: [(&[(&str, &str)], &str); 6] = [
        (&[("genre", "Drama\u{0}")], "unknown genre"),
        (&[("format", "BOGUS")], "unknown format \"BOGUS\""),
        (&[("genre", "x")], "unknown genre \"x\""),
        (
            &[("from", "2020"), ("to", "1990")],
            "the years run backwards",
        ),
        (
            &[("from", "1800")],
            "the year \"1800\" is not one from 1900 to 2100",
        ),
        (&[("to", "99999")], "is not one from"),
    ];
    for (filters, reason) in bad_filters {
        let params = [&[("q", "piratas")], filters].concat();
        let response = client
            .get(app.url("/api/search"))
            .query(&params)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{filters:?}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains(reason), "{body}");
    }
    for (filters, says) in [
        (&[("format", "MOVIES")][..], "(“MOVIES”)"),
        (&[("genre", "drama")], "(“drama”)"),
        (
            &[("from", "199O")],
            "“199O” is not a year from 1900 to 2100",
        ),
        (&[("from", "2020"), ("to", "1990")], "from 2020 to 1990"),
    ] {
        let params = [&[("q", "pirates looking for treasure")], filters].concat();
        let page = client
            .get(app.url("/"))
            .header("accept-language", "en")
            .query(&params)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 400, "{filters:?}");
        let html = page.text().await.unwrap();
        assert!(html.contains(says), "{filters:?}: {html}");
        assert!(html.contains("The search did not run"), "{html}");
    }
    let counted: i64 = sqlx::query_scalar("SELECT count(*) FROM search_usage")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(counted, 0);
    // Control characters and tsquery operators are plain text to the search.
    for q in ["a\u{0}b\u{7}c", "!(&|<->):* 'x' & y", "\u{202e}evil", "   "] {
        let response = client
            .get(app.url("/api/search"))
            .query(&[("q", q)])
            .send()
            .await
            .unwrap();
        assert!(
            response.status() == 200 || response.status() == 400,
            "{q:?}: {}",
            response.status()
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn metrics_count_stages_cache_hits_fallbacks_and_refusals(pool: PgPool) {
    let app = common::spawn_app(pool).await;
    let client = reqwest::Client::new();
    // One visitor: a search, the same again (a cache hit), then refused after ten.
    let first = client
        .get(app.url("/api/search?q=mushishi"))
        .send()
        .await
        .unwrap();
    let cookie = first.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    for i in 0..11 {
        let q = if i == 0 {
            "mushishi".to_string()
        } else {
            format!("story {i}")
        };
        client
            .get(app.url("/api/search"))
            .query(&[("q", q.as_str())])
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
    }
    let metrics = client.get(app.url("/metrics")).send().await.unwrap();
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.text().await.unwrap();
    for expected in [
        r#"zenbu_search_stage_seconds_bucket{stage="translate""#,
        r#"zenbu_search_stage_seconds_bucket{stage="lexical""#,
        r#"zenbu_search_stage_seconds_bucket{stage="total""#,
        r#"zenbu_search_stage_seconds_count{stage="cache_hit"}"#,
        r#"zenbu_search_cache_total{result="hit"}"#,
        r#"zenbu_search_cache_total{result="miss"}"#,
        r#"zenbu_quota_refusals_total{reason="exhausted"}"#,
    ] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn metrics_ask_for_the_token_when_one_is_set(pool: PgPool) {
    let app = common::spawn_app_with(pool, |config| {
        config.http.metrics_token = Some("scrape-me".into());
    })
    .await;
    let client = reqwest::Client::new();
    let search = client.get(app.url("/api/search?q=mushishi")).send().await;
    assert_eq!(search.unwrap().status(), 200);
    for authorization in [None, Some("Bearer wrong"), Some("scrape-me")] {
        let mut request = client.get(app.url("/metrics"));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{authorization:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    let response = client
        .get(app.url("/metrics"))
        .header("authorization", "Bearer scrape-me")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("zenbu_search_stage_seconds")
    );
}

/// The Spanish interface shows Apertium's translation of the synopsis (made at ingest), said to
/// be one, with AniList's original behind a <details>; the English interface shows the original
/// only. "Also known as" shows three names and the rest behind "more".
#[sqlx::test(migrations = "../migrations")]
async fn the_spanish_interface_shows_the_synopsis_in_spanish_with_the_original_a_click_away(
    pool: PgPool,
) {
    let app = common::spawn_app(pool.clone()).await;
    let page = |lang: &'static str, id: i32| {
        let url = app.url(&format!("/anime/{id}"));
        async move {
            reqwest::Client::new()
                .get(url)
                .header("accept-language", lang)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let spanish = page("es", 457).await;
    let translated = spanish
        .split(r#"<div lang="es" class="description">"#)
        .nth(1)
        .expect("a Spanish synopsis");
    let translated = translated.split("</div>").next().unwrap();
    assert!(
        translated.contains(" que ") || translated.contains(" de "),
        "{translated}"
    );
    assert!(spanish.contains("Traducción automática del inglés."));
    let original = spanish
        .split(r#"<details class="original-synopsis">"#)
        .nth(1)
        .expect("the original behind a details");
    assert!(
        original.contains(r#"lang="en""#) && original.contains("Ginko"),
        "{original}"
    );

    let english = page("en", 457).await;
    assert!(
        !english.contains("machine-translated")
            && !english.contains(r#"<div lang="es" class="description">"#)
    );
    assert!(english.contains(r#"<div lang="en" class="description">"#));

    // Astro Boy (1963) has ten other names: three shown, seven behind "more".
    let names = page("en", 2747).await;
    let synonyms = names
        .split(r#"<div class="synonyms">"#)
        .nth(1)
        .unwrap()
        .split("</div>")
        .next()
        .unwrap()
        .to_string();
    assert!(
        synonyms.contains("<summary>more (7)</summary>"),
        "{synonyms}"
    );
    let (shown, _) = synonyms.split_once("<details").unwrap();
    assert_eq!(shown.matches(" · ").count(), 2, "{shown}");
}
