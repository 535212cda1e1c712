//! What a description says about an anime besides its story: when it was made ("de los 70",
//! "80s stuff", "old 1979 robot series"), what it is ("la película donde…", "the season
//! where…") and what kind of story ("de terror", "una comedia", "algo tranquilo"). People
//! remember these as surely as the plot, and neither the embedder nor the word index weighs them
//! well: a synopsis rarely says "1980s" or "film", and the genres are one short field among many
//! words. The local reranker adds a bonus to candidates that match them (see
//! `rerank::LocalReranker::features`), which is all they do: they never filter, because a
//! remembered decade or format is sometimes wrong.

/// A hash of every word table here: part of the results cache's key
/// ([`super::params::SearchParams::fingerprint`]), as a new word changes pages.
pub fn fingerprint() -> String {
    use sha2::Digest;
    let tables = format!(
        "{DECADE_WORDS:?}|{DECADE_LEADS:?}|{MOVIE_WORDS:?}|{SERIES_WORDS:?}|{OVA_WORDS:?}|{GENRE_WORDS:?}"
    );
    hex::encode(sha2::Sha256::digest(tables.as_bytes()))
}

/// The era and format a query mentions, in Spanish or English.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryCues {
    /// Year ranges (inclusive) the query names: a decade ("los ochenta", "90s") or a year with
    /// its neighbours ("1979": 1978–1980, as release dates are remembered loosely).
    pub eras: Vec<(i32, i32)>,
    /// The kind of entry the query names, if any.
    pub format: Option<FormatCue>,
    /// AniList genres the query names, in words of either language ("de terror": Horror).
    pub genres: Vec<&'static str>,
}

/// Kinds of entry people name in a description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatCue {
    /// "película", "peli", "movie", "film": AniList's `MOVIE`.
    Movie,
    /// "serie", "temporada", "season", "series": `TV` or `TV_SHORT`.
    Series,
    /// "ova": `OVA`.
    Ova,
}

impl FormatCue {
    /// Whether an entry of AniList format `format` is what the cue names.
    pub fn matches(self, format: &str) -> bool {
        match self {
            FormatCue::Movie => format == "MOVIE",
            FormatCue::Series => matches!(format, "TV" | "TV_SHORT"),
            FormatCue::Ova => format == "OVA",
        }
    }
}

/// Decades said in words, and the decade each means.
const DECADE_WORDS: [(&str, i32); 8] = [
    ("sesenta", 1960),
    ("setenta", 1970),
    ("ochenta", 1980),
    ("noventa", 1990),
    ("sixties", 1960),
    ("seventies", 1970),
    ("eighties", 1980),
    ("nineties", 1990),
];
/// Words before a bare number that make it a decade: "de los 70", "años 80", "the 90".
const DECADE_LEADS: [&str; 4] = ["los", "años", "the", "anos"];

/// Words naming a format; a movie word wins over a series word ("the movie of the series").
const MOVIE_WORDS: [&str; 8] = [
    "película",
    "películas",
    "pelicula",
    "peliculas",
    "peli",
    "movie",
    "film",
    "largometraje",
];
const SERIES_WORDS: [&str; 5] = ["serie", "series", "temporada", "season", "show"];
const OVA_WORDS: [&str; 2] = ["ova", "ovas"];

/// AniList genres and the words, in Spanish and English, that name them in a description. Calm
/// is what fans mean by slice of life ("algo tranquilo", "something relaxing").
const GENRE_WORDS: [(&str, &[&str]); 17] = [
    (
        "Horror",
        &[
            "terror",
            "miedo",
            "horror",
            "scary",
            "creepy",
            "espeluznante",
            "gore",
        ],
    ),
    (
        "Comedy",
        &[
            "comedia",
            "chistoso",
            "chistosa",
            "gracioso",
            "graciosa",
            "divertido",
            "divertida",
            "funny",
            "comedy",
            "hilarious",
            "hilarante",
        ],
    ),
    (
        "Romance",
        &[
            "romance",
            "romántica",
            "romántico",
            "romantica",
            "romantico",
            "romantic",
            "love story",
        ],
    ),
    (
        "Sports",
        &[
            "deporte",
            "deportes",
            "fútbol",
            "futbol",
            "béisbol",
            "beisbol",
            "básquet",
            "basquet",
            "baloncesto",
            "boxeo",
            "voleibol",
            "tenis",
            "sports",
            "soccer",
            "baseball",
            "basketball",
            "boxing",
            "volleyball",
            "tennis",
        ],
    ),
    (
        "Mecha",
        &["robot", "robots", "mecha", "mechas", "mech", "mechs"],
    ),
    (
        "Music",
        &[
            "música", "musica", "banda", "cantante", "idol", "idols", "music", "band", "singer",
        ],
    ),
    (
        "Mystery",
        &[
            "misterio",
            "misterios",
            "detective",
            "detectives",
            "mystery",
            "mysteries",
        ],
    ),
    (
        "Sci-Fi",
        &[
            "espacio",
            "espacial",
            "ciencia ficción",
            "ciencia ficcion",
            "space",
            "sci-fi",
            "science fiction",
        ],
    ),
    (
        "Mahou Shoujo",
        &[
            "chicas mágicas",
            "chica mágica",
            "chicas magicas",
            "chica magica",
            "magical girl",
            "magical girls",
        ],
    ),
    (
        "Psychological",
        &[
            "psicológico",
            "psicologico",
            "psicológica",
            "psicologica",
            "psychological",
        ],
    ),
    ("Thriller", &["thriller", "suspenso", "suspense"]),
    (
        "Slice of Life",
        &[
            "vida cotidiana",
            "slice of life",
            "tranquilo",
            "tranquila",
            "calm",
            "relajante",
            "relaxing",
        ],
    ),
    (
        "Fantasy",
        &[
            "magia",
            "fantasía",
            "fantasia",
            "fantasy",
            "dragones",
            "dragons",
            "elfa",
            "elfo",
            "elf",
        ],
    ),
    (
        "Supernatural",
        &[
            "fantasma",
            "fantasmas",
            "espíritu",
            "espíritus",
            "espiritus",
            "ghost",
            "ghosts",
            "spirit",
            "spirits",
            "yokai",
            "youkai",
        ],
    ),
    (
        "Adventure",
        &["aventura", "aventuras", "adventure", "adventures"],
    ),
    (
        "Drama",
        &[
            "drama",
            "dramática",
            "triste",
            "tristísimo",
            "tristisimo",
            "sad",
            "tearjerker",
        ],
    ),
    (
        "Action",
        &["acción", "accion", "action", "peleas", "fights"],
    ),
];

