//! Titles that name parts of one work. AniList (and the shared catalog, for most films, recaps
//! and specials) often links no relation between "Made in Abyss" and "Made in Abyss Movie 1:
//! Tabidachi no Yoake", so the franchise alone does not say they are one work; their titles do.

/// Titles shorter than this (in characters) are never read as extended: "Air" is not "Air Gear".
const MIN_BASE_CHARS: usize = 4;
/// Words that, after another entry's whole title, make a title a part of it ("Made in Abyss
/// Movie 1", "Kimagure Orange☆Road OVA", "Magic Knight Rayearth II"). Digits, a colon, " - " and
/// " ~ " do too ("One Piece 4: …", "Shoujo Kakumei Utena: Adolescence Mokushiroku"). A
/// parenthesis does not: AniList's "Colorful (Movie)" is another work than "Colorful", named apart.
const PART_WORDS: [&str; 15] = [
    "movie",
    "movies",
    "film",
    "gekijouban",
    "the",
    "ova",
    "oad",
    "ona",
    "special",
    "specials",
    "recap",
    "season",
    "final",
    "ii",
    "iii",
];

/// A title as compared: lower case, trimmed, without AniList's " (TV)" disambiguation.
fn normalised(title: &str) -> String {
    let title = title.trim().to_lowercase();
    title
        .strip_suffix(" (tv)")
        .map(str::to_string)
        .unwrap_or(title)
}

/// Whether `title` is `base` followed by a part marker (see [`PART_WORDS`]); both normalised.
fn extends(title: &str, base: &str) -> bool {
    if base.chars().count() < MIN_BASE_CHARS {
        return false;
    }
    let Some(rest) = title.strip_prefix(base) else {
        return false;
    };
    if rest.starts_with(':') || rest.starts_with(" :") {
        return true;
    }
    if [" - ", " ~ ", " – "]
        .iter()
        .any(|dash| rest.starts_with(dash))
    {
        return true;
    }
    let Some(after) = rest.strip_prefix(' ') else {
        return false;
    };
    let word: String = after.chars().take_while(|c| c.is_alphanumeric()).collect();
    !word.is_empty()
        && (word.chars().all(|c| c.is_ascii_digit()) || PART_WORDS.contains(&word.as_str()))
}

/// Whether two entries, given their titles (romaji, English, any order), are parts of one work:
/// the same title, or one's title extended by a part marker into the other's.
pub fn same_work(a: &[String], b: &[String]) -> bool {
    let a: Vec<String> = a.iter().map(|t| normalised(t)).collect();
    let b: Vec<String> = b.iter().map(|t| normalised(t)).collect();
    a.iter().any(|x| {
        b.iter().any(|y| {
            (x == y && x.chars().count() >= MIN_BASE_CHARS) || extends(x, y) || extends(y, x)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn films_specials_and_sequels_named_after_a_work_are_parts_of_it() {
        let abyss = titles(&["Made in Abyss", "Made in Abyss"]);
        for part in [
            "Made in Abyss Movie 1: Tabidachi no Yoake",
            "Made in Abyss: Journey's Dawn",
        ] {
            assert!(same_work(&abyss, &titles(&[part])), "{part}");
            assert!(same_work(&titles(&[part]), &abyss), "{part}");
        }
        assert!(same_work(
            &titles(&["Kakushigoto (TV)"]),
            &titles(&["Kakushigoto Movie"])
        ));
        assert!(same_work(
            &titles(&["Magic Knight Rayearth"]),
            &titles(&["Magic Knight Rayearth II"])
        ));
        assert!(same_work(
            &titles(&["Kimagure Orange☆Road"]),
            &titles(&["Kimagure Orange☆Road OVA"])
        ));
        assert!(same_work(
            &titles(&["One Piece"]),
            &titles(&["One Piece 4: The Adventure of Deadend"])
        ));
    }

    #[test]
    fn other_works_that_share_words_are_not() {
        // A disambiguating parenthesis names another work; a short title is not extended; a
        // longer word is not a part marker.
        assert!(!same_work(
            &titles(&["Colorful"]),
            &titles(&["Colorful (Movie)"])
        ));
        assert!(!same_work(&titles(&["Air"]), &titles(&["Air Movie"])));
        assert!(!same_work(
            &titles(&["Mononoke"]),
            &titles(&["Mononoke Hime"])
        ));
        assert!(!same_work(&titles(&["Psycho"]), &titles(&["Psycho-Pass"])));
        assert!(!same_work(
            &titles(&["Made in Abyss"]),
            &titles(&["Shoujo Shuumatsu Ryokou"])
        ));
        assert!(!same_work(&[], &titles(&["Made in Abyss"])));
    }
}
