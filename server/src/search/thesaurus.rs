//! English synonyms for the lexical branch, from WordNet (Debian's `wordnet-base`: the Princeton
//! WordNet 3.0 database files, nothing to download at run time).
//!
//! People describe an anime in their own words and synopses use others: "someone who travels
//! alone and helps people" against Mushishi's "as he journeys … providing aid". A query word
//! therefore also matches the other words of its most common senses ("travel": "journey";
//! "help": "aid", "assist"; "calm": "serene", "tranquil"), at a discount (see
//! [`super::lexical`]). Only the first senses count: WordNet lists each word's senses most
//! frequent first, and the rare ones are what makes thesaurus expansion noisy ("pirate" as a
//! plagiarist).
//!
//! The files are read once at start (~0.3 s). Without them, words match only themselves.

use std::{collections::HashMap, path::Path};

/// Where Debian's `wordnet-base` puts the database.
pub const DEBIAN_DATA_DIR: &str = crate::config::DEBIAN_WORDNET_DIR;
/// [`SearchParams`](super::params::SearchParams)`::lexical.synonym_senses`.
pub const SENSES: usize = super::params::PARAMS.lexical.synonym_senses;
/// [`SearchParams`](super::params::SearchParams)`::lexical.max_synonyms`.
pub const MAX_SYNONYMS: usize = super::params::PARAMS.lexical.max_synonyms;

/// Parts of speech as WordNet's file names and data lines spell them, with the suffix rules of
/// its `morphy` (how an inflected form is turned back into a lemma).
/// How an inflected form ends and what its lemma ends with instead ("ies" → "y").
type SuffixRules = &'static [(&'static str, &'static str)];

