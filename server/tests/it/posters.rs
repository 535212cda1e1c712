//! Posters: cards and the proxy route `/img/anime/{id}/cover` against the fake AniList's image
//! host — present, missing, the upstream failing, a host not allowed.

use fakes::anilist::{FakeAniList, FakeAniListConfig};
use sqlx::PgPool;

use crate::common::{self, Browser};

const MUSHISHI: i32 = 457;

async fn image_host() -> FakeAniList {
    let mut config = FakeAniListConfig::new(Vec::<serde_json::Value>::new());
    config.posters = true;
    FakeAniList::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Gives anime `id` AniList's `coverImage` with `url` and `color`.
async fn set_cover(pool: &PgPool, id: i32, url: &str, color: &str) {
    sqlx::query(
        "UPDATE anime SET raw = raw || jsonb_build_object('coverImage',
             jsonb_build_object('large', $2::text, 'extraLarge', $2::text, 'color', $3::text))
          WHERE id = $1",
    )
    .bind(id)
    .bind(url)
    .bind(color)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrations = "../migrations")]
async fn posters_are_served_from_this_site_and_never_break_a_page(pool: PgPool) {
    let host = image_host().await;
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.http.image_hosts = vec![host.addr.to_string()];
    })
    .await;
    set_cover(
        &pool,
        MUSHISHI,
        &host.poster_url("large", MUSHISHI.into()),
        "#E4A15D",
    )
    .await;
    let browser = Browser::new(&app);

    // The card: the poster through this site, its size fixed, its colour behind it.
    let html = browser.page("/?q=mushishi").await;
    let card = html
        .split(r#"<article class="card">"#)
        .find(|card| card.contains(&format!("/anime/{MUSHISHI}\"")))
        .expect("Mushishi's card");
    assert!(
        card.contains(&format!(r#"src="/img/anime/{MUSHISHI}/cover""#)),
        "{card}"
    );
    for attribute in [
        r#"loading="lazy""#,
        r#"width="92""#,
        r#"height="130""#,
        r#"alt="Mushishi""#,
        r##"fill="#e4a15d""##,
    ] {
        assert!(card.contains(attribute), "{attribute}: {card}");
    }
    assert!(
        !html.contains(&host.addr.to_string()),
        "no visitor is sent to the image host"
    );
    // Cards without a poster: the colour block with initials, never an image.
    let other = html
        .split(r#"<article class="card">"#)
        .skip(1)
        .find(|card| !card.contains(&format!("/anime/{MUSHISHI}\"")))
        .expect("another card");
    assert!(
        other.contains("poster-missing") && !other.contains("<img"),
        "{other}"
    );

    // The tab and a shared link name the search; the preview is the first poster, absolute.
    assert!(
        html.contains("<title>Results for “mushishi” — Zenbu</title>"),
        "{html}"
    );
    let og_image = format!(
        r#"<meta property="og:image" content="{}">"#,
        app.url(&format!("/img/anime/{MUSHISHI}/cover"))
    );
    assert!(html.contains(&og_image), "{og_image}");
    let page = browser.page(&format!("/anime/{MUSHISHI}")).await;
    assert!(
        page.contains(r#"<meta property="og:title" content="Mushishi">"#),
        "{page}"
    );
    assert!(page.contains(&og_image));

    // The poster itself, fetched once, then from the disk cache.
    let poster = browser.get(&format!("/img/anime/{MUSHISHI}/cover")).await;
    assert_eq!(poster.status(), 200);
    assert_eq!(poster.headers()["content-type"], "image/png");
    assert!(
        poster.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("max-age=86400")
    );
    let bytes = poster.bytes().await.unwrap();
    assert!(bytes.starts_with(b"\x89PNG"));
    host.fail_images(true);
    let again = browser.get(&format!("/img/anime/{MUSHISHI}/cover")).await;
    assert_eq!(again.bytes().await.unwrap(), bytes);
    assert_eq!(host.images_served(), 1);

    // The upstream failing for a poster not fetched yet: the placeholder, not an error.
    set_cover(&pool, 1, &host.poster_url("large", 1), "#102030").await;
    let failing = browser.get("/img/anime/1/cover").await;
    assert_eq!(failing.status(), 200);
    assert_eq!(failing.headers()["content-type"], "image/svg+xml");
    let svg = failing.text().await.unwrap();
    assert!(svg.contains("#102030") && !svg.contains("<script"), "{svg}");
    // A host not on the list is never fetched.
    set_cover(
        &pool,
        30,
        "http://169.254.169.254/latest/meta-data.png",
        "#000000",
    )
    .await;
    let blocked = browser.get("/img/anime/30/cover").await;
    assert_eq!(blocked.headers()["content-type"], "image/svg+xml");
    // An anime without a poster: its initials; an unknown one: 404.
    let missing = browser.get("/img/anime/5114/cover").await;
    assert_eq!(missing.headers()["content-type"], "image/svg+xml");
    assert_eq!(
        browser.get("/img/anime/999999999/cover").await.status(),
        404
    );
}
