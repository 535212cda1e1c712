//! The search quota against the real PostgreSQL: exact counting under concurrency, the 3-minute
//! repeat window, period rollovers, refunds and upgrades.

use std::collections::HashSet;

use server::quota::{self, Plan, Reservation};
use sqlx::PgPool;

const T0: &str = "2026-11-30T10:00:00Z";

/// [`quota::reserve`], then the unit confirmed as a search that answered would.
async fn reserve(
    pool: &PgPool,
    subject: &str,
    plan: Plan,
    key: &str,
    at: Option<&str>,
) -> Result<Reservation, sqlx::Error> {
    let reservation = quota::reserve(pool, subject, plan, key, at).await?;
    if let Reservation::Counted { usage_id, .. } = reservation {
        assert!(quota::confirm(pool, usage_id, plan, None).await?);
    }
    Ok(reservation)
}

/// Records `n` counted searches for `subject` at `at`, each a different query.
async fn spend(pool: &PgPool, subject: &str, plan: Plan, n: usize, at: &str) {
    for i in 0..n {
        let outcome = reserve(pool, subject, plan, &format!("spent-{i}-{at}"), Some(at))
            .await
            .unwrap();
        assert!(
            matches!(outcome, Reservation::Counted { .. }),
            "{outcome:?}"
        );
    }
}

