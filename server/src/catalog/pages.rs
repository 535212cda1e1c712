//! What the pages show of an anime, read from the catalog: the cards of a results or "similar"
//! list, and the anime page's details (its "similar to" list is the search engine's, added by
//! [`crate::search::SearchEngine::anime`]).

use std::collections::HashMap;

use app::search::{AnimeCard, AnimeDetails};
use sqlx::PgPool;

use super::document::{clean_description, format_label, theme_tags};

/// Characters of a card's synopsis snippet (a display choice: part of the results cache's key,
/// as it shapes a cached page).
pub const SNIPPET_CHARS: usize = 220;

/// Everything the anime page shows but its "similar to" list (left empty), or `None` for an
/// unknown id.
pub async fn anime(pool: &PgPool, id: i32) -> Result<Option<AnimeDetails>, sqlx::Error> {
    let Some(media) = sqlx::query_scalar::<_, sqlx::types::Json<super::Media>>(
        "SELECT raw FROM anime WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    .map(|json| json.0) else {
        return Ok(None);
    };
    let franchise_ids: Vec<i32> = sqlx::query_scalar(
        "SELECT m.id FROM anime a JOIN anime m ON m.franchise_root_id = a.franchise_root_id
         WHERE a.id = $1
         ORDER BY coalesce(m.start_year, m.season_year), m.start_month, m.start_day, m.id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let mut franchise_cards = cards(pool, &franchise_ids).await?;
    let franchise = franchise_ids
        .iter()
        .filter_map(|id| franchise_cards.remove(id))
        .collect();
    let description_es: Option<String> =
        sqlx::query_scalar("SELECT description FROM synopses_es WHERE anime_id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    let card = cards(pool, &[id])
        .await?
        .remove(&id)
        .expect("the anime exists");
    Ok(Some(AnimeDetails {
        card,
        native_title: media.title.native.clone(),
        synonyms: media.synonyms.clone(),
        description: media
            .description
            .as_deref()
            .map(clean_description)
            .unwrap_or_default(),
        description_es,
        themes: theme_tags(&media.tags)
            .into_iter()
            .map(str::to_string)
            .collect(),
        season: media.season.clone(),
        average_score: media.average_score,
        franchise,
        similar: Vec::new(),
    }))
}

/// Display data for `ids` (those that exist).
pub async fn cards(pool: &PgPool, ids: &[i32]) -> Result<HashMap<i32, AnimeCard>, sqlx::Error> {
    let rows = sqlx::query_as::<
        _,
        (
            i32,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<i32>,
            Option<String>,
            Vec<String>,
            Option<String>,
            bool,
            Option<String>,
        ),
    >(
        "SELECT id, title_romaji, title_english, title_native,
                coalesce(season_year, start_year), format, genres, description,
                cover_url IS NOT NULL, cover_color
         FROM anime WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(id, romaji, english, native, year, format, genres, description, cover, color)| {
                let (title, english_title) =
                    card_titles(romaji.as_deref(), english.as_deref(), native.as_deref());
                let card = AnimeCard {
                    id,
                    title,
                    english_title,
                    year,
                    format: format.as_deref().map(format_label),
                    genres,
                    snippet: snippet(description.as_deref().unwrap_or_default()),
                    cover: cover.then(|| crate::images::cover_path(id)),
                    color: color.as_deref().and_then(app::search::safe_color),
                };
                (id, card)
            },
        )
        .collect())
}

/// A card's title and the English title shown under it (when it says something else). The
/// romaji title leads, as AniList's own pages do, unless it is written in a script the
/// interface's readers may not read: AniList holds 501 of the shared catalog's "romaji" titles
/// in Japanese script ("解雇された暗黒兵士(30代)のスローなセカンドライフ"), and 445 of those have an
/// English title, which then leads instead.
fn card_titles(
    romaji: Option<&str>,
    english: Option<&str>,
    native: Option<&str>,
) -> (String, Option<String>) {
    fn present(title: Option<&str>) -> Option<&str> {
        title.map(str::trim).filter(|t| !t.is_empty())
    }
    let (romaji, english) = (present(romaji), present(english));
    let title = romaji
        .filter(|t| !has_east_asian_letters(t))
        .or(english)
        .or(romaji)
        .or(present(native))
        .unwrap_or("(untitled)")
        .to_string();
    let english_title = english
        .filter(|e| !e.eq_ignore_ascii_case(&title))
        .map(str::to_string);
    (title, english_title)
}

/// Whether `text` has a letter from the scripts of East Asia (kana, CJK ideographs, Hangul and
/// their full-width forms: code points from U+2E80 on), the ones AniList writes its Japanese-script
/// "romaji" titles in.
fn has_east_asian_letters(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_alphabetic() && (c as u32) >= 0x2E80)
}

/// The start of a synopsis, cut at a word boundary.
fn snippet(description: &str) -> String {
    let text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= SNIPPET_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SNIPPET_CHARS).collect();
    let cut = match cut.rfind(' ') {
        Some(space) => &cut[..space],
        None => &cut,
    };
    format!("{}…", cut.trim_end_matches([',', ';', ':', '.']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_leads_with_a_title_its_reader_can_read() {
        // Romaji leads; the English title goes under it when it differs.
        assert_eq!(
            card_titles(Some("Mushishi"), Some("Mushi-Shi"), Some("蟲師")),
            ("Mushishi".to_string(), Some("Mushi-Shi".to_string()))
        );
        assert_eq!(
            card_titles(Some("Kino no Tabi"), Some("kino no tabi"), None),
            ("Kino no Tabi".to_string(), None)
        );
        // A "romaji" title in Japanese script gives way to the English one.
        assert_eq!(
            card_titles(
                Some("パンダコパンダ"),
                Some("Panda! Go Panda!"),
                Some("パンダコパンダ")
            ),
            ("Panda! Go Panda!".to_string(), None)
        );
        // Without an English title it still leads; accents, digits and signs do not count.
        assert_eq!(
            card_titles(Some("ギルドの受付嬢"), Some("  "), None),
            ("ギルドの受付嬢".to_string(), None)
        );
        assert_eq!(
            card_titles(Some("Pokémon: 100% Ōkami"), Some("Pokemon"), None).0,
            "Pokémon: 100% Ōkami"
        );
        assert_eq!(
            card_titles(None, None, Some("蟲師")),
            ("蟲師".to_string(), None)
        );
        assert_eq!(card_titles(None, None, None).0, "(untitled)");
    }

    #[test]
    fn snippets_end_on_a_word() {
        let text = "word ".repeat(100);
        let s = snippet(&text);
        assert!(s.ends_with("word…"), "{s}");
        assert!(s.chars().count() <= SNIPPET_CHARS + 1);
        assert_eq!(snippet("short text"), "short text");
    }
}
