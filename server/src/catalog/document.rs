//! The one document per anime that search indexes, built with the seed template:
//!
//! `${title} (${english}). ${format}, ${year}. ${synopsis}. ${genres}. Themes: ${tags}`
//!
//! Missing parts are left out whole (no "(null)", no ". ."), the synopsis is the description with
//! HTML and "(Source: …)" notes removed, and the themes are the tags AniList ranks at least 50
//! that are not spoilers. Entries that are not their franchise's root get the franchise premise
//! in front, so a sequel whose own synopsis says "the third season of X" can still be found by
//! what X is about.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::LazyLock,
};

use regex::Regex;
use sha2::{Digest, Sha256};

use super::media::{Media, Tag};

/// Lowest AniList tag rank (0–100, how strongly voters agree the tag applies) that makes a theme.
pub const MIN_TAG_RANK: i32 = 50;

/// A franchise premise to put in front of a member's document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Premise {
    /// Main title of the franchise's root entry.
    pub root_title: String,
    pub text: String,
}

/// Plain text from an AniList description: tags removed by a real HTML sanitiser (ammonia; the
/// contents of `<script>`/`<style>` go too), `<br>` kept as line breaks, entities decoded,
/// "(Source: …)" and "[Written by …]" notes dropped, blank lines and runs of spaces collapsed.
pub fn clean_description(raw: &str) -> String {
    static SANITISER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
        let mut builder = ammonia::Builder::empty();
        builder.tags(HashSet::from(["br"]));
        builder
    });
    static NOTES: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\(\s*source\s*:[^)]*\)|\[\s*(?:source\s*:|written by)[^\]]*\]").unwrap()
    });
    let sanitised = SANITISER.clean(raw).to_string().replace("<br>", "\n");
    // Control characters (raw, or decoded from entities like `&#7;`) become spaces.
    let text = without_controls(&html_escape::decode_html_entities(&sanitised));
    let text = NOTES.replace_all(&text, "");
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The anime's genres as AniList names them, blanks left out.
pub fn genre_names(media: &Media) -> Vec<&str> {
    media
        .genres
        .iter()
        .map(|g| g.trim())
        .filter(|g| !g.is_empty())
        .collect()
}

/// Tags that describe the anime without spoiling it, strongest first.
pub fn theme_tags(tags: &[Tag]) -> Vec<&str> {
    let mut themes: Vec<&Tag> = tags
        .iter()
        .filter(|tag| tag.rank.is_some_and(|rank| rank >= MIN_TAG_RANK) && !tag.is_spoiler())
        .collect();
    themes.sort_by_key(|tag| std::cmp::Reverse(tag.rank));
    themes
        .into_iter()
        .map(|tag| tag.name.trim())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Human words for AniList's format codes.
pub fn format_label(format: &str) -> String {
    match format {
        "TV" => "TV".into(),
        "TV_SHORT" => "TV short".into(),
        "MOVIE" => "Movie".into(),
        "SPECIAL" => "Special".into(),
        "OVA" => "OVA".into(),
        "ONA" => "ONA".into(),
        "MUSIC" => "Music video".into(),
        other => other.replace('_', " "),
    }
}

/// The document for `media`; `premise` is its franchise's, when it is not the franchise root.
pub fn build_document(media: &Media, premise: Option<&Premise>) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(premise) = premise {
        parts.push(format!(
            "Series premise ({}): {}",
            premise.root_title, premise.text
        ));
    }

    if let Some(title) = media.main_title() {
        let english = media
            .title
            .english
            .as_deref()
            .map(str::trim)
            .filter(|english| !english.is_empty() && !english.eq_ignore_ascii_case(title));
        parts.push(match english {
            Some(english) => format!("{title} ({english})"),
            None => title.to_string(),
        });
    }

    let format = media
        .format
        .as_deref()
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(format_label);
    let year = media.year().map(|year| year.to_string());
    let when: Vec<String> = [format, year].into_iter().flatten().collect();
    if !when.is_empty() {
        parts.push(when.join(", "));
    }

    if let Some(description) = &media.description {
        parts.push(collapse_whitespace(&clean_description(description)));
    }

    let genres = genre_names(media);
    if !genres.is_empty() {
        parts.push(genres.join(", "));
    }

    let themes = theme_tags(&media.tags);
    if !themes.is_empty() {
        parts.push(format!("Themes: {}", themes.join(", ")));
    }

    without_controls(&join_sentences(&parts))
}

