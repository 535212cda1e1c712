//! The search contract between pages and server: what a search asks for and what comes back.
//! Plain data (serde) so it crosses the server-function boundary; the server fills it in.

use serde::{Deserialize, Serialize};

/// Longest description the search accepts (characters); longer input is refused with a clear
/// error, not cut silently.
pub const MAX_QUERY_CHARS: usize = 1_000;

/// Narrowing applied inside both retrieval branches, before fusion.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Filters {
    /// AniList format codes (`TV`, `MOVIE`, …); empty: any.
    pub formats: Vec<String>,
    pub year_from: Option<i32>,
    pub year_to: Option<i32>,
    /// Every listed genre must be present; empty: any.
    pub genres: Vec<String>,
}

/// AniList formats offered as a filter.
pub const FORMATS: [&str; 7] = ["TV", "MOVIE", "OVA", "ONA", "SPECIAL", "TV_SHORT", "MUSIC"];

/// AniList's genres.
pub const GENRES: [&str; 18] = [
    "Action",
    "Adventure",
    "Comedy",
    "Drama",
    "Ecchi",
    "Fantasy",
    "Horror",
    "Mahou Shoujo",
    "Mecha",
    "Music",
    "Mystery",
    "Psychological",
    "Romance",
    "Sci-Fi",
    "Slice of Life",
    "Sports",
    "Supernatural",
    "Thriller",
];

impl Filters {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// What is wrong with these filters, if anything: a format or genre that is not one of
    /// [`FORMATS`] or [`GENRES`] (filters arrive from URLs and server-function calls, and go
    /// into SQL as parameters), a year outside [`YEARS`], or a range that ends before it
    /// starts. Such a search is refused, never run with the filter dropped: it would be
    /// charged for results the visitor did not ask for.
    pub fn problem(&self) -> Option<FilterProblem> {
        if let Some(format) = self.formats.iter().find(|f| !FORMATS.contains(&f.as_str())) {
            return Some(FilterProblem::UnknownFormat(format.clone()));
        }
        if let Some(genre) = self.genres.iter().find(|g| !GENRES.contains(&g.as_str())) {
            return Some(FilterProblem::UnknownGenre(genre.clone()));
        }
        if let Some(year) = [self.year_from, self.year_to]
            .into_iter()
            .flatten()
            .find(|y| !YEARS.contains(y))
        {
            return Some(FilterProblem::BadYear(year.to_string()));
        }
        match (self.year_from, self.year_to) {
            (Some(from), Some(to)) if from > to => Some(FilterProblem::YearsReversed { from, to }),
            _ => None,
        }
    }
}

/// Years a filter may name.
pub const YEARS: std::ops::RangeInclusive<i32> = 1900..=2100;

/// Why a search's filters were refused (HTTP 400; nothing is charged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterProblem {
    UnknownFormat(String),
    UnknownGenre(String),
    /// Not a whole number in [`YEARS`] (as written in the link).
    BadYear(String),
    YearsReversed {
        from: i32,
        to: i32,
    },
}

impl std::fmt::Display for FilterProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FilterProblem::UnknownFormat(value) => write!(f, "unknown format {value:?}"),
            FilterProblem::UnknownGenre(value) => write!(f, "unknown genre {value:?}"),
            FilterProblem::BadYear(value) => write!(
                f,
                "the year {value:?} is not one from {} to {}",
                YEARS.start(),
                YEARS.end()
            ),
            FilterProblem::YearsReversed { from, to } => {
                write!(f, "the years run backwards (from {from} to {to})")
            }
        }
    }
}

/// Which retrieval branch found a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Branch {
    /// Full text or title trigram match only.
    Lexical,
    /// Nearest neighbour of the query's embedding only.
    Vector,
    Both,
    /// Returned by neither branch: a part (a film, an OVA, a later season named after it) of a
    /// work ranked above it, named in [`SearchHit::part_of`].
    SameWork,
}

/// One anime as a result card or a "similar to" entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnimeCard {
    pub id: i32,
    pub title: String,
    /// The English title when it differs from `title`.
    pub english_title: Option<String>,
    pub year: Option<i32>,
    /// Human words ("TV", "Movie").
    pub format: Option<String>,
    pub genres: Vec<String>,
    pub snippet: String,
    /// The poster's address on this site (`/img/anime/{id}/cover`), when AniList has one.
    #[serde(default)]
    pub cover: Option<String>,
    /// The poster's colour (`#rrggbb`): the block shown while it loads, or instead of it.
    #[serde(default)]
    pub color: Option<String>,
}

/// Poster sizes on cards, in CSS pixels (AniList's `large` is 230 × 326: the same ratio).
pub const COVER_WIDTH: u32 = 92;
pub const COVER_HEIGHT: u32 = 130;