const PARTS: [(&str, char, SuffixRules); 4] = [
    (
        "noun",
        'n',
        &[
            ("s", ""),
            ("ses", "s"),
            ("xes", "x"),
            ("zes", "z"),
            ("ches", "ch"),
            ("shes", "sh"),
            ("men", "man"),
            ("ies", "y"),
        ],
    ),
    (
        "verb",
        'v',
        &[
            ("s", ""),
            ("ies", "y"),
            ("es", "e"),
            ("es", ""),
            ("ed", "e"),
            ("ed", ""),
            ("ing", "e"),
            ("ing", ""),
        ],
    ),
    (
        "adj",
        'a',
        &[("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    ),
    ("adv", 'r', &[]),
];

#[derive(Debug, thiserror::Error)]
pub enum ThesaurusError {
    #[error("cannot read WordNet's {file}: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("WordNet's {file} line {line} is malformed")]
    Malformed { file: String, line: usize },
}

/// Each lemma's synonyms from its first [`SENSES`] senses in every part of speech.
#[derive(Debug, Default)]
pub struct Thesaurus {
    /// (lemma, part of speech) → synonyms, most frequent sense first.
    synonyms: HashMap<(String, char), Vec<String>>,
    /// Irregular forms (WordNet's `*.exc`): (form, part of speech) → lemmas.
    exceptions: HashMap<(String, char), Vec<String>>,
}

impl Thesaurus {
    /// The synonyms `config` asks for (see its `wordnet_dir`; `none` turns them off).
    pub fn from_config(config: &crate::config::SearchConfig) -> Option<std::sync::Arc<Self>> {
        if config.wordnet_dir.as_os_str() == "none" {
            return None;
        }
        Self::load_or_warn(&config.wordnet_dir).map(std::sync::Arc::new)
    }

    /// Reads the WordNet database in `dir` (`index.*`, `data.*`, `*.exc`).
    pub fn load(dir: &Path) -> Result<Self, ThesaurusError> {
        let mut thesaurus = Self::default();
        for (name, part, _) in PARTS {
            let synsets = read_synsets(dir, name)?;
            let file = format!("index.{name}");
            for (n, line) in read(dir, &file)?.lines().enumerate() {
                if line.starts_with(' ') {
                    continue; // the licence header
                }
                let malformed = || ThesaurusError::Malformed {
                    file: file.clone(),
                    line: n + 1,
                };
                // lemma pos synset_cnt p_cnt [ptr_symbol…] sense_cnt tagsense_cnt offset…
                let fields: Vec<&str> = line.split_whitespace().collect();
                let pointers: usize = fields
                    .get(3)
                    .and_then(|f| f.parse().ok())
                    .ok_or_else(malformed)?;
                let offsets = fields.get(6 + pointers..).ok_or_else(malformed)?;
                let lemma = fields[0];
                let mut words: Vec<String> = Vec::new();
                for offset in offsets.iter().take(SENSES) {
                    for word in synsets.get(*offset).into_iter().flatten() {
                        if word != lemma && !words.contains(word) {
                            words.push(word.clone());
                        }
                    }
                }
                if !words.is_empty() {
                    thesaurus.synonyms.insert((lemma.to_string(), part), words);
                }
            }
            for line in read(dir, &format!("{name}.exc"))?.lines() {
                let mut fields = line.split_whitespace();
                if let Some(form) = fields.next() {
                    thesaurus
                        .exceptions
                        .entry((form.to_string(), part))
                        .or_default()
                        .extend(fields.map(String::from));
                }
            }
        }
        Ok(thesaurus)
    }

    /// The database in `dir`, or `None` (logged) when it is missing or unreadable.
    pub fn load_or_warn(dir: &Path) -> Option<Self> {
        let began = std::time::Instant::now();
        match Self::load(dir) {
            Ok(thesaurus) => {
                tracing::info!(lemmas = thesaurus.synonyms.len(), took = ?began.elapsed(), "WordNet loaded");
                Some(thesaurus)
            }
            Err(error) => {
                tracing::warn!(%error, "no WordNet (apt-get install wordnet-base): query words match only themselves");
                None
            }
        }
    }

    /// Single-word synonyms of `word` (lower case, any inflection), at most [`MAX_SYNONYMS`]:
    /// the words of its lemmas' first senses, taken in turns across parts of speech.
    pub fn synonyms(&self, word: &str) -> Vec<String> {
        let word = word.to_lowercase();
        // Each part of speech's synonyms, most frequent sense first; then taken in turns, so
        // a word with many noun senses does not crowd out its adjective ("calm": "serene").
        let mut lemmas: Vec<String> = vec![word.clone()];
        let mut lists: Vec<&[String]> = Vec::new();
        for (_, part, rules) in PARTS {
            let mut forms: Vec<String> = vec![word.clone()];
            forms.extend(
                self.exceptions
                    .get(&(word.clone(), part))
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            for (suffix, ending) in rules {
                if let Some(stem) = word.strip_suffix(suffix) {
                    forms.push(format!("{stem}{ending}"));
                }
            }
            for form in forms {
                if let Some(list) = self.synonyms.get(&(form.clone(), part)) {
                    lists.push(list);
                    if !lemmas.contains(&form) {
                        lemmas.push(form);
                    }
                }
            }
        }
        let mut out: Vec<String> = Vec::new();
        let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
        for i in 0..longest {
            for synonym in lists.iter().filter_map(|l| l.get(i)) {
                if !lemmas.contains(synonym) && !out.contains(synonym) {
                    out.push(synonym.clone());
                }
            }
        }
        out.truncate(MAX_SYNONYMS);
        out
    }
}

fn read(dir: &Path, file: &str) -> Result<String, ThesaurusError> {
    std::fs::read_to_string(dir.join(file)).map_err(|source| ThesaurusError::Read {
        file: file.to_string(),
        source,
    })
}

/// `data.<part>`: synset offset → its single-word, lower-case lemmas (multi-word lemmas and
/// proper names are left out: the lexical branch matches words, and names are not synonyms).
fn read_synsets(dir: &Path, part: &str) -> Result<HashMap<String, Vec<String>>, ThesaurusError> {
    let file = format!("data.{part}");
    let mut synsets = HashMap::new();
    for (n, line) in read(dir, &file)?.lines().enumerate() {
        if line.starts_with(' ') {
            continue;
        }
        let malformed = || ThesaurusError::Malformed {
            file: file.clone(),
            line: n + 1,
        };
        // offset lex_filenum ss_type w_cnt (hex) word lex_id [word lex_id…] …
        let fields: Vec<&str> = line.split_whitespace().collect();
        let count = fields
            .get(3)
            .and_then(|f| usize::from_str_radix(f, 16).ok())
            .ok_or_else(malformed)?;
        let words = (0..count)
            .map(|i| fields.get(4 + 2 * i).copied().ok_or_else(malformed))
            .collect::<Result<Vec<&str>, _>>()?
            .into_iter()
            // Adjectives carry a position marker: "galore(ip)".
            .map(|w| w.split('(').next().unwrap_or(w))
            .filter(|w| !w.contains('_') && w.chars().all(|c| c.is_lowercase() || c == '-'))
            .map(String::from)
            .collect();
        synsets.insert(fields[0].to_string(), words);
    }
    Ok(synsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synonyms_come_from_the_first_senses_of_each_lemma() {
        let dir = tempfile::tempdir().unwrap();
        let header = "  1 This software and database is being provided\n";
        let files = [
            // "travel": senses {travel, go}, {travel, journey}, {travel, trip}, {travel, wend}.
            (
                "index.verb",
                "travel v 4 1 @ 4 4 00000001 00000002 00000003 00000006  \nhelp v 1 1 @ 1 1 00000004  \ngo v 1 0 1 1 00000001  \n",
            ),
            (
                "data.verb",
                "00000001 38 v 02 travel 0 go 0 000 | a\n00000002 38 v 02 travel 0 journey 0 000 | b\n00000003 38 v 02 travel 0 trip 0 000 | c\n00000006 38 v 02 travel 0 wend 0 000 | f\n00000004 41 v 03 help 0 aid 0 Assist_Corp 0 000 | d\n",
            ),
            ("verb.exc", "went go\n"),
            ("index.noun", ""),
            ("data.noun", ""),
            ("noun.exc", ""),
            ("index.adj", "calm a 1 0 1 0 00000005  \n"),
            (
                "data.adj",
                "00000005 00 s 03 calm 0 serene(p) 0 tranquil 0 000 | e\n",
            ),
            ("adj.exc", ""),
            ("index.adv", ""),
            ("data.adv", ""),
            ("adv.exc", ""),
        ];
        for (name, text) in files {
            std::fs::write(dir.path().join(name), format!("{header}{text}")).unwrap();
        }
        let thesaurus = Thesaurus::load(dir.path()).unwrap();
        assert_eq!(
            thesaurus.synonyms("travels"),
            ["go", "journey", "trip"],
            "fourth sense left out"
        );
        assert_eq!(
            thesaurus.synonyms("Helped"),
            ["aid"],
            "proper names left out"
        );
        assert_eq!(thesaurus.synonyms("calm"), ["serene", "tranquil"]);
        assert_eq!(thesaurus.synonyms("went"), ["travel"], "irregular forms");
        assert!(thesaurus.synonyms("mushi").is_empty());
    }

    #[test]
    fn a_missing_or_broken_database_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Thesaurus::load(dir.path()),
            Err(ThesaurusError::Read { .. })
        ));
        // The server then runs without synonyms (words match only themselves).
        assert!(Thesaurus::load_or_warn(dir.path()).is_none());
        std::fs::write(dir.path().join("data.noun"), "00000001 03 n zz\n").unwrap();
        assert!(matches!(
            Thesaurus::load(dir.path()),
            Err(ThesaurusError::Malformed { .. })
        ));
    }
}
