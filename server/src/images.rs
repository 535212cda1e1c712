//! Posters through the site's own address: `/img/anime/{id}/cover` answers with AniList's
//! poster, fetched once and kept on disk. Pages never point visitors at a third party (who would
//! see every visitor's address and the pages they read), and a slow or broken image host never
//! breaks a page: whatever goes wrong, the answer is a placeholder in the poster's colour with
//! the title's initials.
//!
//! Bounded: only hosts in the allowed list are fetched (the URL comes from AniList's data, so a
//! poisoned catalog cannot make the server fetch internal addresses), at most [`MAX_BYTES`],
//! within [`FETCH_TIMEOUT`], a few at a time, and only JPEG, PNG, GIF or WebP by their first
//! bytes (never SVG: it could run script on this origin). A failed fetch is not retried for
//! [`RETRY_AFTER`].

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tokio::sync::Semaphore;

/// The largest poster accepted (AniList's extraLarge covers are ~100–300 KB).
pub const MAX_BYTES: usize = 2 * 1024 * 1024;
/// Time one upstream fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a failed fetch is remembered (the placeholder is served meanwhile).
pub const RETRY_AFTER: Duration = Duration::from_secs(600);
/// Upstream fetches at once.
const FETCHES: usize = 4;
/// The path a card's poster is served at.
pub fn cover_path(id: i32) -> String {
    format!("/img/anime/{id}/cover")
}

/// What `/img/anime/{id}/cover` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poster {
    /// The poster's bytes and their type.
    Image {
        bytes: Arc<Vec<u8>>,
        content_type: &'static str,
    },
    /// No poster, or it could not be had: an SVG block in the poster's colour with initials.
    Placeholder(String),
    /// No such anime.
    Unknown,
}

#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("host not allowed: {0}")]
    HostNotAllowed(String),
    #[error("not an http(s) URL")]
    BadUrl,
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("upstream answered {0}")]
    Status(u16),
    #[error("larger than {MAX_BYTES} bytes")]
    TooLarge,
    #[error("not a JPEG, PNG, GIF or WebP image")]
    NotAnImage,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What the poster route reads of an anime.
#[derive(sqlx::FromRow)]
struct PosterRow {
    #[sqlx(rename = "cover_url")]
    url: Option<String>,
    #[sqlx(rename = "cover_color")]
    color: Option<String>,
    #[sqlx(rename = "title_romaji")]
    romaji: Option<String>,
    #[sqlx(rename = "title_english")]
    english: Option<String>,
}

