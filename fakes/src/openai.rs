//! A fake OpenAI API: `POST /v1/chat/completions` and `POST /v1/embeddings` with OpenAI's
//! request checks, response shapes and error bodies. Reasoning models (`gpt-5*`) refuse `temperature` with a 400, as the real
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
    /// A well-formed completion whose ranking names ids that were not offered, repeats one and
    /// leaves some out.
    WrongIds,
    /// A well-formed completion whose content is not the requested JSON.
    NotJson,
    /// Free text with control characters in it (a NUL among them).
    ControlCharacters,
}

/// How the fake answers embedding requests.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingBehaviour {
    Normal,
    /// An OpenAI error body with this status.
    Status(u16),
    /// Wait this long first (the client should time out).
    Hang(Duration),
    /// A 200 whose body is not JSON.
    MalformedJson,
    /// Vectors of this many dimensions instead of the model's.
    WrongDimension(usize),
    /// One vector fewer than inputs.
    MissingVector,
}

/// Dimension of `text-embedding-3-small`.
pub const EMBEDDING_DIMENSION: usize = 1536;

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
    embedding_behaviour: Mutex<EmbeddingBehaviour>,
    log: Mutex<Vec<ChatRecord>>,
    embedding_inputs: Mutex<usize>,
}

pub struct FakeOpenAi {
    pub addr: SocketAddr,
    state: Arc<FakeState>,
    _server: super::Served,
}

impl FakeOpenAi {
    pub async fn start(api_key: &str) -> std::io::Result<Self> {
        Self::start_on(api_key, "127.0.0.1:0".parse().expect("a socket address")).await
    }