/// What the lexical index weighs: titles and synonyms (A), genres and themes (B), premise and
/// synopsis (C).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexicalFields {
    pub titles: String,
    pub topics: String,
    pub text: String,
}

impl LexicalFields {
    /// Changes whenever any field does (stored beside the tsvector).
    pub fn hash(&self) -> String {
        let mut hasher = Sha256::new();
        for field in [&self.titles, &self.topics, &self.text] {
            hasher.update(field.as_bytes());
            hasher.update([0]);
        }
        hex::encode(hasher.finalize())
    }
}

pub fn lexical_fields(media: &Media, premise: Option<&Premise>) -> LexicalFields {
    let mut topics: Vec<&str> = media.genres.iter().map(|g| g.trim()).collect();
    topics.extend(theme_tags(&media.tags));
    let mut text = Vec::new();
    if let Some(premise) = premise {
        text.push(premise.text.clone());
    }
    if let Some(description) = &media.description {
        text.push(collapse_whitespace(&clean_description(description)));
    }
    LexicalFields {
        titles: titles(media).join(" | "),
        topics: without_controls(&topics.join(", ")),
        text: without_controls(&text.join("\n")),
    }
}

/// Dimensions of the theme space: tag and genre names are hashed into it (a million slots for a
/// few hundred names: collisions are negligible, and no vocabulary table has to stay in step).
pub const THEME_DIMENSIONS: u32 = 1 << 20;
/// Tags ranked below this say too little about the anime to define its neighbours.
const MIN_THEME_RANK: i32 = 20;
/// Weight of each genre against a tag's rank / 100.
const GENRE_WEIGHT: f32 = 0.6;
/// Each theme's weight is multiplied by its inverse document frequency to this power. A theme
/// most anime share ("Comedy", "Male Protagonist") says little about which ones fans call alike;
/// a rare one ("Iyashikei", "Cyberpunk") says a lot. Chosen with "similar to" on both evaluation
/// sets (`docs/measurements.md`): 0 (no weighting) found 22% of the expected neighbours in the
/// top 5; 1, 1.5 and 2 found 48%, 61% and 65%.
const IDF_POWER: f64 = 2.0;

/// The anime's genres and non-spoiler tags with their own weights (tags by AniList's rank).
fn theme_features(media: &Media) -> BTreeMap<String, f32> {
    let mut weights = BTreeMap::new();
    let mut add = |name: String, weight: f32| {
        if weight > 0.0 && !name.ends_with(':') {
            let entry = weights.entry(name).or_insert(0.0_f32);
            *entry = entry.max(weight);
        }
    };
    for genre in &media.genres {
        add(
            format!("genre:{}", genre.trim().to_lowercase()),
            GENRE_WEIGHT,
        );
    }
    for tag in &media.tags {
        match tag.rank {
            Some(rank) if rank >= MIN_THEME_RANK && !tag.is_spoiler() => add(
                format!("tag:{}", tag.name.trim().to_lowercase()),
                rank as f32 / 100.0,
            ),
            _ => {}
        }
    }
    weights
}

/// How many anime of the catalog carry each theme: what [`theme_vector`] weighs themes by.
#[derive(Debug, Clone)]
pub struct ThemeFrequencies {
    anime: usize,
    carrying: HashMap<String, usize>,
}

