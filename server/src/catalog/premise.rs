//! Franchise premises written by an LLM (OpenAI chat completions through async-openai), used
//! when `OPENAI_API_KEY` is set. A premise is generated once per franchise, model and inputs
//! hash and stored; when the model fails, the franchise gets the local premise instead (counted
//! in the report) and the next ingest tries again.

use std::time::Duration;

use async_openai::{Client, config::OpenAIConfig};

use super::franchise::{PREMISE_MAX_CHARS, lead_sentences};

/// How much of each member's synopsis the model sees.
const SYNOPSIS_CHARS: usize = 1_200;
/// At most this many members' synopses go out (the earliest ones).
const MAX_MEMBERS: usize = 5;

const INSTRUCTIONS: &str = "You write the premise of an anime franchise for a search index. \
Answer with two or three plain sentences in English, at most 300 characters: who the story is \
about, the situation, what drives it. No spoilers beyond the first episodes, no episode or season \
numbers, no praise, no title. Use only facts from the synopses given.";

#[derive(Debug, thiserror::Error)]
pub enum PremiseError {
    #[error("OpenAI request failed: {0}")]
    Api(#[from] async_openai::error::OpenAIError),
    #[error("the model answered with no text")]
    Empty,
    #[error("timed out after {0:?}")]
    Timeout(Duration),
}

#[derive(Clone)]
pub struct LlmPremiser {
    client: Client<OpenAIConfig>,
    model: String,
    timeout: Duration,
}

impl LlmPremiser {
    pub fn new(api_key: &str, base_url: Option<&str>, model: &str, timeout: Duration) -> Self {
        Self {
            client: crate::openai::client(api_key, base_url, timeout),
            model: model.into(),
            timeout,
        }
    }

    /// Name stored with the premises it writes.
    pub fn generator(&self) -> String {
        format!("openai:{}", self.model)
    }

    /// Asks the model for the premise of the franchise rooted at `root_title`, from its
    /// members' `(title, synopsis)` in airing order.
    pub async fn premise(
        &self,
        root_title: &str,
        members: &[(String, String)],
    ) -> Result<String, PremiseError> {
        let mut prompt = format!("Franchise: {root_title}\n\nSynopses, earliest first:\n");
        for (title, synopsis) in members
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .take(MAX_MEMBERS)
        {
            let synopsis: String = synopsis.chars().take(SYNOPSIS_CHARS).collect();
            prompt.push_str(&format!("- {title}: {synopsis}\n"));
        }
        // Reasoning models take `reasoning_effort` and reject `temperature`: never send it.
        let request = crate::openai::chat_request(&self.model, INSTRUCTIONS, prompt, 400, None)?;
        let response = tokio::time::timeout(self.timeout, self.client.chat().create(request))
            .await
            .map_err(|_| PremiseError::Timeout(self.timeout))??;
        let text = crate::openai::first_text(response)
            // A model's text is input too: control characters (a NUL would fail the whole
            // document rebuild in PostgreSQL) count as spaces.
            .map(|text| super::document::collapse_whitespace(&text))
            .filter(|text| !text.is_empty())
            .ok_or(PremiseError::Empty)?;
        Ok(lead_sentences(&text, PREMISE_MAX_CHARS))
    }
}