#[sqlx::test(migrations = "../migrations")]
async fn two_hundred_concurrent_searches_with_thirty_left_record_exactly_thirty(pool: PgPool) {
    // A Premium account that has used 170 of 200 this month.
    spend(&pool, "user:1", Plan::Premium, 170, T0).await;
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                reserve(&pool, "user:1", Plan::Premium, &format!("q{i}"), Some(T0))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut counted = 0;
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            Reservation::Counted { .. } => counted += 1,
            Reservation::Refused { usage } => {
                assert_eq!((usage.used, usage.limit), (200, 200));
                refused += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((counted, refused), (30, 170));
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM search_usage WHERE subject = 'user:1'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, 200);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_repeat_is_free_only_once_the_earlier_unit_is_confirmed(pool: PgPool) {
    // Pending: its search may never answer (a client that hung up used to get the repeat free
    // while the unit lapsed). Identical searches in flight share one unit in `quota::Meter`.
    let first = quota::reserve(&pool, "visitor:a", Plan::Anonymous, "same query", Some(T0))
        .await
        .unwrap();
    let Reservation::Counted { usage_id, .. } = first else {
        panic!("{first:?}")
    };
    let while_pending = quota::reserve(&pool, "visitor:a", Plan::Anonymous, "same query", Some(T0))
        .await
        .unwrap();
    assert!(
        matches!(while_pending, Reservation::Counted { .. }),
        "{while_pending:?}"
    );
    assert!(
        quota::confirm(&pool, usage_id, Plan::Anonymous, None)
            .await
            .unwrap()
    );
    let after_confirm = quota::reserve(&pool, "visitor:a", Plan::Anonymous, "same query", Some(T0))
        .await
        .unwrap();
    assert!(
        matches!(after_confirm, Reservation::Repeat { .. }),
        "{after_confirm:?}"
    );
    let usage = quota::usage(&pool, "visitor:a", Plan::Anonymous, Some(T0))
        .await
        .unwrap();
    assert_eq!((usage.used, usage.remaining()), (2, 8));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_repeat_is_free_for_three_minutes_then_counts_again(pool: PgPool) {
    let mushishi_at = |at: &'static str| {
        let pool = pool.clone();
        async move {
            reserve(&pool, "user:7", Plan::Free, "mushishi", Some(at))
                .await
                .unwrap()
        }
    };
    assert!(matches!(
        mushishi_at("2026-11-30T10:00:00Z").await,
        Reservation::Counted { .. }
    ));
    assert!(matches!(
        mushishi_at("2026-11-30T10:02:59Z").await,
        Reservation::Repeat { .. }
    ));
    assert!(matches!(
        mushishi_at("2026-11-30T10:03:01Z").await,
        Reservation::Counted { .. }
    ));
    // Another query, or the same query of another subject, is not a repeat.
    let other = reserve(
        &pool,
        "user:7",
        Plan::Free,
        "kino",
        Some("2026-11-30T10:03:02Z"),
    )
    .await
    .unwrap();
    assert!(matches!(other, Reservation::Counted { .. }));
    let someone_else = reserve(
        &pool,
        "user:8",
        Plan::Free,
        "mushishi",
        Some("2026-11-30T10:03:03Z"),
    )
    .await
    .unwrap();
    assert!(matches!(someone_else, Reservation::Counted { .. }));
    let usage = quota::usage(&pool, "user:7", Plan::Free, Some("2026-11-30T10:04:00Z"))
        .await
        .unwrap();
    assert_eq!(usage.used, 3);
}

#[sqlx::test(migrations = "../migrations")]
async fn allowances_reset_with_the_calendar_month_or_year_in_utc(pool: PgPool) {
    // A free account spends its 30 in November and is refused; December 1st (UTC) resets it.
    spend(&pool, "user:2", Plan::Free, 30, "2026-11-30T23:59:00Z").await;
    let refused = reserve(
        &pool,
        "user:2",
        Plan::Free,
        "one more",
        Some("2026-11-30T23:59:30Z"),
    )
    .await
    .unwrap();
    let Reservation::Refused { usage } = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (usage.used, usage.limit, usage.resets_on.as_str()),
        (30, 30, "2026-12-01")
    );
    let december = reserve(
        &pool,
        "user:2",
        Plan::Free,
        "one more",
        Some("2026-12-01T00:00:00Z"),
    )
    .await
    .unwrap();
    assert!(matches!(december, Reservation::Counted { ref usage, .. } if usage.used == 1));

    // An anonymous visitor's 10 last the calendar year: refused in December, fine on January 1st.
    spend(
        &pool,
        "visitor:b",
        Plan::Anonymous,
        10,
        "2026-02-01T12:00:00Z",
    )
    .await;
    let late = reserve(
        &pool,
        "visitor:b",
        Plan::Anonymous,
        "x",
        Some("2026-12-31T23:00:00Z"),
    )
    .await
    .unwrap();
    assert!(
        matches!(late, Reservation::Refused { ref usage } if usage.resets_on == "2027-01-01"),
        "{late:?}"
    );
    let new_year = reserve(
        &pool,
        "visitor:b",
        Plan::Anonymous,
        "x",
        Some("2027-01-01T00:00:01Z"),
    )
    .await
    .unwrap();
    assert!(matches!(new_year, Reservation::Counted { .. }));
}

