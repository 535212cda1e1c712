//! Accounts over HTTP against a real PostgreSQL (each test its own database): sign-up by
//! emailed link, log-in and log-out with session rotation, no account enumeration, throttling,
//! CSRF, and searches charged to the signed-in user.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{Browser, TestApp, location};
use server::{accounts::SESSION_COOKIE, mail};
use sqlx::PgPool;

const PASSWORD: &str = "correct horse battery";

/// The sign-up link in the newest mail to `email`.
async fn sign_up_link(pool: &PgPool, email: &str) -> String {
    let mails = mail::latest_for(pool, email, 1).await.unwrap();
    let body = &mails.first().expect("a mail was queued").body;
    let start = body.find("/register/confirm?token=").expect("a link");
    body[start..].split_whitespace().next().unwrap().to_string()
}

/// Signs `email` up through the forms and the emailed link; the browser ends up logged in.
async fn register(browser: &Browser, pool: &PgPool, email: &str) {
    let csrf = browser.csrf().await;
    let sent = browser
        .post("/register", &[("email", email), ("csrf", &csrf)])
        .await;
    assert_eq!(location(&sent), "/register/sent");
    let normalised = email.trim().to_lowercase();
    let link = sign_up_link(pool, &normalised).await;
    let page = browser.page(&link).await;
    assert!(
        page.contains("Create my account") && page.contains("Choose a password"),
        "{page}"
    );
    let token = link.split("token=").nth(1).unwrap();
    let created = confirm(browser, token, PASSWORD).await;
    assert_eq!(location(&created), "/account");
}

/// Follows a sign-up link's form: chooses `password` for the account `token` creates.
async fn confirm(browser: &Browser, token: &str, password: &str) -> reqwest::Response {
    let csrf = browser.csrf().await;
    browser
        .post(
            "/register/confirm",
            &[("token", token), ("password", password), ("csrf", &csrf)],
        )
        .await
}

async fn log_in(browser: &Browser, email: &str, password: &str) -> String {
    let csrf = browser.csrf().await;
    let response = browser
        .post(
            "/login",
            &[("email", email), ("password", password), ("csrf", &csrf)],
        )
        .await;
    location(&response)
}

#[sqlx::test(migrations = "../migrations")]
async fn sign_up_log_out_and_log_in_again(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    register(&browser, &pool, "  Ana@Example.COM ").await;

    let account = browser.page("/account").await;
    assert!(account.contains("ana@example.com"), "{account}");
    assert!(
        account.contains(r#"<dd class="plan">Free</dd>"#),
        "{account}"
    );
    assert!(
        account.contains("Used 0 of 30 searches this month"),
        "{account}"
    );
    let session = browser.cookie(SESSION_COOKIE).expect("a session cookie");

    // The link worked once.
    let link = sign_up_link(&pool, "ana@example.com").await;
    let token = link.split("token=").nth(1).unwrap();
    let csrf = browser.csrf().await;
    let again = confirm(&browser, token, PASSWORD).await;
    assert_eq!(location(&again), "/register?error=link");

    // Log out: the session row is gone, so the old cookie is worth nothing.
    let out = browser.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(location(&out), "/");
    assert_eq!(browser.cookie(SESSION_COOKIE), None, "cookie removed");
    let replay = Browser::new(&app);
    replay.set_cookie(SESSION_COOKIE, &session);
    assert!(
        replay
            .page("/account")
            .await
            .contains("You are not logged in")
    );

    // Any spelling of the address logs in; the answer for a wrong password names neither.
    assert_eq!(
        log_in(&browser, "ana@example.com", "wrong password").await,
        "/login?error=wrong"
    );
    assert_eq!(
        log_in(&browser, " ANA@example.com", PASSWORD).await,
        "/account"
    );
    assert!(browser.page("/account").await.contains("ana@example.com"));
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn logging_in_rotates_the_session_id(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    register(&browser, &pool, "rui@example.com").await;
    let before = browser.cookie(SESSION_COOKIE).unwrap();
    assert_eq!(
        log_in(&browser, "rui@example.com", PASSWORD).await,
        "/account"
    );
    let after = browser.cookie(SESSION_COOKIE).unwrap();
    assert_ne!(before, after, "a new id at log-in");
    // The old id no longer names a session.
    let stale = Browser::new(&app);
    stale.set_cookie(SESSION_COOKIE, &before);
    assert!(
        stale
            .page("/account")
            .await
            .contains("You are not logged in")
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn cookies_are_http_only_lax_and_secure_over_https(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.public_url = Some("https://zenbu.example".into())
    })
    .await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;
    common::insert_user(&pool, "sec@example.com", PASSWORD).await;
    let response = browser
        .post(
            "/login",
            &[
                ("email", "sec@example.com"),
                ("password", PASSWORD),
                ("csrf", &csrf),
            ],
        )
        .await;
    let set_cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with(&format!("{}=", server::accounts::SECURE_SESSION_COOKIE)))
        .expect("a __Host- session cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(
            set_cookie.contains(attribute),
            "{attribute} missing: {set_cookie}"
        );
    }
}