impl ThemeFrequencies {
    pub fn of(catalog: &[Media]) -> Self {
        let mut carrying: HashMap<String, usize> = HashMap::new();
        for media in catalog {
            for name in theme_features(media).into_keys() {
                *carrying.entry(name).or_default() += 1;
            }
        }
        Self {
            anime: catalog.len(),
            carrying,
        }
    }

    /// ln(anime / anime carrying it) ^ [`IDF_POWER`]; a theme the catalog does not know counts
    /// as carried by one anime.
    fn weight(&self, theme: &str) -> f32 {
        let carrying = self.carrying.get(theme).copied().unwrap_or(1).max(1);
        let anime = self.anime.max(carrying);
        ((anime as f64 / carrying as f64).ln().powf(IDF_POWER)) as f32
    }
}

/// The anime's genres and non-spoiler tags as a unit `sparsevec` literal (`{i:w,…}/D`), tags
/// weighted by AniList's rank and every theme by how rare it is in the catalog; `None` when it
/// has neither (or only themes every anime has). "Similar to" compares these: fans call two anime
/// similar for their mood and themes more than for their plot.
pub fn theme_vector(media: &Media, frequencies: &ThemeFrequencies) -> Option<String> {
    let mut weights: BTreeMap<u32, f32> = BTreeMap::new();
    for (name, weight) in theme_features(media) {
        let weight = weight * frequencies.weight(&name);
        if weight <= 0.0 {
            continue;
        }
        let mut hash: u32 = 0x811c9dc5;
        for byte in name.bytes() {
            hash = (hash ^ byte as u32).wrapping_mul(0x01000193);
        }
        // sparsevec indices start at 1.
        let entry = weights.entry(hash % THEME_DIMENSIONS + 1).or_default();
        *entry = entry.max(weight);
    }
    let norm = weights.values().map(|w| w * w).sum::<f32>().sqrt();
    if norm == 0.0 {
        return None;
    }
    let entries: Vec<String> = weights
        .iter()
        .map(|(slot, w)| format!("{slot}:{}", w / norm))
        .collect();
    Some(format!("{{{}}}/{THEME_DIMENSIONS}", entries.join(",")))
}

/// Every distinct title and synonym, lower-cased, in AniList's order.
pub fn titles(media: &Media) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let all = [
        media.title.romaji.as_deref(),
        media.title.english.as_deref(),
        media.title.native.as_deref(),
    ]
    .into_iter()
    .flatten()
    .chain(media.synonyms.iter().map(String::as_str));
    for title in all {
        let title = collapse_whitespace(title).to_lowercase();
        if !title.is_empty() && !out.contains(&title) {
            out.push(title);
        }
    }
    out
}

/// sha256 over the embedding model's name and the document: a vector is reused only for the
/// same model and the same text.
pub fn content_hash(model: &str, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update(b"\n");
    hasher.update(text.as_bytes());
    hex::encode(hasher.finalize())
}