    /// [`start`](Self::start) on a chosen address (`fakes openai`).
    pub async fn start_on(api_key: &str, addr: SocketAddr) -> std::io::Result<Self> {
        let state = Arc::new(FakeState {
            api_key: api_key.into(),
            behaviour: Mutex::new(ChatBehaviour::Normal),
            embedding_behaviour: Mutex::new(EmbeddingBehaviour::Normal),
            log: Mutex::default(),
            embedding_inputs: Mutex::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .route("/_fake/behaviour", post(set_behaviours))
            .with_state(state.clone());
        let server = super::serve(app, addr).await?;
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

    pub fn set_embedding_behaviour(&self, behaviour: EmbeddingBehaviour) {
        *self.state.embedding_behaviour.lock().unwrap() = behaviour;
    }

    /// Texts embedded so far (successful requests only).
    pub fn embedded_inputs(&self) -> usize {
        *self.state.embedding_inputs.lock().unwrap()
    }

    pub fn requests(&self) -> Vec<ChatRecord> {
        self.state.log.lock().unwrap().clone()
    }
}

/// `POST /_fake/behaviour {"embeddings": "normal|hang|error", "chat": "normal|hang|error"}`:
/// switches the fake's behaviour from outside the process (fault-injection runs); "hang" waits
/// a minute, "error" answers 500.
async fn set_behaviours(
    State(state): State<Arc<FakeState>>,
    Json(body): Json<Value>,
) -> StatusCode {
    let pick = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
    if let Some(embeddings) = pick("embeddings") {
        *state.embedding_behaviour.lock().unwrap() = match embeddings.as_str() {
            "hang" => EmbeddingBehaviour::Hang(Duration::from_secs(60)),
            "error" => EmbeddingBehaviour::Status(500),
            _ => EmbeddingBehaviour::Normal,
        };
    }
    if let Some(chat) = pick("chat") {
        *state.behaviour.lock().unwrap() = match chat.as_str() {
            "hang" => ChatBehaviour::Hang(Duration::from_secs(60)),
            "error" => ChatBehaviour::Status(500),
            _ => ChatBehaviour::Normal,
        };
    }
    StatusCode::NO_CONTENT
}

/// An error as OpenAI answers one: a status and an `error` object.
struct ApiError {
    status: StatusCode,
    body: Value,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

fn error(
    status: StatusCode,
    message: &str,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> ApiError {
    let body =
        json!({ "error": { "message": message, "type": kind, "param": param, "code": code } });
    ApiError { status, body }
}

fn authorised(state: &FakeState, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value == format!("Bearer {}", state.api_key))
}

fn invalid_api_key() -> ApiError {
    error(
        StatusCode::UNAUTHORIZED,
        "Incorrect API key provided.",
        "invalid_request_error",
        None,
        Some("invalid_api_key"),
    )
}

fn unparsable_body() -> ApiError {
    invalid_request("We could not parse the JSON body of your request.", None)
}

/// A 400 `invalid_request_error` about `param`.
fn invalid_request(message: &str, param: Option<&str>) -> ApiError {
    error(
        StatusCode::BAD_REQUEST,
        message,
        "invalid_request_error",
        param,
        None,
    )
}

fn server_error(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error(
        status,
        "The server had an error while processing your request.",
        "server_error",
        None,
        None,
    )
    .into_response()
}

/// `POST /v1/embeddings`: `text-embedding-3-small` only, `input` a string or an array of 1 to
/// 2,048 non-empty strings. Vectors are deterministic: each word adds to a few hashed
/// dimensions, so texts sharing words point the same way.
async fn embeddings(
    State(state): State<Arc<FakeState>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let request = match read_embedding_request(&state, &headers, &body) {
        Ok(request) => request,
        Err(refusal) => return refusal.into_response(),
    };
    let behaviour = state.embedding_behaviour.lock().unwrap().clone();
    let mut dimension = EMBEDDING_DIMENSION;
    let mut count = request.inputs.len();
    match behaviour {
        EmbeddingBehaviour::Status(code) => return server_error(code),
        EmbeddingBehaviour::Hang(duration) => tokio::time::sleep(duration).await,
        EmbeddingBehaviour::MalformedJson => {
            return (StatusCode::OK, "{\"object\": \"list\", \"data\": [").into_response();
        }
        EmbeddingBehaviour::WrongDimension(d) => dimension = d,
        EmbeddingBehaviour::MissingVector => count -= 1,
        EmbeddingBehaviour::Normal => {}
    }
    *state.embedding_inputs.lock().unwrap() += request.inputs.len();
    let data: Vec<Value> = request
        .inputs
        .iter()
        .take(count)
        .enumerate()
        .map(|(index, text)| {
            json!({ "object": "embedding", "index": index, "embedding": hashed_vector(text, dimension) })
        })
        .collect();
    let tokens: usize = request
        .inputs
        .iter()
        .map(|t| t.split_whitespace().count())
        .sum();
    let response = json!({
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens }
    });
    (StatusCode::OK, Json(response)).into_response()
}

/// What an embedding request asks for, once it passed OpenAI's checks.
struct EmbeddingRequest {
    model: String,
    inputs: Vec<String>,
}

/// The request, or the error OpenAI answers it with: a wrong key, a body that is not JSON,
/// another model, or inputs that are missing, empty or too many.
fn read_embedding_request(
    state: &FakeState,
    headers: &HeaderMap,
    body: &str,
) -> Result<EmbeddingRequest, ApiError> {
    if !authorised(state, headers) {
        return Err(invalid_api_key());
    }
    let Ok(request) = serde_json::from_str::<Value>(body) else {
        return Err(unparsable_body());
    };
    let model = request["model"].as_str().unwrap_or_default();
    if model != "text-embedding-3-small" {
        return Err(error(
            StatusCode::NOT_FOUND,
            &format!("The model `{model}` does not exist or you do not have access to it."),
            "invalid_request_error",
            Some("model"),
            Some("model_not_found"),
        ));
    }
    let inputs: Vec<String> = match &request["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    if inputs.is_empty() || inputs.len() > 2048 || inputs.iter().any(|t| t.is_empty()) {
        return Err(invalid_request(
            "'input' must be a non-empty string or an array of 1 to 2048 non-empty strings.",
            Some("input"),
        ));
    }
    Ok(EmbeddingRequest {
        model: model.to_string(),
        inputs,
    })
}

/// A unit vector from the text's lower-cased words (FNV-1a hashed into `dimension` slots).
pub fn hashed_vector(text: &str, dimension: usize) -> Vec<f32> {
    let mut v = vec![0f32; dimension.max(1)];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut hash: u64 = 0xcbf29ce484222325;
        for byte in word.to_lowercase().bytes() {
            hash = (hash ^ byte as u64).wrapping_mul(0x100000001b3);
        }
        let slot = (hash % v.len() as u64) as usize;
        v[slot] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    } else {
        v[0] = 1.0;
    }
    v
}

/// `POST /v1/chat/completions`: answers from the request (a ranking of the candidates for a
/// structured rerank request, else a premise), or fails the way the behaviour says. Every
/// request is logged with the status it got.
async fn chat(State(state): State<Arc<FakeState>>, headers: HeaderMap, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let (status, response) = chat_answer(&state, &headers, &request).await;
    state.log.lock().unwrap().push(ChatRecord {
        model: request["model"].as_str().unwrap_or_default().to_string(),
        body: request,
        status,
    });
    response
}

/// The response to a chat request and the status to log for it.
async fn chat_answer(state: &FakeState, headers: &HeaderMap, request: &Value) -> (u16, Response) {
    let refused = |response: Response| (response.status().as_u16(), response);
    if let Err(refusal) = check_chat_request(authorised(state, headers), request) {
        return refused(refusal.into_response());
    }
    let behaviour = state.behaviour.lock().unwrap().clone();
    match behaviour {
        ChatBehaviour::Status(code) => return (code, server_error(code)),
        ChatBehaviour::Hang(duration) => tokio::time::sleep(duration).await,
        ChatBehaviour::MalformedJson => {
            let cut_short = "{\"id\": \"chatcmpl-fake\", \"choices\": [";
            return (200, (StatusCode::OK, cut_short).into_response());
        }
        ChatBehaviour::Normal
        | ChatBehaviour::WrongIds
        | ChatBehaviour::NotJson
        | ChatBehaviour::ControlCharacters => {}
    }
    if let Err(refusal) = check_chat_options(request) {
        return refused(refusal.into_response());
    }
    let model = request["model"].as_str().unwrap_or_default();
    let completion = completion(model, &chat_content(request, &behaviour));
    (200, (StatusCode::OK, Json(completion)).into_response())
}

/// OpenAI's checks before anything else: the key, a JSON body, a model and messages, and no
/// `temperature` for a reasoning model.
fn check_chat_request(authorised: bool, request: &Value) -> Result<(), ApiError> {
    if !authorised {
        return Err(invalid_api_key());
    }
    if request.is_null() {
        return Err(unparsable_body());
    }
    let model = request["model"].as_str().unwrap_or_default();
    if model.is_empty() || request["messages"].as_array().is_none_or(|m| m.is_empty()) {
        return Err(invalid_request(
            "'model' and a non-empty 'messages' are required.",
            Some("messages"),
        ));
    }
    if model.starts_with("gpt-5") && request.get("temperature").is_some() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "invalid_request_error",
            Some("temperature"),
            Some("unsupported_parameter"),
        ));
    }
    Ok(())
}