/// The fastest of several timings: what a request costs without interference (tests running
/// beside this one share the cores and the hashing permits; they only ever add time).
fn fastest(times: Vec<Duration>) -> Duration {
    times.into_iter().min().expect("at least one timing")
}

#[sqlx::test(migrations = "../migrations")]
async fn neither_form_tells_whether_an_address_has_an_account(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let owner = Browser::new(&app);
    register(&owner, &pool, "taken@example.com").await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;

    // Sign-up: the same redirect for a registered and a new address, and a mail for each.
    let sign_up = |email: String| {
        let (browser, csrf) = (&browser, csrf.clone());
        async move {
            let response = browser
                .post("/register", &[("email", &email), ("csrf", &csrf)])
                .await;
            location(&response)
        }
    };
    assert_eq!(sign_up("taken@example.com".into()).await, "/register/sent");
    assert_eq!(sign_up("fresh@example.com".into()).await, "/register/sent");
    let notice = &mail::latest_for(&pool, "taken@example.com", 1)
        .await
        .unwrap()[0];
    assert!(
        notice.subject.contains("already have an account"),
        "{notice:?}"
    );
    assert!(!notice.body.contains("token="));
    assert!(
        sign_up_link(&pool, "fresh@example.com")
            .await
            .contains("token=")
    );
    // Comparable time, too (interleaved; 3 rounds keep this network under its 10 sign-ups an
    // hour).
    let (mut taken, mut fresh) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let email = format!("taken{round}@example.com");
        sqlx::query("INSERT INTO users (email, password_hash) VALUES ($1, 'x')")
            .bind(&email)
            .execute(&pool)
            .await
            .unwrap();
        let started = Instant::now();
        assert_eq!(sign_up(email).await, "/register/sent");
        taken.push(started.elapsed());
        let started = Instant::now();
        assert_eq!(
            sign_up(format!("fresh{round}@example.com")).await,
            "/register/sent"
        );
        fresh.push(started.elapsed());
    }
    let (taken, fresh) = (fastest(taken), fastest(fresh));
    let ratio = taken.as_secs_f64() / fresh.as_secs_f64();
    println!("sign-up, fastest: registered {taken:?}, new {fresh:?} (ratio {ratio:.2})");
    // Both take a couple of milliseconds, where scheduling noise is proportionally large; a
    // real difference (a password hash on one side) would be ten times.
    assert!(
        (0.33..3.0).contains(&ratio),
        "registered {taken:?} against new {fresh:?}"
    );

    // Log-in: an unknown address and a wrong password get the same answer in comparable time
    // (an unknown address is verified against a dummy hash). Different addresses each round,
    // to stay under the per-address throttle.
    for round in 0..8 {
        let email = format!("user{round}@example.com");
        common::insert_user(&pool, &email, PASSWORD).await;
    }
    // Interleaved, so that load from tests running beside this one weighs on both alike.
    let (mut wrong, mut unknown) = (Vec::new(), Vec::new());
    for round in 0..8 {
        let started = Instant::now();
        let email = format!("user{round}@example.com");
        assert_eq!(
            log_in(&browser, &email, "not the password").await,
            "/login?error=wrong"
        );
        wrong.push(started.elapsed());
        let started = Instant::now();
        let email = format!("nobody{round}@example.com");
        assert_eq!(
            log_in(&browser, &email, "not the password").await,
            "/login?error=wrong"
        );
        unknown.push(started.elapsed());
    }
    let (wrong_password, unknown_email) = (fastest(wrong), fastest(unknown));
    let ratio = unknown_email.as_secs_f64() / wrong_password.as_secs_f64();
    println!(
        "log-in failure, fastest: wrong password {wrong_password:?}, unknown address {unknown_email:?} (ratio {ratio:.2})"
    );
    assert!(
        (0.5..2.0).contains(&ratio),
        "unknown address {unknown_email:?} against wrong password {wrong_password:?}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn repeated_failures_are_throttled_per_address_and_per_network(pool: PgPool) {
    // Behind a proxy, so that tests can come from several networks.
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    common::insert_user(&pool, "eva@example.com", PASSWORD).await;
    let attacker = Browser::from_network(&app, "203.0.113.66");
    for _ in 0..5 {
        assert_eq!(
            log_in(&attacker, "eva@example.com", "guess").await,
            "/login?error=wrong"
        );
    }
    // The sixth try from that network is refused even with the right password: no session.
    assert_eq!(
        log_in(&attacker, "eva@example.com", PASSWORD).await,
        "/login?error=throttled"
    );
    assert_eq!(attacker.cookie(SESSION_COOKIE), None);
    // The owner, on their own network, is not locked out by it.
    let owner = Browser::from_network(&app, "198.51.100.7");
    assert_eq!(
        log_in(&owner, "eva@example.com", PASSWORD).await,
        "/account"
    );
    // Addresses without an account are throttled alike (so throttling reveals nothing).
    for _ in 0..5 {
        log_in(&attacker, "ghost@example.com", "guess").await;
    }
    assert_eq!(
        log_in(&attacker, "ghost@example.com", "guess").await,
        "/login?error=throttled"
    );

    // Per network: 30 attempts over many addresses lock that network out for a while.
    let sprayer = Browser::from_network(&app, "192.0.2.99");
    for i in 0..30 {
        assert_eq!(
            log_in(&sprayer, &format!("spray{i}@example.com"), "guess").await,
            "/login?error=wrong"
        );
    }
    common::insert_user(&pool, "ivo@example.com", PASSWORD).await;
    assert_eq!(
        log_in(&sprayer, "ivo@example.com", PASSWORD).await,
        "/login?error=throttled"
    );
    assert_eq!(
        log_in(
            &Browser::from_network(&app, "192.0.2.100"),
            "ivo@example.com",
            PASSWORD
        )
        .await,
        "/account"
    );

    // Per address from anywhere: 50 guesses spread over networks stop guessing at that address
    // from any network.
    common::insert_user(&pool, "zoe@example.com", PASSWORD).await;
    for i in 0..50 {
        let guesser = Browser::from_network(&app, &format!("10.1.{}.{}", i / 4, i % 4));
        assert_eq!(
            log_in(&guesser, "zoe@example.com", "guess").await,
            "/login?error=wrong"
        );
    }
    let fresh = Browser::from_network(&app, "10.9.9.9");
    assert_eq!(
        log_in(&fresh, "zoe@example.com", PASSWORD).await,
        "/login?error=throttled"
    );

    // Once the window has passed, the address logs in again (time moved by editing the rows).
    sqlx::query("UPDATE auth_attempts SET attempted_at = attempted_at - interval '16 minutes'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        log_in(&attacker, "eva@example.com", PASSWORD).await,
        "/account"
    );
    assert_eq!(
        log_in(&fresh, "zoe@example.com", PASSWORD).await,
        "/account"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn failures_elsewhere_never_lock_the_owner_out_on_their_own_network(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    common::insert_user(&pool, "ines@example.com", PASSWORD).await;
    let home = Browser::from_network(&app, "198.51.100.20");
    assert_eq!(
        log_in(&home, "ines@example.com", PASSWORD).await,
        "/account"
    );
    // A distributed guess: 50 failures at the address from ten networks (five each, the
    // per-network guessing limit), the per-address limit.
    for n in 0..10 {
        let guesser = Browser::from_network(&app, &format!("203.0.113.{}", 100 + n));
        for _ in 0..5 {
            assert_eq!(
                log_in(&guesser, "ines@example.com", "guess").await,
                "/login?error=wrong"
            );
        }
    }
    // A new network is refused even with the password; the owner's own is not.
    let unknown = Browser::from_network(&app, "192.0.2.77");
    assert_eq!(
        log_in(&unknown, "ines@example.com", PASSWORD).await,
        "/login?error=throttled"
    );
    let home_again = Browser::from_network(&app, "198.51.100.20");
    assert_eq!(
        log_in(&home_again, "ines@example.com", PASSWORD).await,
        "/account"
    );
}

/// A shared address (an office, a carrier's NAT) sprayed by one of its users: the network's
/// limit stops the sprayer and new faces, not someone who has logged in from there before.
#[sqlx::test(migrations = "../migrations")]
async fn an_accounts_own_network_lets_it_through_that_networks_limit(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    let office = "198.51.100.30";
    common::insert_user(&pool, "olga@example.com", PASSWORD).await;
    common::insert_user(&pool, "nuno@example.com", PASSWORD).await;
    let olga = Browser::from_network(&app, office);
    assert_eq!(
        log_in(&olga, "olga@example.com", PASSWORD).await,
        "/account"
    );
    let sprayer = Browser::from_network(&app, office);
    for i in 0..30 {
        assert_eq!(
            log_in(&sprayer, &format!("spray{i}@example.com"), "guess").await,
            "/login?error=wrong"
        );
    }
    // Someone who never logged in from the office waits out the window...
    let nuno = Browser::from_network(&app, office);
    assert_eq!(
        log_in(&nuno, "nuno@example.com", PASSWORD).await,
        "/login?error=throttled"
    );
    // ...the owner of an account used from there does not.
    let olga_again = Browser::from_network(&app, office);
    assert_eq!(
        log_in(&olga_again, "olga@example.com", PASSWORD).await,
        "/account"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn made_up_sign_up_links_hash_nothing_and_are_throttled_per_network(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    let flood = Browser::from_network(&app, "203.0.113.9");
    {
        // Every hashing permit is taken: a confirmation that hashed would wait for one. Made-up
        // links are answered at once, without a hash.
        let _held = server::accounts::password::hold_every_permit().await;
        for i in 0..20 {
            let made_up = format!("{i:064x}");
            let answer =
                tokio::time::timeout(Duration::from_secs(5), confirm(&flood, &made_up, PASSWORD))
                    .await
                    .expect("answered without hashing");
            assert_eq!(location(&answer), "/register?error=link");
        }
    }
    // The network has used its confirmations for the window.
    let throttled = confirm(&flood, &format!("{:064x}", 99), PASSWORD).await;
    assert!(
        location(&throttled).ends_with("error=throttled"),
        "{}",
        location(&throttled)
    );
    // Someone on another network signs up as usual.
    let owner = Browser::from_network(&app, "198.51.100.7");
    register(&owner, &pool, "new@example.com").await;
}

#[sqlx::test(migrations = "../migrations")]
async fn a_burst_of_concurrent_guesses_gets_no_more_than_the_limit(pool: PgPool) {
    common::spawn_app(pool.clone()).await;
    common::insert_user(&pool, "max@example.com", PASSWORD).await;
    // 40 guesses at once from one network (the password check is slow; the count is not).
    let guesses: Vec<_> = (0..40)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                server::accounts::log_in(&pool, "max@example.com", "guess", "192.0.2.1")
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut checked = 0;
    for guess in guesses {
        match guess.await.unwrap() {
            Err(server::accounts::FormError::WrongCredentials) => checked += 1,
            Err(server::accounts::FormError::Throttled(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        checked, 5,
        "only the limit's worth of passwords was checked"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn forms_refuse_cross_site_posts_and_missing_tokens(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    register(&browser, &pool, "lia@example.com").await;
    let csrf = browser.csrf().await;
    let session = browser.cookie(SESSION_COOKIE).unwrap();
    let visitor = browser.cookie(server::accounts::visitor::COOKIE).unwrap();
    let client = common::client_without_redirects();
    let cookies = format!(
        "{SESSION_COOKIE}={session}; {}={visitor}",
        server::accounts::visitor::COOKIE
    );

    // Another site's form, even carrying the victim's cookies and a valid token: 403.
    for (header, value) in [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let response = client
            .post(app.url("/logout"))
            .header("cookie", &cookies)
            .header(header, value)
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{header}: {value}");
    }
    // No browser headers at all (an old browser) but no token: refused, nothing changes.
    for token in [
        "",
        "0000000000000000000000000000000000000000000000000000000000000000",
    ] {
        let response = client
            .post(app.url("/logout"))
            .header("cookie", &cookies)
            .form(&[("csrf", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(location(&response), "/account?error=form");
    }
    assert!(
        browser.page("/account").await.contains("lia@example.com"),
        "still logged in"
    );

    // A token is bound to its visitor: another visitor's token does not work.
    let other = Browser::new(&app);
    let others_token = other.csrf().await;
    let response = browser.post("/logout", &[("csrf", &others_token)]).await;
    assert_eq!(location(&response), "/account?error=form");
    let response = browser
        .post(
            "/login",
            &[
                ("email", "lia@example.com"),
                ("password", PASSWORD),
                ("csrf", &others_token),
            ],
        )
        .await;
    assert_eq!(location(&response), "/login?error=form");
}

#[sqlx::test(migrations = "../migrations")]
async fn bad_sign_up_forms_say_why_and_store_nothing(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;
    let response = browser
        .post("/register", &[("email", "not an address"), ("csrf", &csrf)])
        .await;
    assert_eq!(location(&response), "/register?error=email");
    let page = browser.page("/register?error=email").await;
    assert!(page.contains(r#"role="alert""#), "{page}");
    let mails: i64 = sqlx::query_scalar("SELECT count(*) FROM mail_outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mails, 0);

    // Passwords are checked on the link's page; a bad one leaves the link working.
    browser
        .post(
            "/register",
            &[("email", "ana@example.com"), ("csrf", &csrf)],
        )
        .await;
    let link = sign_up_link(&pool, "ana@example.com").await;
    let token = link.split("token=").nth(1).unwrap();
    let long = "x".repeat(129);
    for (password, code) in [
        ("short", "password-short"),
        (long.as_str(), "password-long"),
    ] {
        let response = confirm(&browser, token, password).await;
        let target = location(&response);
        assert_eq!(
            target,
            format!("/register/confirm?token={token}&error={code}")
        );
        let page = browser.page(&target).await;
        assert!(page.contains(r#"role="alert""#), "{page}");
    }
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(users, 0);
    let created = confirm(&browser, token, PASSWORD).await;
    assert_eq!(location(&created), "/account");
}

#[sqlx::test(migrations = "../migrations")]
async fn a_signed_in_user_searches_on_their_own_plan(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    register(&browser, &pool, "mio@example.com").await;
    let search = |q: &'static str| {
        let browser = &browser;
        async move {
            let response = browser.get(&format!("/api/search?q={q}")).await;
            assert_eq!(response.status(), 200);
            response.json::<serde_json::Value>().await.unwrap()
        }
    };
    let body = search("mushishi").await;
    assert_eq!(body["quota"]["limit"], 30);
    assert_eq!(body["quota"]["period"], "month");
    assert_eq!(body["quota"]["used"], 1);
    let subjects: Vec<String> = sqlx::query_scalar("SELECT subject FROM search_usage")
        .fetch_all(&pool)
        .await
        .unwrap();
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE email = 'mio@example.com'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(subjects, vec![format!("user:{id}")]);

    // Premium: 200, counting what was used this month.
    sqlx::query("UPDATE users SET plan = 'premium' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let body = search("ghosts at school").await;
    assert_eq!(
        (
            body["quota"]["limit"].clone(),
            body["quota"]["used"].clone()
        ),
        (200.into(), 2.into())
    );
    let account = browser.page("/account").await;
    assert!(
        account.contains(r#"<dd class="plan">Premium</dd>"#),
        "{account}"
    );
    assert!(
        account.contains("Used 2 of 200 searches this month"),
        "{account}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn cleared_cookies_give_new_allowances_only_up_to_the_network_cap(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| {
        config.accounts.new_visitors_per_network = 3
    })
    .await;
    let fresh_visitor_search = || async {
        // A new browser each time: what clearing cookies amounts to.
        let browser = Browser::new(&app);
        let response = browser.get("/api/search?q=mushishi").await;
        (browser, response)
    };
    let (first, response) = fresh_visitor_search().await;
    assert_eq!(response.status(), 200);
    for _ in 0..2 {
        assert_eq!(fresh_visitor_search().await.1.status(), 200);
    }
    let (_, refused) = fresh_visitor_search().await;
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("new visitors"),
        "{body}"
    );
    // As a page, too, and it points to sign-up.
    let page = Browser::new(&app).get("/?q=mushishi").await;
    assert_eq!(page.status(), 429);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("Too many new visitors") && html.contains(r#"href="/register""#),
        "{html}"
    );

    // Visitors that started earlier keep their allowance; nothing was counted for the refused.
    let again = first.get("/api/search?q=ghosts").await;
    assert_eq!(again.status(), 200);
    let (counted, starts): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM search_usage), (SELECT count(*) FROM anonymous_starts)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((counted, starts), (4, 3));
    // A day later the network may start new visitors again.
    sqlx::query("UPDATE anonymous_starts SET started_at = started_at - interval '25 hours'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(fresh_visitor_search().await.1.status(), 200);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_dev_mailbox_is_served_only_when_turned_on(pool: PgPool) {
    let off: TestApp = common::spawn_app(pool.clone()).await;
    assert_eq!(
        Browser::new(&off)
            .get("/dev/mail?to=a@example.com")
            .await
            .status(),
        404
    );
    let on =
        common::spawn_app_with(pool.clone(), |config| config.accounts.dev_mailbox = true).await;
    let browser = Browser::new(&on);
    let csrf = browser.csrf().await;
    browser
        .post(
            "/register",
            &[("email", "Box@Example.com"), ("csrf", &csrf)],
        )
        .await;
    let mails: serde_json::Value = browser
        .get("/dev/mail?to=box@example.com")
        .await
        .json()
        .await
        .unwrap();
    assert!(
        mails[0]["body"]
            .as_str()
            .unwrap()
            .contains("/register/confirm?token="),
        "{mails}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn display_names_and_header_injections_are_refused_in_both_languages(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;
    for address in [
        "A <victim@example.com>",
        "x\r\nBcc: evil <victim@example.com>",
        "victim@example.com\r\nBcc: other@example.com",
        "\"victim\"@example.com",
    ] {
        for form in ["/register", "/password/forgot"] {
            let response = browser
                .post(form, &[("email", address), ("csrf", &csrf)])
                .await;
            assert_eq!(
                location(&response),
                format!("{form}?error=email"),
                "{address:?}"
            );
        }
    }
    let rows: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM mail_outbox) + (SELECT count(*) FROM pending_signups)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rows, 0, "nothing stored, nothing mailed");
    // The refusal says why, in the page's language.
    let english = browser.page("/register?error=email").await;
    assert!(
        english.contains("Enter an email address like name@example.com"),
        "{english}"
    );
    browser.set_cookie("zenbu_lang", "es");
    let spanish = browser.page("/register?error=email").await;
    assert!(
        spanish.contains("Escribe una dirección de correo como nombre@ejemplo.com"),
        "{spanish}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn one_mailbox_is_one_account_whatever_its_spelling(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    common::insert_user(&pool, "ana@example.com", PASSWORD).await;
    common::insert_user(&pool, "jo.smith@gmail.com", PASSWORD).await;
    let browser = Browser::new(&app);
    let csrf = browser.csrf().await;
    // Another spelling of a registered mailbox gets the "you already have an account" mail.
    for (spelling, shown) in [
        ("ana+zenbu@example.com", "ana+zenbu@example.com"),
        ("josmith+x@googlemail.com", "josmith+x@googlemail.com"),
    ] {
        let sent = browser
            .post("/register", &[("email", spelling), ("csrf", &csrf)])
            .await;
        assert_eq!(location(&sent), "/register/sent");
        let mails = mail::latest_for(&pool, shown, 1).await.unwrap();
        assert_eq!(
            mails[0].subject, "Zenbu: you already have an account",
            "{spelling}"
        );
    }
    let links: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_signups")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(links, 0);

    // The per-address sign-up throttle counts the mailbox: three tags, then refused.
    let fresh = Browser::from_network(&app, "198.51.100.1");
    let csrf = fresh.csrf().await;
    for n in 1..=3 {
        let email = format!("new+{n}@example.com");
        let sent = fresh
            .post("/register", &[("email", &email), ("csrf", &csrf)])
            .await;
        assert_eq!(location(&sent), "/register/sent", "{email}");
    }
    let refused = fresh
        .post(
            "/register",
            &[("email", "new+4@example.com"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&refused), "/register?error=throttled");

    // Two pending links for one mailbox make one account: the second finds it taken.
    let links: Vec<String> = {
        let mut out = Vec::new();
        for n in 1..=2 {
            out.push(sign_up_link(&pool, &format!("new+{n}@example.com")).await);
        }
        out
    };
    let first = confirm(&fresh, links[0].split("token=").nth(1).unwrap(), PASSWORD).await;
    assert_eq!(location(&first), "/account");
    let second = confirm(
        &Browser::new(&app),
        links[1].split("token=").nth(1).unwrap(),
        PASSWORD,
    )
    .await;
    assert_eq!(location(&second), "/login?error=registered");
    let accounts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM users WHERE mailbox = 'new@example.com'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(accounts, 1);
}

/// The reset link in the newest mail to `email`.
async fn reset_token(pool: &PgPool, email: &str) -> String {
    let mails = mail::latest_for(pool, email, 1).await.unwrap();
    let body = &mails.first().expect("a mail was queued").body;
    let start = body.find("/password/reset?token=").expect("a reset link");
    body[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .split("token=")
        .nth(1)
        .unwrap()
        .to_string()
}

#[sqlx::test(migrations = "../migrations")]
async fn a_password_reset_works_once_and_signs_out_every_session(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    common::insert_user(&pool, "eva@example.com", PASSWORD).await;
    // Eva is signed in on two devices.
    let (laptop, phone) = (Browser::new(&app), Browser::new(&app));
    for device in [&laptop, &phone] {
        assert_eq!(
            log_in(device, "eva@example.com", PASSWORD).await,
            "/account"
        );
    }
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM user_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sessions, 2);

    // Forgotten: the same answer for her address and for one with no account; only hers is mailed.
    let someone = Browser::new(&app);
    let csrf = someone.csrf().await;
    for address in ["EVA@example.com", "nobody@example.com"] {
        let sent = someone
            .post("/password/forgot", &[("email", address), ("csrf", &csrf)])
            .await;
        assert_eq!(location(&sent), "/password/sent");
    }
    assert!(
        mail::latest_for(&pool, "nobody@example.com", 1)
            .await
            .unwrap()
            .is_empty()
    );
    let token = reset_token(&pool, "eva@example.com").await;
    assert_eq!(token.len(), 64, "256 bits");
    let stored: String = sqlx::query_scalar("SELECT token_hash FROM password_resets")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_ne!(stored, token, "stored hashed");
    let page = someone
        .page(&format!("/password/reset?token={token}"))
        .await;
    assert!(page.contains("Choose a new password"), "{page}");

    // A short password is refused and the link still works; then the new one is set.
    let reset = |password: &'static str| {
        let (someone, token) = (&someone, token.clone());
        async move {
            let csrf = someone.csrf().await;
            location(
                &someone
                    .post(
                        "/password/reset",
                        &[("token", &token), ("password", password), ("csrf", &csrf)],
                    )
                    .await,
            )
        }
    };
    assert_eq!(
        reset("short").await,
        format!("/password/reset?token={token}&error=password-short")
    );
    assert_eq!(
        reset("a brand new password").await,
        "/login?notice=password-reset"
    );
    assert!(
        someone
            .page("/login?notice=password-reset")
            .await
            .contains("Your password is changed")
    );
    // Used once only.
    assert_eq!(
        reset("another new password").await,
        "/password/forgot?error=reset-link"
    );

    // Both devices are signed out, the old password is dead, the new one works.
    for device in [&laptop, &phone] {
        assert!(
            device
                .page("/account")
                .await
                .contains("You are not logged in")
        );
    }
    assert_eq!(
        log_in(&laptop, "eva@example.com", PASSWORD).await,
        "/login?error=wrong"
    );
    assert_eq!(
        log_in(&laptop, "eva@example.com", "a brand new password").await,
        "/account"
    );
    let notice = mail::latest_for(&pool, "eva@example.com", 1).await.unwrap();
    assert_eq!(notice[0].subject, "Zenbu: your password was changed");
}

#[sqlx::test(migrations = "../migrations")]
async fn made_up_and_expired_reset_links_change_nothing(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    common::insert_user(&pool, "eva@example.com", PASSWORD).await;
    let guesser = Browser::from_network(&app, "203.0.113.9");
    let csrf = guesser.csrf().await;
    let mut codes = Vec::new();
    for n in 0..25 {
        let token = format!("{n:064x}");
        let response = guesser
            .post(
                "/password/reset",
                &[
                    ("token", &token),
                    ("password", "guessed password"),
                    ("csrf", &csrf),
                ],
            )
            .await;
        codes.push(location(&response));
    }
    assert!(
        codes[..20]
            .iter()
            .all(|c| c == "/password/forgot?error=reset-link"),
        "{codes:?}"
    );
    assert!(
        codes[20..].iter().all(|c| c.ends_with("error=throttled")),
        "{codes:?}"
    );

    // A real link past its hour is dead too.
    let sent = guesser
        .post(
            "/password/forgot",
            &[("email", "eva@example.com"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&sent), "/password/sent");
    let token = reset_token(&pool, "eva@example.com").await;
    sqlx::query("UPDATE password_resets SET expires_at = now() - interval '1 second'")
        .execute(&pool)
        .await
        .unwrap();
    let owner = Browser::from_network(&app, "198.51.100.2");
    let csrf = owner.csrf().await;
    let late = owner
        .post(
            "/password/reset",
            &[
                ("token", &token),
                ("password", "a brand new password"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(location(&late), "/password/forgot?error=reset-link");
    assert_eq!(
        log_in(&owner, "eva@example.com", PASSWORD).await,
        "/account"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn data_past_its_retention_goes_and_networks_are_forgotten_after_a_day(pool: PgPool) {
    let run = |sql: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query(sql).execute(&pool).await.unwrap() }
    };
    // Old and recent rows of each kind.
    run(
        "INSERT INTO mail_outbox (recipient, subject, body, sent_at) VALUES
           ('old@example.com', 's', 'b', now() - interval '31 days'),
           ('new@example.com', 's', 'b', now() - interval '29 days')",
    )
    .await;
    run("INSERT INTO mail_outbox (recipient, subject, body) VALUES ('queued@example.com', 's', 'b')")
        .await;
    run(
        "INSERT INTO stripe_events (id, type, created, received_at) VALUES
           ('evt_old', 'invoice.payment_failed', 1, now() - interval '91 days'),
           ('evt_new', 'invoice.payment_failed', 2, now() - interval '89 days')",
    )
    .await;
    run("INSERT INTO payment_failures (event_id, failed_at) VALUES
           ('evt_old', now() - interval '91 days'), ('evt_new', now() - interval '89 days')")
    .await;
    run(
        "INSERT INTO search_usage (subject, query_key, counted_at, network) VALUES
           ('visitor:a', 'k', now() - interval '367 days', '203.0.113.1'),
           ('visitor:b', 'k', now() - interval '2 days', '203.0.113.2'),
           ('visitor:c', 'k', now() - interval '1 hour', '203.0.113.3')",
    )
    .await;
    run(
        "INSERT INTO anonymous_starts (subject, network, started_at) VALUES
           ('visitor:a', '203.0.113.1', now() - interval '366 days'),
           ('visitor:b', '203.0.113.2', now() - interval '2 days'),
           ('visitor:c', '203.0.113.3', now() - interval '1 hour')",
    )
    .await;

    assert!(server::retention::sweep(&pool).await.unwrap() > 0);

    let strings = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(sql)
                .fetch_all(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        strings("SELECT recipient FROM mail_outbox ORDER BY recipient").await,
        ["new@example.com", "queued@example.com"],
        "undelivered mail is never swept"
    );
    assert_eq!(strings("SELECT id FROM stripe_events").await, ["evt_new"]);
    assert_eq!(
        strings("SELECT event_id FROM payment_failures").await,
        ["evt_new"]
    );
    assert_eq!(
        strings(
            "SELECT subject || ' ' || coalesce(network, '-') FROM search_usage ORDER BY subject"
        )
        .await,
        ["visitor:b -", "visitor:c 203.0.113.3"]
    );
    assert_eq!(
        strings(
            "SELECT subject || ' ' || coalesce(network, '-') FROM anonymous_starts ORDER BY subject"
        )
        .await,
        ["visitor:b -", "visitor:c 203.0.113.3"]
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn the_account_lists_its_sessions_and_ends_the_others(pool: PgPool) {
    let app = common::spawn_app_with(pool.clone(), |config| config.http.behind_proxy = true).await;
    common::insert_user(&pool, "ana@example.com", PASSWORD).await;
    let (home, work) = (
        Browser::from_network(&app, "198.51.100.10"),
        Browser::from_network(&app, "203.0.113.20"),
    );
    for device in [&home, &work] {
        assert_eq!(
            log_in(device, "ana@example.com", PASSWORD).await,
            "/account"
        );
    }
    let page = home.page("/account").await;
    assert!(
        page.contains("198.51.100.10") && page.contains("203.0.113.20"),
        "{page}"
    );
    assert_eq!(page.matches("this browser").count(), 1, "{page}");

    let csrf = home.csrf().await;
    let ended = home
        .post("/account/sessions/end-others", &[("csrf", &csrf)])
        .await;
    assert_eq!(location(&ended), "/account?notice=sessions-ended");
    assert!(
        work.page("/account")
            .await
            .contains("You are not logged in")
    );
    let page = home.page("/account?notice=sessions-ended").await;
    assert!(page.contains("Every other session is signed out"), "{page}");
    assert!(!page.contains("203.0.113.20"), "{page}");
}

#[sqlx::test(migrations = "../migrations")]
async fn changing_the_password_needs_the_current_one_and_ends_other_sessions(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    common::insert_user(&pool, "ana@example.com", PASSWORD).await;
    let (laptop, phone) = (Browser::new(&app), Browser::new(&app));
    for device in [&laptop, &phone] {
        assert_eq!(
            log_in(device, "ana@example.com", PASSWORD).await,
            "/account"
        );
    }
    let csrf = laptop.csrf().await;
    let change = |current: &'static str, new: &'static str| {
        let (laptop, csrf) = (&laptop, csrf.clone());
        async move {
            location(
                &laptop
                    .post(
                        "/account/password",
                        &[("current", current), ("password", new), ("csrf", &csrf)],
                    )
                    .await,
            )
        }
    };
    assert_eq!(
        change("not it", "a brand new password").await,
        "/account?error=wrong-password"
    );
    assert_eq!(
        change(PASSWORD, "short").await,
        "/account?error=password-short"
    );
    assert!(
        phone.page("/account").await.contains("ana@example.com"),
        "nothing changed yet"
    );
    assert_eq!(
        change(PASSWORD, "a brand new password").await,
        "/account?notice=password-changed"
    );
    // This browser stays in; the other is out; the address is told.
    assert!(laptop.page("/account").await.contains("ana@example.com"));
    assert!(
        phone
            .page("/account")
            .await
            .contains("You are not logged in")
    );
    assert_eq!(
        mail::latest_for(&pool, "ana@example.com", 1).await.unwrap()[0].subject,
        "Zenbu: your password was changed"
    );
    assert_eq!(
        log_in(&phone, "ana@example.com", "a brand new password").await,
        "/account"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_new_address_is_confirmed_by_its_own_mail_and_the_old_one_is_told(pool: PgPool) {
    let app = common::spawn_app(pool.clone()).await;
    common::insert_user(&pool, "old@example.com", PASSWORD).await;
    common::insert_user(&pool, "taken@example.com", PASSWORD).await;
    let browser = Browser::new(&app);
    assert_eq!(
        log_in(&browser, "old@example.com", PASSWORD).await,
        "/account"
    );
    let csrf = browser.csrf().await;
    let change = |email: &'static str, password: &'static str| {
        let (browser, csrf) = (&browser, csrf.clone());
        async move {
            location(
                &browser
                    .post(
                        "/account/email",
                        &[("email", email), ("password", password), ("csrf", &csrf)],
                    )
                    .await,
            )
        }
    };
    assert_eq!(
        change("new@example.com", "not it").await,
        "/account?error=wrong-password"
    );
    assert_eq!(
        change("A <new@example.com>", PASSWORD).await,
        "/account?error=email"
    );
    // A registered mailbox: the same answer, and that address gets "you already have one".
    assert_eq!(
        change("taken+x@example.com", PASSWORD).await,
        "/account?notice=email-link-sent"
    );
    assert_eq!(
        mail::latest_for(&pool, "taken+x@example.com", 1)
            .await
            .unwrap()[0]
            .subject,
        "Zenbu: you already have an account"
    );
    assert_eq!(
        change("new@example.com", PASSWORD).await,
        "/account?notice=email-link-sent"
    );
    // Nothing changes until the new address's link is followed.
    assert!(browser.page("/account").await.contains("old@example.com"));
    let body = &mail::latest_for(&pool, "new@example.com", 1).await.unwrap()[0].body;
    let start = body.find("/account/email/confirm?token=").expect("a link");
    let link = body[start..].split_whitespace().next().unwrap().to_string();
    let token = link.split("token=").nth(1).unwrap().to_string();
    assert!(browser.page(&link).await.contains("Use this address"));
    let confirm = |token: String| {
        let (browser, csrf) = (&browser, csrf.clone());
        async move {
            location(
                &browser
                    .post(
                        "/account/email/confirm",
                        &[("token", &token), ("csrf", &csrf)],
                    )
                    .await,
            )
        }
    };
    assert_eq!(
        confirm(token.clone()).await,
        "/account?notice=email-changed"
    );
    assert!(browser.page("/account").await.contains("new@example.com"));
    // The networks the owner logged in from follow the address (their throttles' exemption).
    let networks: Vec<String> = sqlx::query_scalar("SELECT email FROM login_networks")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(networks, ["new@example.com"]);
    assert_eq!(
        mail::latest_for(&pool, "old@example.com", 1).await.unwrap()[0].subject,
        "Zenbu: your account's address was changed"
    );
    assert_eq!(
        confirm(token).await,
        "/account?error=link",
        "a link works once"
    );
    assert_eq!(
        log_in(&browser, "new@example.com", PASSWORD).await,
        "/account"
    );
    assert_eq!(
        log_in(&browser, "old@example.com", PASSWORD).await,
        "/login?error=wrong"
    );
}

/// Every plan a user can have is one `users.plan` accepts (its CHECK constraint), and a user
/// read back has that plan.
#[sqlx::test(migrations = "../migrations")]
async fn every_stored_plan_fits_the_users_table_and_reads_back(pool: PgPool) {
    use server::quota::Plan;
    for plan in Plan::ALL {
        let Some(stored) = plan.stored() else {
            continue;
        };
        let id = common::insert_user(&pool, &format!("{stored}@example.com"), PASSWORD).await;
        sqlx::query("UPDATE users SET plan = $2 WHERE id = $1")
            .bind(id)
            .bind(stored)
            .execute(&pool)
            .await
            .unwrap();
        let user: server::accounts::User =
            sqlx::query_as("SELECT id, email, plan FROM users WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(user.plan(), plan);
    }
}