/// Single spaces, trimmed; control characters count as spaces.
pub(crate) fn collapse_whitespace(text: &str) -> String {
    without_controls(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with control characters (other than line breaks) as spaces: catalog strings are
/// anyone's input, and what reaches PostgreSQL and the embedder should be plain text.
pub(crate) fn without_controls(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text.to_string();
    }
    text.chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect()
}

/// Joins parts as sentences: a part that already ends a sentence (".", "!", "?", "…", possibly
/// inside a closing quote or bracket) gets no extra full stop. Empty parts are skipped.
fn join_sentences(parts: &[String]) -> String {
    let mut out = String::new();
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
        let last_meaningful = part.trim_end_matches(['"', '\'', ')', ']', '”', '’', '」', '』']);
        if !last_meaningful.ends_with(['.', '!', '?', '…', '。', '！', '？']) {
            out.push('.');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::media::{FuzzyDate, Title};

    fn tag(name: &str, rank: i32, general: bool, media: bool) -> Tag {
        Tag {
            name: name.into(),
            rank: Some(rank),
            category: Some("Theme".into()),
            is_general_spoiler: Some(general),
            is_media_spoiler: Some(media),
        }
    }

    fn mushishi() -> Media {
        serde_json::from_value(serde_json::json!({
            "id": 457,
            "title": {"romaji": "Mushishi", "english": "Mushi-Shi", "native": "蟲師"},
            "format": "TV", "seasonYear": 2005,
            "description": "Ginko travels from village to village.<br><br>\nHe helps people harmed by mushi.",
            "genres": ["Adventure", "Slice of Life"],
            "tags": [
                {"name": "Iyashikei", "rank": 85, "isGeneralSpoiler": false, "isMediaSpoiler": false},
                {"name": "Episodic", "rank": 91, "isGeneralSpoiler": false, "isMediaSpoiler": false}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn full_document_follows_the_seed_template() {
        assert_eq!(
            build_document(&mushishi(), None),
            "Mushishi (Mushi-Shi). TV, 2005. Ginko travels from village to village. He helps \
             people harmed by mushi. Adventure, Slice of Life. Themes: Episodic, Iyashikei."
        );
    }

    #[test]
    fn missing_parts_are_left_out_cleanly() {
        let mut media = mushishi();
        media.title.english = None;
        media.format = None;
        media.season_year = None;
        media.description = None;
        media.genres.clear();
        media.tags.clear();
        assert_eq!(build_document(&media, None), "Mushishi.");

        let mut media = mushishi();
        media.format = None;
        media.description = Some("   ".into());
        let doc = build_document(&media, None);
        assert_eq!(
            doc,
            "Mushishi (Mushi-Shi). 2005. Adventure, Slice of Life. Themes: Episodic, Iyashikei."
        );
        for bad in ["(null)", "()", ". .", "..", "None"] {
            assert!(!doc.contains(bad), "{bad:?} in {doc:?}");
        }
    }

    #[test]
    fn year_falls_back_to_the_start_date_and_format_stands_alone() {
        let mut media = mushishi();
        media.season_year = None;
        media.start_date = Some(FuzzyDate {
            year: Some(2004),
            month: None,
            day: None,
        });
        assert!(build_document(&media, None).contains(" TV, 2004. "));
        media.start_date = None;
        assert!(build_document(&media, None).starts_with("Mushishi (Mushi-Shi). TV. Ginko"));
    }

    #[test]
    fn english_title_equal_to_the_main_one_is_not_repeated() {
        let mut media = mushishi();
        media.title = Title {
            romaji: Some("Monster".into()),
            english: Some("MONSTER".into()),
            native: None,
        };
        assert!(build_document(&media, None).starts_with("Monster. TV, 2005."));
        media.title = Title {
            romaji: None,
            english: Some("Monster".into()),
            native: Some("モンスター".into()),
        };
        assert!(build_document(&media, None).starts_with("Monster. TV, 2005."));
    }

    #[test]
    fn synopsis_ending_in_punctuation_gets_no_second_stop() {
        let mut media = mushishi();
        media.description = Some("Will he ever find his way home?".into());
        assert!(build_document(&media, None).contains("home? Adventure"));
        media.description = Some("He said \"goodbye.\"".into());
        assert!(build_document(&media, None).contains("\"goodbye.\" Adventure"));
        media.description = Some("No full stop here".into());
        assert!(build_document(&media, None).contains("here. Adventure"));
    }

    #[test]
    fn html_is_stripped_and_entities_decoded() {
        let raw = "<i>Tom &amp; Jerry</i> don&#039;t stop.<br><br>\n<b>Ever</b> <a href=\"x\">again</a>.\
                   <script>alert(1)</script><br/>Last&nbsp;line";
        assert_eq!(
            clean_description(raw),
            "Tom & Jerry don't stop.\nEver again.\nLast line"
        );
    }

    #[test]
    fn source_notes_are_removed() {
        let raw = "A quiet story.<br><br>\n(Source: Crunchyroll)<br>[Written by MAL Rewrite]";
        assert_eq!(clean_description(raw), "A quiet story.");
        assert_eq!(
            clean_description("Words (source: ANN, edited) here."),
            "Words here."
        );
        // Other parentheses stay.
        assert_eq!(
            clean_description("Mob (a psychic) lives."),
            "Mob (a psychic) lives."
        );
    }

    #[test]
    fn themes_keep_only_ranked_non_spoiler_tags_strongest_first() {
        let tags = vec![
            tag("Low", 49, false, false),
            tag("Edge", 50, false, false),
            tag("General Spoiler", 95, true, false),
            tag("Media Spoiler", 95, false, true),
            tag("Top", 90, false, false),
            Tag {
                rank: None,
                ..tag("Unranked", 0, false, false)
            },
        ];
        assert_eq!(theme_tags(&tags), vec!["Top", "Edge"]);
    }

    /// An anime with `genres` and `tags` (all ranked 80).
    fn themed(id: i32, genres: &[&str], tags: &[&str]) -> Media {
        let mut media = mushishi();
        media.id = id;
        media.genres = genres.iter().map(|g| g.to_string()).collect();
        media.tags = tags.iter().map(|t| tag(t, 80, false, false)).collect();
        media
    }

    /// Cosine of two `sparsevec` literals.
    fn theme_cosine(a: &str, b: &str) -> f32 {
        let parse = |v: &str| -> HashMap<u32, f32> {
            let inner = v.trim_start_matches('{').split('}').next().unwrap();
            inner
                .split(',')
                .map(|e| e.split_once(':').unwrap())
                .map(|(i, w)| (i.parse().unwrap(), w.parse().unwrap()))
                .collect()
        };
        let (a, b) = (parse(a), parse(b));
        a.iter().map(|(i, w)| w * b.get(i).unwrap_or(&0.0)).sum()
    }

    #[test]
    fn a_shared_rare_theme_counts_for_more_than_a_shared_common_one() {
        let source = themed(1, &["Comedy"], &["Iyashikei", "School"]);
        let rare = themed(2, &["Action"], &["Iyashikei"]);
        let common = themed(3, &["Action"], &["School"]);
        let mut catalog = vec![source.clone(), rare.clone(), common.clone()];
        catalog.extend((10..20).map(|id| themed(id, &["Comedy", "Action"], &["School"])));
        let frequencies = ThemeFrequencies::of(&catalog);
        let vector = |m: &Media| theme_vector(m, &frequencies).unwrap();
        let (to_rare, to_common) = (
            theme_cosine(&vector(&source), &vector(&rare)),
            theme_cosine(&vector(&source), &vector(&common)),
        );
        // Unweighted, both cosines would be equal: each shares one theme of rank 80 with it.
        assert!(to_rare > 2.0 * to_common, "{to_rare} vs {to_common}");
    }

    #[test]
    fn premise_goes_in_front() {
        let premise = Premise {
            root_title: "Mushishi".into(),
            text: "Ginko studies mushi.".into(),
        };
        let mut sequel = mushishi();
        sequel.title = Title {
            romaji: Some("Mushishi Zoku Shou".into()),
            english: None,
            native: None,
        };
        sequel.description = Some("The second season.".into());
        let doc = build_document(&sequel, Some(&premise));
        assert!(doc.starts_with("Series premise (Mushishi): Ginko studies mushi. Mushishi Zoku Shou. TV, 2005. The second season."), "{doc}");
    }

    #[test]
    fn content_hash_depends_on_model_and_text() {
        let a = content_hash("e5-small", "text");
        assert_eq!(a.len(), 64);
        assert_eq!(a, content_hash("e5-small", "text"));
        assert_ne!(a, content_hash("text-embedding-3-small", "text"));
        assert_ne!(a, content_hash("e5-small", "text."));
    }

    #[test]
    fn format_codes_read_as_words() {
        assert_eq!(format_label("TV_SHORT"), "TV short");
        assert_eq!(format_label("MOVIE"), "Movie");
        assert_eq!(format_label("NEW_THING"), "NEW THING");
    }
}