impl QueryCues {
    /// The cues of `query` (any case; words are split at anything but letters, digits and `'`).
    pub fn read(query: &str) -> Self {
        let lower = query.to_lowercase().replace('’', "'");
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .map(|w| w.trim_matches('\''))
            .filter(|w| !w.is_empty())
            .collect();
        let mut eras = Vec::new();
        for (i, word) in words.iter().enumerate() {
            let lead = i.checked_sub(1).map(|j| words[j]);
            if let Some(era) = era_of(word, lead)
                && !eras.contains(&era)
            {
                eras.push(era);
            }
        }
        let said = |list: &[&str]| {
            words.iter().enumerate().any(|(i, w)| {
                let named =
                    list.contains(w) || list.iter().any(|l| w.strip_suffix('s') == Some(*l));
                // "asesino en serie" is a serial killer, not a TV series.
                named && !(i > 0 && words[i - 1] == "en" && *w == "serie")
            })
        };
        let format = if said(&MOVIE_WORDS) {
            Some(FormatCue::Movie)
        } else if said(&OVA_WORDS) {
            Some(FormatCue::Ova)
        } else if said(&SERIES_WORDS) {
            Some(FormatCue::Series)
        } else {
            None
        };
        // Phrases are matched on whole words: the words joined by single spaces, padded.
        let spaced = format!(" {} ", words.join(" "));
        let genres = GENRE_WORDS
            .iter()
            .filter(|(_, said)| said.iter().any(|w| spaced.contains(&format!(" {w} "))))
            .map(|(genre, _)| *genre)
            .collect();
        Self {
            eras,
            format,
            genres,
        }
    }

    /// Share of the genres the query names that an entry of `genres` has (0 when it names none).
    pub fn genre_share(&self, genres: &[String]) -> f64 {
        if self.genres.is_empty() {
            return 0.0;
        }
        let held = self
            .genres
            .iter()
            .filter(|g| genres.iter().any(|have| have == *g))
            .count();
        held as f64 / self.genres.len() as f64
    }

    /// Whether an entry from `year` falls in an era the query names (never when it names none
    /// or the year is unknown).
    pub fn era_matches(&self, year: Option<i32>) -> bool {
        year.is_some_and(|y| self.eras.iter().any(|&(from, to)| (from..=to).contains(&y)))
    }

    /// Whether an entry of AniList format `format` is the kind the query names.
    pub fn format_matches(&self, format: Option<&str>) -> bool {
        matches!((self.format, format), (Some(cue), Some(f)) if cue.matches(f))
    }
}