impl AnimeCard {
    /// Up to two letters standing for the title where there is no poster: the first letters of
    /// its first two words ("Mushishi" → "M", "Cowboy Bebop" → "CB").
    pub fn initials(&self) -> String {
        self.title
            .split_whitespace()
            .filter_map(|word| word.chars().find(|c| c.is_alphanumeric()))
            .take(2)
            .flat_map(char::to_uppercase)
            .collect()
    }

    /// The placeholder colour: AniList's, else one of a few muted ones picked by the id (so a
    /// card keeps its colour from one visit to the next).
    pub fn block_color(&self) -> String {
        const MUTED: [&str; 6] = [
            "#5b6c8f", "#7a5c8f", "#8f6a5c", "#5c8f7a", "#8f8a5c", "#5c7f8f",
        ];
        self.color
            .clone()
            .unwrap_or_else(|| MUTED[self.id.unsigned_abs() as usize % MUTED.len()].to_string())
    }
}

/// `color` when it is a plain `#rrggbb` (it goes into a style attribute), else nothing.
pub fn safe_color(color: &str) -> Option<String> {
    let hex = color.strip_prefix('#')?;
    (hex.len() == 6 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| color.to_ascii_lowercase())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub anime: AnimeCard,
    pub branch: Branch,
    /// Reciprocal rank fusion score.
    pub score: f64,
    pub lexical_rank: Option<usize>,
    pub vector_rank: Option<usize>,
    /// Why it matched, for the page: the title the query matched, and the query's words the
    /// anime's text holds (lexical branch only).
    #[serde(default)]
    pub matched_title: Option<String>,
    #[serde(default)]
    pub matched_words: Vec<String>,
    /// The passage of its synopsis nearest the query (vector branch), in the catalog's words.
    #[serde(default)]
    pub matched_passage: Option<String>,
    /// The title of the result above it that this one is a part of, when that is why it is here.
    #[serde(default)]
    pub part_of: Option<String>,
}

/// How the final order was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ranking {
    /// The rerank stage ordered the fused candidates.
    Reranked,
    /// The fused order was clear enough that the rerank stage was skipped.
    Confident,
    /// The rerank stage failed or ran out of time: the fused order is shown.
    Fallback,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub query: String,
    pub hits: Vec<SearchHit>,
    /// False when the query could not be embedded and only the lexical branch ran.
    pub semantic: bool,
    pub ranking: Ranking,
    /// Which reranker ran or was meant to ("local", "openai:gpt-5.4-mini").
    pub reranker: String,
    /// Served from the results cache.
    pub cached: bool,
    pub took_ms: f64,
    /// The searcher's allowance after this search.
    pub quota: Option<QuotaInfo>,
}

/// Where a searcher stands with their allowance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaInfo {
    pub used: i64,
    pub limit: i64,
    /// "year" or "month".
    pub period: String,
    /// First day of the next period, `YYYY-MM-DD` (UTC).
    pub resets_on: String,
}

impl QuotaInfo {
    pub fn remaining(&self) -> i64 {
        (self.limit - self.used).max(0)
    }
}

/// Why a search did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// Nothing to search for: HTTP 400.
    EmptyQuery,
    /// Longer than [`MAX_QUERY_CHARS`]: HTTP 400.
    QueryTooLong { max: usize },
    /// The allowance is used up: HTTP 429.
    QuotaExhausted(QuotaInfo),
    /// A new anonymous visitor from a network that started too many today (cleared cookies):
    /// HTTP 429.
    TooManyNewVisitors { per_day: i64 },
    /// Anonymous searches from the visitor's network reached their daily cap: HTTP 429.
    TooManyFromNetwork { per_day: i64 },
    /// A filter the search cannot apply (a hand-edited link): HTTP 400.
    BadFilter(FilterProblem),
    /// The search link was followed from another site (`Sec-Fetch-Site: cross-site`): the form
    /// is shown filled in and runs, and is charged, only when submitted here.
    FromAnotherSite,
    /// The page was fetched ahead of time (`Sec-Purpose: prefetch`) or only for its headers
    /// (`HEAD`): nobody asked for the search yet, so it is shown filled in and not run.
    NotRequested,
}

/// Everything the anime page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnimeDetails {
    pub card: AnimeCard,
    pub native_title: Option<String>,
    pub synonyms: Vec<String>,
    pub description: String,
    /// The synopsis in Spanish (Apertium's, made at ingest), for the Spanish interface.
    #[serde(default)]
    pub description_es: Option<String>,
    pub themes: Vec<String>,
    pub season: Option<String>,
    pub average_score: Option<i32>,
    /// Other entries of its franchise, in airing order.
    pub franchise: Vec<AnimeCard>,
    pub similar: Vec<AnimeCard>,
}