/// The poster service: allowed hosts, the disk cache, recent failures.
#[derive(Clone)]
pub struct Images {
    client: reqwest::Client,
    cache_dir: PathBuf,
    hosts: Arc<Vec<String>>,
    fetches: Arc<Semaphore>,
    failed: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Images {
    /// `hosts`: the image hosts that may be fetched (`host` or `host:port`); `cache_dir`: where
    /// fetched posters are kept.
    pub fn new(cache_dir: PathBuf, hosts: Vec<String>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client with a timeout and no redirects");
        Self {
            client,
            cache_dir,
            hosts: Arc::new(hosts.into_iter().map(|h| h.trim().to_lowercase()).collect()),
            fetches: Arc::new(Semaphore::new(FETCHES)),
            failed: Arc::default(),
        }
    }

    /// The poster of anime `id` (see [`Poster`]).
    pub async fn cover(&self, pool: &PgPool, id: i32) -> Result<Poster, sqlx::Error> {
        let row: Option<PosterRow> = sqlx::query_as(
            "SELECT cover_url, cover_color, title_romaji, title_english FROM anime WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(pool)
        .await?;
        let Some(PosterRow {
            url,
            color,
            romaji,
            english,
        }) = row
        else {
            return Ok(Poster::Unknown);
        };
        let card = app::search::AnimeCard {
            id,
            title: romaji.or(english).unwrap_or_default(),
            english_title: None,
            year: None,
            format: None,
            genres: Vec::new(),
            snippet: String::new(),
            cover: None,
            color: color.as_deref().and_then(app::search::safe_color),
        };
        let placeholder = || Poster::Placeholder(placeholder_svg(&card));
        let Some(url) = url else {
            return Ok(placeholder());
        };
        match self.image(&url).await {
            Ok((bytes, content_type)) => Ok(Poster::Image {
                bytes,
                content_type,
            }),
            Err(error) => {
                tracing::warn!(anime = id, url = ?url, %error, "poster not served: placeholder instead");
                Ok(placeholder())
            }
        }
    }

    /// The image at `url`: from the disk cache, else fetched (and kept).
    async fn image(&self, url: &str) -> Result<(Arc<Vec<u8>>, &'static str), FetchError> {
        let file = self
            .cache_dir
            .join(hex::encode(Sha256::digest(url.as_bytes())));
        if let Ok(bytes) = tokio::fs::read(&file).await
            && let Some(content_type) = image_type(&bytes)
        {
            return Ok((Arc::new(bytes), content_type));
        }
        let recently_failed = self
            .failed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(url)
            .is_some_and(|at| at.elapsed() < RETRY_AFTER);
        if recently_failed {
            return Err(FetchError::Status(0));
        }
        let bytes = match self.fetch(url).await {
            Ok(bytes) => bytes,
            Err(error) => {
                let mut failed = self
                    .failed
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                failed.retain(|_, at| at.elapsed() < RETRY_AFTER);
                failed.insert(url.to_string(), Instant::now());
                return Err(error);
            }
        };
        let content_type = image_type(&bytes).ok_or(FetchError::NotAnImage)?;
        // Written whole under another name, then renamed: a reader never sees half.
        tokio::fs::create_dir_all(&self.cache_dir).await?;
        let partial = file.with_extension(format!("part{}", std::process::id()));
        tokio::fs::write(&partial, &bytes).await?;
        tokio::fs::rename(&partial, &file).await?;
        Ok((Arc::new(bytes), content_type))
    }

    async fn fetch(&self, url: &str) -> Result<Vec<u8>, FetchError> {
        let parsed = reqwest::Url::parse(url).map_err(|_| FetchError::BadUrl)?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(FetchError::BadUrl);
        }
        let host = match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => return Err(FetchError::BadUrl),
        }
        .to_lowercase();
        if !self.hosts.contains(&host) {
            return Err(FetchError::HostNotAllowed(host));
        }
        let _permit = self
            .fetches
            .acquire()
            .await
            .expect("the semaphore stays open");
        let mut response = self.client.get(parsed).send().await?;
        if !response.status().is_success() {
            return Err(FetchError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|length| length > MAX_BYTES as u64)
        {
            return Err(FetchError::TooLarge);
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if bytes.len() + chunk.len() > MAX_BYTES {
                return Err(FetchError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        image_type(&bytes).ok_or(FetchError::NotAnImage)?;
        Ok(bytes)
    }
}

/// The type of an image by its first bytes: JPEG, PNG, GIF or WebP, else none.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, ..] => Some("image/png"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Some("image/webp"),
        _ => None,
    }
}

/// The placeholder: the card's colour, its initials, at AniList's poster ratio. Both come from
/// checked values (a `#rrggbb` colour, letters escaped), never raw catalog text.
fn placeholder_svg(card: &app::search::AnimeCard) -> String {
    let initials = html_escape::encode_text(&card.initials()).into_owned();
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="230" height="326" viewBox="0 0 230 326"><rect width="230" height="326" fill="{}"/><text x="115" y="185" font-family="sans-serif" font-size="72" text-anchor="middle" fill="#ffffff">{initials}</text></svg>"##,
        card.block_color()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_first_bytes_and_nothing_else_passes() {
        assert_eq!(image_type(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(image_type(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(image_type(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(
            image_type(b"<svg xmlns=\"http://www.w3.org/2000/svg\">"),
            None
        );
        assert_eq!(image_type(b"<html>"), None);
        assert_eq!(image_type(b""), None);
    }
}