/// The era one word names, given the word before it: "80s", "1980s", "'90s" and "90's" are
/// decades; so are "70" or "1970" after "los"/"años"/"the", and "ochenta", "ochentero(s)",
/// "ochentera(s)", "eighties". Any other year from 1950 to 2029 is that year ± 1.
fn era_of(word: &str, lead: Option<&str>) -> Option<(i32, i32)> {
    let decade = |start: i32| Some((start, start + 9));
    let plural = word
        .strip_suffix("'s")
        .or_else(|| word.strip_suffix('s'))
        .filter(|w| w.chars().all(|c| c.is_ascii_digit()));
    let led = lead.is_some_and(|l| DECADE_LEADS.contains(&l));
    if let Some(digits) =
        plural.or_else(|| word.chars().all(|c| c.is_ascii_digit()).then_some(word))
    {
        let year = match digits.len() {
            2 => {
                let n: i32 = digits.parse().ok()?;
                if n >= 50 { 1900 + n } else { 2000 + n }
            }
            4 => digits.parse().ok()?,
            _ => return None,
        };
        if !(1950..=2029).contains(&year) {
            return None;
        }
        let is_decade = year % 10 == 0 && (plural.is_some() || led);
        return match (is_decade, digits.len()) {
            (true, _) => decade(year),
            // A bare two-digit number is a count ("los 12 reinos"), not a year.
            (false, 2) => None,
            (false, _) => Some((year - 1, year + 1)),
        };
    }
    DECADE_WORDS.iter().find_map(|&(stem, start)| {
        let said = word == stem
            || word.strip_suffix('s') == Some(stem)
            || ["ero", "era", "eros", "eras"]
                .iter()
                .any(|end| word.strip_prefix(&stem[..stem.len() - 1]) == Some(end));
        // "sesenta" alone is also the number sixty: only after "los"/"años" is it a decade.
        let words_need_lead = stem.ends_with('a') && word == stem;
        (said && (led || !words_need_lead)).then(|| decade(start))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eras(query: &str) -> Vec<(i32, i32)> {
        QueryCues::read(query).eras
    }

    #[test]
    fn decades_and_years_are_read_in_both_languages() {
        assert_eq!(
            eras("robot gigante de los 70 que el chavo maneja"),
            [(1970, 1979)]
        );
        assert_eq!(eras("two girls, 80s stuff, every mission"), [(1980, 1989)]);
        assert_eq!(eras("un chico psíquico, muy ochentero"), [(1980, 1989)]);
        assert_eq!(
            eras("parece de los sesenta pero lo hicieron en los noventa"),
            [(1960, 1969), (1990, 1999)]
        );
        assert_eq!(eras("anime raro de los años 90"), [(1990, 1999)]);
        assert_eq!(eras("2000s show where kids wear glasses"), [(2000, 2009)]);
        assert_eq!(eras("a '90s thriller and a 90's one"), [(1990, 1999)]);
        assert_eq!(eras("old 1979 robot war series"), [(1978, 1980)]);
        assert_eq!(eras("the seventies"), [(1970, 1979)]);
    }

    #[test]
    fn numbers_that_are_not_eras_are_left_alone() {
        assert!(eras("mob psycho 100, los 12 reinos, 3 hermanas").is_empty());
        assert!(eras("sesenta ladrones y 70 espadas").is_empty());
        assert!(eras("el año 3000 y la base 2").is_empty());
        assert!(eras("the 75th day").is_empty());
    }

    #[test]
    fn formats_are_read_and_a_movie_word_wins() {
        let format = |q: &str| QueryCues::read(q).format;
        assert_eq!(
            format("la película donde el día se repite"),
            Some(FormatCue::Movie)
        );
        assert_eq!(format("pelicula vieja ciberpunk"), Some(FormatCue::Movie));
        assert_eq!(
            format("the ghost in the shell sequel movie"),
            Some(FormatCue::Movie)
        );
        assert_eq!(
            format("la temporada de attack on titan"),
            Some(FormatCue::Series)
        );
        assert_eq!(format("la peli de la serie"), Some(FormatCue::Movie));
        assert_eq!(format("el ova de los caballeros"), Some(FormatCue::Ova));
        assert_eq!(format("una chica en silla de ruedas"), None);
        assert_eq!(format("un asesino en serie en un pueblo"), None);
        assert_eq!(
            QueryCues::read("una chica en silla de ruedas"),
            QueryCues::default()
        );
    }

    #[test]
    fn genres_are_read_from_words_and_phrases_of_both_languages() {
        let genres = |q: &str| QueryCues::read(q).genres;
        assert_eq!(
            genres("algo tranquilo, de alguien que viaja"),
            ["Slice of Life"]
        );
        assert_eq!(
            genres("una película de terror con robots"),
            ["Horror", "Mecha"]
        );
        assert_eq!(
            genres("Magical girls who fight, a sad one"),
            ["Mahou Shoujo", "Drama"]
        );
        // Whole words only: "banda" is a band, "bandada" (a flock) is not.
        assert!(genres("una bandada de pájaros").is_empty());
        let cues = QueryCues::read("una comedia romántica");
        let has = |list: &[&str]| list.iter().map(|g| g.to_string()).collect::<Vec<_>>();
        assert_eq!(cues.genre_share(&has(&["Comedy", "Romance", "Drama"])), 1.0);
        assert_eq!(cues.genre_share(&has(&["Comedy"])), 0.5);
        assert_eq!(QueryCues::read("a boy").genre_share(&has(&["Comedy"])), 0.0);
    }

    #[test]
    fn matches_need_a_cue_and_a_known_value() {
        let cues = QueryCues::read("una película de los 80");
        assert!(cues.era_matches(Some(1985)));
        assert!(!cues.era_matches(Some(1990)));
        assert!(!cues.era_matches(None));
        assert!(cues.format_matches(Some("MOVIE")));
        assert!(!cues.format_matches(Some("TV")));
        assert!(!cues.format_matches(None));
        let none = QueryCues::read("a boy and his dog");
        assert!(!none.era_matches(Some(1985)));
        assert!(!none.format_matches(Some("MOVIE")));
        assert!(FormatCue::Series.matches("TV_SHORT"));
    }
}
