//! How Zenbu talks to OpenAI (or a server speaking its API, such as `fakes::openai`): one client
//! constructor and one chat-request shape shared by the premise writer, the embedder and the
//! reranker.

use std::time::Duration;

use async_openai::{
    Client,
    config::OpenAIConfig,
    error::OpenAIError,
    types::chat::{
        ChatCompletionRequestSystemMessageArgs, ChatCompletionRequestUserMessageArgs,
        CreateChatCompletionRequest, CreateChatCompletionRequestArgs, CreateChatCompletionResponse,
        ReasoningEffort, ResponseFormat,
    },
};

/// A client for `base_url` (OpenAI's when `None`) whose HTTP requests give up after `timeout`.
pub fn client(api_key: &str, base_url: Option<&str>, timeout: Duration) -> Client<OpenAIConfig> {
    let mut config = OpenAIConfig::new().with_api_key(api_key);
    if let Some(base) = base_url {
        config = config.with_api_base(base.trim_end_matches('/'));
    }
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("HTTP client");
    Client::with_config(config).with_http_client(http)
}

/// A chat request as every caller here sends it: instructions as the system message, the prompt
/// as the user message, `reasoning_effort: low`, and never `temperature` (reasoning models reject
/// it).
pub fn chat_request(
    model: &str,
    instructions: &str,
    prompt: String,
    max_tokens: u32,
    response_format: Option<ResponseFormat>,
) -> Result<CreateChatCompletionRequest, OpenAIError> {
    let mut request = CreateChatCompletionRequestArgs::default();
    request
        .model(model)
        .reasoning_effort(ReasoningEffort::Low)
        .max_completion_tokens(max_tokens)
        .messages([
            ChatCompletionRequestSystemMessageArgs::default()
                .content(instructions)
                .build()?
                .into(),
            ChatCompletionRequestUserMessageArgs::default()
                .content(prompt)
                .build()?
                .into(),
        ]);
    if let Some(format) = response_format {
        request.response_format(format);
    }
    request.build()
}

/// The text of the first choice that has any.
pub fn first_text(response: CreateChatCompletionResponse) -> Option<String> {
    response
        .choices
        .into_iter()
        .find_map(|choice| choice.message.content)
}