#[sqlx::test(migrations = "../migrations")]
async fn an_upgrade_to_premium_counts_what_was_used_this_month(pool: PgPool) {
    spend(&pool, "user:3", Plan::Free, 30, T0).await;
    assert!(matches!(
        reserve(&pool, "user:3", Plan::Free, "more", Some(T0))
            .await
            .unwrap(),
        Reservation::Refused { .. }
    ));
    // The same subject on the Premium plan: 30 used of 200, so it runs at once.
    let upgraded = reserve(&pool, "user:3", Plan::Premium, "more", Some(T0))
        .await
        .unwrap();
    let Reservation::Counted { usage, .. } = upgraded else {
        panic!("{upgraded:?}")
    };
    assert_eq!((usage.used, usage.limit, usage.remaining()), (31, 200, 169));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_refunded_unit_is_given_back_once(pool: PgPool) {
    let Reservation::Counted { usage_id, .. } =
        reserve(&pool, "visitor:c", Plan::Anonymous, "q", Some(T0))
            .await
            .unwrap()
    else {
        panic!("not counted")
    };
    quota::refund(&pool, usage_id).await.unwrap();
    quota::refund(&pool, usage_id).await.unwrap();
    let usage = quota::usage(&pool, "visitor:c", Plan::Anonymous, Some(T0))
        .await
        .unwrap();
    assert_eq!(usage.used, 0);
    // A refunded search is no repeat either: running it again counts.
    let again = reserve(&pool, "visitor:c", Plan::Anonymous, "q", Some(T0))
        .await
        .unwrap();
    assert!(matches!(again, Reservation::Counted { .. }));
    let ids: HashSet<i64> = sqlx::query_scalar("SELECT id FROM search_usage")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(ids.len(), 2);
}

#[sqlx::test(migrations = "../migrations")]
async fn concurrent_new_visitors_from_one_network_start_no_more_than_the_cap(pool: PgPool) {
    let rules = quota::Rules {
        new_visitors_per_network_per_day: 3,
        ..quota::Rules::default()
    };
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let payer = quota::Payer {
                    subject: format!("visitor:{i}"),
                    plan: Plan::Anonymous,
                    network: Some("192.0.2.1".into()),
                };
                quota::reserve_for(&pool, &payer, &rules, "q", Some(T0))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut counted = 0;
    for task in tasks {
        match task.await.unwrap() {
            Reservation::Counted { .. } => counted += 1,
            Reservation::NetworkCapped { per_day, .. } => assert_eq!(per_day, 3),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(counted, 3);
    // Another network is not affected; a started visitor keeps going.
    let elsewhere = quota::Payer {
        subject: "visitor:x".into(),
        plan: Plan::Anonymous,
        network: Some("198.51.100.1".into()),
    };
    let outcome = quota::reserve_for(&pool, &elsewhere, &rules, "q", Some(T0)).await;
    assert!(matches!(outcome.unwrap(), Reservation::Counted { .. }));
    let started: Vec<String> =
        sqlx::query_scalar("SELECT subject FROM anonymous_starts WHERE network = '192.0.2.1'")
            .fetch_all(&pool)
            .await
            .unwrap();
    let again = quota::Payer {
        subject: started[0].clone(),
        plan: Plan::Anonymous,
        network: Some("192.0.2.1".into()),
    };
    let outcome = quota::reserve_for(&pool, &again, &rules, "another", Some(T0)).await;
    assert!(matches!(outcome.unwrap(), Reservation::Counted { .. }));
}

#[sqlx::test(migrations = "../migrations")]
async fn ids_banked_on_earlier_days_cannot_burst_past_the_networks_daily_searches(pool: PgPool) {
    let rules = quota::Rules {
        new_visitors_per_network_per_day: 3,
        anonymous_searches_per_network_per_day: 12,
        ..quota::Rules::default()
    };
    let search = |subject: String, key: String, at: &'static str| {
        let pool = pool.clone();
        async move {
            let payer = quota::Payer {
                subject,
                plan: Plan::Anonymous,
                network: Some("2001:db8:7::/48".into()),
            };
            let outcome = quota::reserve_for(&pool, &payer, &rules, &key, Some(at))
                .await
                .unwrap();
            if let Reservation::Counted { usage_id, .. } = outcome {
                assert!(
                    quota::confirm(&pool, usage_id, Plan::Anonymous, None)
                        .await
                        .unwrap()
                );
            }
            outcome
        }
    };
    // Day one: three ids start (one search each) and are kept.
    for id in 0..3 {
        let first = search(format!("visitor:bank{id}"), "start".into(), T0).await;
        assert!(matches!(first, Reservation::Counted { .. }), "{first:?}");
    }
    // Day two: 27 searches left on those ids, 12 a day from this network.
    let day_two = "2026-12-01T11:00:00Z";
    let mut counted = 0;
    for round in 0..9 {
        for id in 0..3 {
            match search(format!("visitor:bank{id}"), format!("q{round}"), day_two).await {
                Reservation::Counted { .. } => counted += 1,
                Reservation::NetworkBusy { per_day, .. } => assert_eq!(per_day, 12),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(counted, 12);
}

#[sqlx::test(migrations = "../migrations")]
async fn a_reservation_whose_search_never_answered_lapses_after_a_minute(pool: PgPool) {
    // The database went away mid-search: neither confirmed nor refunded.
    let lost = quota::reserve(&pool, "visitor:d", Plan::Anonymous, "lost", Some(T0))
        .await
        .unwrap();
    assert!(matches!(lost, Reservation::Counted { .. }));
    reserve(&pool, "visitor:d", Plan::Anonymous, "answered", Some(T0))
        .await
        .unwrap();
    // While it may still be running it counts (so concurrent searches cannot overspend)...
    let now = quota::usage(&pool, "visitor:d", Plan::Anonymous, Some(T0))
        .await
        .unwrap();
    assert_eq!(now.used, 2);
    // ...a minute later only the answered one does, and the lost query is not a "repeat".
    let later = "2026-11-30T10:01:01Z";
    let after = quota::usage(&pool, "visitor:d", Plan::Anonymous, Some(later))
        .await
        .unwrap();
    assert_eq!(after.used, 1);
    let again = quota::reserve(&pool, "visitor:d", Plan::Anonymous, "lost", Some(later))
        .await
        .unwrap();
    assert!(matches!(again, Reservation::Counted { .. }), "{again:?}");
}

/// Moves unit `usage_id` over a minute into the past, as the database's clock sees it: its
/// search has outrun the time a pending unit counts.
async fn lapse(pool: &PgPool, usage_id: i64) {
    sqlx::query(
        "UPDATE search_usage SET counted_at = counted_at - interval '61 seconds' WHERE id = $1",
    )
    .bind(usage_id)
    .execute(pool)
    .await
    .unwrap();
}

/// A search that outran its unit (the database stalled for over a minute): meanwhile the unit
/// stopped counting and the whole allowance was spent again. Its late confirmation must not
/// make it one more than the allowance; it is given back instead (the search is not served).
#[sqlx::test(migrations = "../migrations")]
async fn a_confirmation_after_the_unit_lapsed_rechecks_the_allowance(pool: PgPool) {
    let stalled = quota::reserve(&pool, "visitor:late", Plan::Anonymous, "stalled", None)
        .await
        .unwrap();
    let Reservation::Counted { usage_id, .. } = stalled else {
        panic!("{stalled:?}")
    };
    // Over a minute later, as the clock of the database sees it.
    lapse(&pool, usage_id).await;
    let now: String = sqlx::query_scalar(
        "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    spend(&pool, "visitor:late", Plan::Anonymous, 10, &now).await;
    assert!(
        !quota::confirm(&pool, usage_id, Plan::Anonymous, None)
            .await
            .unwrap()
    );
    let usage = quota::usage(&pool, "visitor:late", Plan::Anonymous, None)
        .await
        .unwrap();
    assert_eq!(usage.used, 10);
    let refunded: bool =
        sqlx::query_scalar("SELECT refunded_at IS NOT NULL FROM search_usage WHERE id = $1")
            .bind(usage_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(refunded);
}

/// A late confirmation that still fits is kept, and confirming twice changes nothing.
#[sqlx::test(migrations = "../migrations")]
async fn a_late_confirmation_that_fits_is_kept_once(pool: PgPool) {
    let stalled = quota::reserve(&pool, "visitor:slow", Plan::Free, "stalled", None)
        .await
        .unwrap();
    let Reservation::Counted { usage_id, .. } = stalled else {
        panic!("{stalled:?}")
    };
    lapse(&pool, usage_id).await;
    assert!(
        quota::confirm(&pool, usage_id, Plan::Free, None)
            .await
            .unwrap()
    );
    assert!(
        quota::confirm(&pool, usage_id, Plan::Free, None)
            .await
            .unwrap()
    );
    let usage = quota::usage(&pool, "visitor:slow", Plan::Free, None)
        .await
        .unwrap();
    assert_eq!(usage.used, 1);
}