/// The checks of the options a rerank request uses: a structured-output schema fit for the
/// ranking, and a known `reasoning_effort`.
fn check_chat_options(request: &Value) -> Result<(), ApiError> {
    let structured = request["response_format"]["type"] == "json_schema";
    if structured && let Err(problem) = check_ranking_schema(&request["response_format"]) {
        return Err(invalid_request(
            &format!("Invalid schema for response_format: {problem}"),
            Some("response_format"),
        ));
    }
    if let Some(effort) = request.get("reasoning_effort")
        && !["minimal", "low", "medium", "high"].contains(&effort.as_str().unwrap_or_default())
    {
        return Err(invalid_request(
            "Invalid value for 'reasoning_effort'.",
            Some("reasoning_effort"),
        ));
    }
    Ok(())
}

/// The assistant's message: the ranking as JSON when structured output was asked for, else the
/// premise; spoilt the way `behaviour` says.
fn chat_content(request: &Value, behaviour: &ChatBehaviour) -> String {
    let structured = request["response_format"]["type"] == "json_schema";
    if structured {
        match behaviour {
            ChatBehaviour::NotJson => "Here is my ranking: the first one.".to_string(),
            ChatBehaviour::WrongIds => {
                let mut ids = ranking_for(request);
                ids.truncate(ids.len() / 2);
                if let Some(&first) = ids.first() {
                    ids.push(first);
                }
                ids.insert(0, 999_999_999);
                json!({ "ids": ids }).to_string()
            }
            _ => json!({ "ids": ranking_for(request) }).to_string(),
        }
    } else if *behaviour == ChatBehaviour::ControlCharacters {
        format!(
            "\u{0}{}\u{7}\u{1b}",
            answer_for(request).replace(' ', "\u{0} ")
        )
    } else {
        answer_for(request)
    }
}

/// A chat completion object carrying `content`.
fn completion(model: &str, content: &str) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": content, "refusal": null },
            "finish_reason": "stop",
            "logprobs": null
        }],
        "usage": { "prompt_tokens": 100, "completion_tokens": 30, "total_tokens": 130 }
    })
}

/// The rerank answer's schema must be what structured output needs: a strict object schema with
/// an `ids` array of integers, no other properties.
fn check_ranking_schema(format: &Value) -> Result<(), &'static str> {
    let schema = &format["json_schema"];
    if schema["name"].as_str().is_none_or(str::is_empty) {
        return Err("'name' is required");
    }
    if schema["strict"] != true {
        return Err("this fake expects strict: true");
    }
    let body = &schema["schema"];
    if body["type"] != "object" || body["additionalProperties"] != false {
        return Err("the schema must be an object with additionalProperties false");
    }
    if body["properties"]["ids"]["type"] != "array"
        || body["properties"]["ids"]["items"]["type"] != "integer"
    {
        return Err("'ids' must be an array of integers");
    }
    if !body["required"]
        .as_array()
        .is_some_and(|r| r.iter().any(|v| v == "ids"))
    {
        return Err("'ids' must be required");
    }
    Ok(())
}

/// A deterministic ranking of the candidate lines (`id: summary`) of the last user message:
/// by how many of the description's words each summary shares, ties in reverse of the given
/// order (so a page that follows the model visibly differs from the fused order).
fn ranking_for(request: &Value) -> Vec<i64> {
    let user = request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() > 3)
            .map(str::to_lowercase)
            .collect()
    };
    let description = user
        .lines()
        .find_map(|line| line.strip_prefix("Description: "))
        .map(words)
        .unwrap_or_default();
    let mut candidates: Vec<(i64, usize)> = user
        .lines()
        .filter_map(|line| {
            let (id, summary) = line.split_once(": ")?;
            let id: i64 = id.trim().parse().ok()?;
            let shared = words(summary)
                .iter()
                .filter(|w| description.contains(w))
                .count();
            Some((id, shared))
        })
        .collect();
    candidates.reverse();
    candidates.sort_by_key(|c| std::cmp::Reverse(c.1));
    candidates.into_iter().map(|(id, _)| id).collect()
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
