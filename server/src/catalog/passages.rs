//! Passages: a document cut into short pieces, each embedded on its own, so that one sentence
//! of a long synopsis ("he travels … helping those in need") is not averaged away into a single
//! vector with everything else, and no part of a long document goes unembedded.
//!
//! Each passage is a window of whole sentences (of the franchise premise, then the synopsis) of
//! at most [`WINDOW_WORDS`] words, led by the anime's title so the piece keeps its subject; the
//! genres and themes form a passage of their own.

use unicode_segmentation::UnicodeSegmentation;

use super::{
    document::{Premise, clean_description, collapse_whitespace, genre_names, theme_tags},
    media::Media,
};

/// Words per window: ~60–100 tokens for the local model, where one idea dominates the vector.
pub const WINDOW_WORDS: usize = 60;

/// The passages of `media`, in document order.
pub fn passages(media: &Media, premise: Option<&Premise>) -> Vec<String> {
    let title = media.main_title().unwrap_or_default().trim();
    let mut sentences: Vec<String> = Vec::new();
    if let Some(premise) = premise {
        sentences.extend(split_sentences(&collapse_whitespace(&premise.text)));
    }
    if let Some(description) = &media.description {
        sentences.extend(split_sentences(&collapse_whitespace(&clean_description(
            description,
        ))));
    }
    let mut out: Vec<String> = windows(&sentences, WINDOW_WORDS)
        .into_iter()
        .map(|window| lead(title, &window))
        .collect();
    let genres = genre_names(media);
    let themes = theme_tags(&media.tags);
    if !genres.is_empty() || !themes.is_empty() {
        let mut parts = Vec::new();
        if !genres.is_empty() {
            parts.push(format!("Genres: {}.", genres.join(", ")));
        }
        if !themes.is_empty() {
            parts.push(format!("Themes: {}.", themes.join(", ")));
        }
        out.push(lead(title, &parts.join(" ")));
    }
    out
}

fn lead(title: &str, text: &str) -> String {
    if title.is_empty() {
        text.to_string()
    } else {
        format!("{title}: {text}")
    }
}

fn split_sentences(text: &str) -> Vec<String> {
    text.split_sentence_bounds()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Consecutive sentences joined while the window stays within `words` words; a longer sentence
/// is a window of its own, cut at `2 × words` words (the rest starts the next window).
fn windows(sentences: &[String], words: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut count = 0;
    let mut flush = |current: &mut Vec<&str>, count: &mut usize| {
        if !current.is_empty() {
            out.push(current.join(" "));
            current.clear();
            *count = 0;
        }
    };
    for sentence in sentences {
        let sentence_words: Vec<&str> = sentence.split_whitespace().collect();
        for piece in sentence_words.chunks(2 * words) {
            if count + piece.len() > words {
                flush(&mut current, &mut count);
            }
            current.extend_from_slice(piece);
            count += piece.len();
        }
    }
    flush(&mut current, &mut count);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, word: &str) -> String {
        format!("{}.", vec![word; n].join(" "))
    }

    #[test]
    fn sentences_are_grouped_into_windows_and_none_is_lost() {
        let sentences = vec![
            words(20, "a"),
            words(30, "b"),
            words(25, "c"),
            words(150, "d"),
        ];
        let out = windows(&sentences, 60);
        let counts: Vec<usize> = out.iter().map(|w| w.split_whitespace().count()).collect();
        // a+b fit (50), c starts a new window, the long sentence is cut at 120 words.
        assert_eq!(counts, vec![50, 25, 120, 30]);
        let total: usize = sentences.iter().map(|s| s.split_whitespace().count()).sum();
        assert_eq!(
            counts.iter().sum::<usize>(),
            total,
            "every word is in a window"
        );
    }

    #[test]
    fn passages_lead_with_the_title_and_keep_themes_apart() {
        let media: Media = serde_json::from_value(serde_json::json!({
            "id": 457,
            "title": {"romaji": "Mushishi"},
            "description": "Ginko travels.<br>He helps people in need. Mushi are everywhere.",
            "genres": ["Slice of Life", "Mystery"],
            "tags": [{"name": "Iyashikei", "rank": 90, "isMediaSpoiler": false}]
        }))
        .unwrap();
        let out = passages(&media, None);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].starts_with("Mushishi: Ginko travels."), "{out:?}");
        assert!(out[0].contains("He helps people in need."), "{out:?}");
        assert!(
            out[1].starts_with("Mushishi: Genres: Slice of Life, Mystery."),
            "{out:?}"
        );
        assert!(out[1].contains("Iyashikei"), "{out:?}");
        let premise = Premise {
            root_title: "Root".into(),
            text: "A premise sentence.".into(),
        };
        assert!(passages(&media, Some(&premise))[0].contains("A premise sentence."));
    }
}
