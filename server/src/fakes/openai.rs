//! A fake OpenAI API: `POST /v1/chat/completions` with OpenAI's request checks, response shape
//! and error bodies. Reasoning models (`gpt-5*`) refuse `temperature` with a 400, as the real
//! API does. It answers deterministically from the request (the first sentence of the first
//! synopsis line of the user message), records every request, and can be told to fail.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

/// How the fake answers chat completions.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatBehaviour {
    Normal,
    /// An OpenAI error body with this status.
    Status(u16),
    /// Wait this long first (the client should time out).
    Hang(Duration),
    /// A 200 whose body is not JSON.
    MalformedJson,
}

/// One chat request as the fake saw it.
#[derive(Debug, Clone)]
pub struct ChatRecord {
    pub model: String,
    pub body: Value,
    pub status: u16,
}

struct FakeState {
    api_key: String,
    behaviour: Mutex<ChatBehaviour>,
    log: Mutex<Vec<ChatRecord>>,
}

pub struct FakeOpenAi {
    pub addr: SocketAddr,
    state: Arc<FakeState>,
    _server: super::Served,
}

impl FakeOpenAi {
    pub async fn start(api_key: &str) -> std::io::Result<Self> {
        let state = Arc::new(FakeState {
            api_key: api_key.into(),
            behaviour: Mutex::new(ChatBehaviour::Normal),
            log: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(state.clone());
        let server = super::serve(app, "127.0.0.1:0".parse().expect("a socket address")).await?;
        Ok(Self {
            addr: server.addr,
            state,
            _server: server,
        })
    }

    /// The base URL to configure (`OPENAI_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set_behaviour(&self, behaviour: ChatBehaviour) {
        *self.state.behaviour.lock().unwrap() = behaviour;
    }

    pub fn requests(&self) -> Vec<ChatRecord> {
        self.state.log.lock().unwrap().clone()
    }
}

fn error(
    status: StatusCode,
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Response {
    let body =
        json!({ "error": { "message": message, "type": kind, "param": param, "code": code } });
    (status, Json(body)).into_response()
}

async fn chat(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: String) -> Response {
    let authorised = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value == format!("Bearer {}", state.api_key));
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_string();
    let respond = |status: u16, response: Response| {
        state.log.lock().unwrap().push(ChatRecord {
            model: model.clone(),
            body: request.clone(),
            status,
        });
        response
    };
    if !authorised {
        return respond(
            401,
            error(
                StatusCode::UNAUTHORIZED,
                "Incorrect API key provided.",
                "invalid_request_error",
                None,
                Some("invalid_api_key"),
            ),
        );
    }
    if request.is_null() {
        return respond(
            400,
            error(
                StatusCode::BAD_REQUEST,
                "We could not parse the JSON body of your request.",
                "invalid_request_error",
                None,
                None,
            ),
        );
    }
    if model.is_empty() || request["messages"].as_array().is_none_or(|m| m.is_empty()) {
        return respond(
            400,
            error(
                StatusCode::BAD_REQUEST,
                "'model' and a non-empty 'messages' are required.",
                "invalid_request_error",
                Some("messages"),
                None,
            ),
        );
    }
    if model.starts_with("gpt-5") && request.get("temperature").is_some() {
        return respond(
            400,
            error(
                StatusCode::BAD_REQUEST,
                "Unsupported parameter: 'temperature' is not supported with this model.",
                "invalid_request_error",
                Some("temperature"),
                Some("unsupported_parameter"),
            ),
        );
    }
    let behaviour = state.behaviour.lock().unwrap().clone();
    match behaviour {
        ChatBehaviour::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return respond(
                code,
                error(
                    status,
                    "The server had an error while processing your request.",
                    "server_error",
                    None,
                    None,
                ),
            );
        }
        ChatBehaviour::Hang(duration) => tokio::time::sleep(duration).await,
        ChatBehaviour::MalformedJson => {
            return respond(
                200,
                (StatusCode::OK, "{\"id\": \"chatcmpl-fake\", \"choices\": [").into_response(),
            );
        }
        ChatBehaviour::Normal => {}
    }
    let answer = answer_for(&request);
    let response = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": answer, "refusal": null },
            "finish_reason": "stop",
            "logprobs": null
        }],
        "usage": { "prompt_tokens": 100, "completion_tokens": 30, "total_tokens": 130 }
    });
    respond(200, (StatusCode::OK, Json(response)).into_response())
}

/// A deterministic "premise": the first sentence of the first synopsis line ("- Title: text").
fn answer_for(request: &Value) -> String {
    let user = request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let synopsis = user
        .lines()
        .find_map(|line| {
            line.strip_prefix("- ")
                .and_then(|rest| rest.split_once(": "))
                .map(|(_, s)| s)
        })
        .unwrap_or("A story.");
    let first = synopsis
        .split_inclusive(['.', '!', '?'])
        .next()
        .unwrap_or(synopsis)
        .trim();
    format!("(fake model) {first}")
}
