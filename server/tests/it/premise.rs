//! LLM-written franchise premises through async-openai against the fake OpenAI server.

use crate::common::{MOB_PSYCHO_III, MODEL, document};
use std::time::Duration;

use fakes::openai::{ChatBehaviour, FakeOpenAi};
use server::catalog::{self, LlmPremiser, import};
use sqlx::PgPool;

const KEY: &str = "sk-test";

fn premiser(fake: &FakeOpenAi, timeout: Duration) -> LlmPremiser {
    LlmPremiser::new(KEY, Some(&fake.base_url()), "gpt-5.4-mini", timeout)
}

#[sqlx::test(migrations = "../migrations")]
async fn llm_premises_are_written_once_and_go_in_front_of_sequels(pool: PgPool) {
    let fake = FakeOpenAi::start(KEY).await.unwrap();
    let llm = premiser(&fake, Duration::from_secs(10));
    let demo = import::demo_catalog();
    let report = catalog::ingest(&pool, &demo, false, MODEL, Some(&llm), None)
        .await
        .unwrap();
    let franchises = report.documents.franchises;
    assert_eq!(report.documents.premise_fallbacks, 0);
    assert_eq!(report.documents.franchises_with_premise, franchises);
    assert_eq!(fake.requests().len(), franchises);
    for request in fake.requests() {
        assert_eq!(request.status, 200);
        assert_eq!(request.model, "gpt-5.4-mini");
        assert_eq!(request.body["reasoning_effort"], "low");
        assert!(request.body.get("temperature").is_none());
    }
    let mob = document(&pool, MOB_PSYCHO_III).await;
    assert!(
        mob.starts_with("Series premise (Mob Psycho 100): (fake model) "),
        "{mob}"
    );
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM franchise_premises WHERE generator = 'openai:gpt-5.4-mini'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stored as usize, franchises);

    // Unchanged catalog: no new request, no new premise, no document rewritten.
    let again = catalog::ingest(&pool, &demo, false, MODEL, Some(&llm), None)
        .await
        .unwrap();
    assert_eq!(fake.requests().len(), franchises);
    assert_eq!(
        (
            again.documents.premises_created,
            again.documents.documents_written
        ),
        (0, 0)
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn a_failing_model_falls_back_to_local_premises_and_is_retried_next_time(pool: PgPool) {
    let fake = FakeOpenAi::start(KEY).await.unwrap();
    let llm = premiser(&fake, Duration::from_millis(300));
    let demo = import::demo_catalog();
    for behaviour in [
        ChatBehaviour::Status(500),
        ChatBehaviour::Hang(Duration::from_secs(5)),
        ChatBehaviour::MalformedJson,
    ] {
        fake.set_behaviour(behaviour.clone());
        let report = catalog::ingest(&pool, &demo, false, MODEL, Some(&llm), None)
            .await
            .unwrap();
        assert_eq!(
            report.documents.premise_fallbacks, report.documents.franchises,
            "{behaviour:?}"
        );
        assert_eq!(
            report.documents.franchises_with_premise,
            report.documents.franchises
        );
        let mob = document(&pool, MOB_PSYCHO_III).await;
        assert!(
            mob.starts_with("Series premise (Mob Psycho 100): "),
            "{mob}"
        );
        assert!(!mob.contains("(fake model)"), "{behaviour:?}: {mob}");
    }
    // The model is back: the LLM premises are made now and the documents follow.
    fake.set_behaviour(ChatBehaviour::Normal);
    let report = catalog::ingest(&pool, &demo, false, MODEL, Some(&llm), None)
        .await
        .unwrap();
    assert_eq!(report.documents.premise_fallbacks, 0);
    assert!(report.documents.documents_written > 0);
    assert!(
        document(&pool, MOB_PSYCHO_III)
            .await
            .contains("(fake model)")
    );
}

#[tokio::test]
async fn the_fake_refuses_temperature_for_reasoning_models_and_a_wrong_key() {
    let fake = FakeOpenAi::start(KEY).await.unwrap();
    let url = format!("{}/chat/completions", fake.base_url());
    let body = serde_json::json!({
        "model": "gpt-5.4-mini", "temperature": 0.2,
        "messages": [{"role": "user", "content": "hi"}]
    });
    let client = reqwest::Client::new();
    let response = client
        .post(&url)
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"]["param"], "temperature");
    let response = client
        .post(&url)
        .bearer_auth("sk-wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

/// A model's text is input like any other: control characters in it (a NUL would fail the
/// whole document rebuild in PostgreSQL) are spaces by the time a premise is stored.
#[sqlx::test(migrations = "../migrations")]
async fn control_characters_from_the_model_do_not_reach_premises(pool: PgPool) {
    let fake = FakeOpenAi::start(KEY).await.unwrap();
    fake.set_behaviour(fakes::openai::ChatBehaviour::ControlCharacters);
    let llm = premiser(&fake, Duration::from_secs(10));
    let report = catalog::ingest(
        &pool,
        &import::demo_catalog(),
        false,
        MODEL,
        Some(&llm),
        None,
    )
    .await
    .unwrap();
    assert_eq!(report.documents.premise_fallbacks, 0);
    let mob = document(&pool, MOB_PSYCHO_III).await;
    assert!(
        mob.starts_with("Series premise (Mob Psycho 100): (fake model) "),
        "{mob:?}"
    );
    assert!(!mob.chars().any(char::is_control), "{mob:?}");
}
