//! Spanish queries are also read in English. The catalog is English and most queries are
//! Spanish: a Spanish word matches an English document only by accident, and the small local
//! embedder places a Spanish description farther from an English synopsis than the same
//! description in English. Apertium (Debian's `apertium-eng-spa`: rule-based, nothing to
//! download at run time) translates the query; the lexical branch then searches the words of
//! both texts and the vector branch the mean of both vectors (see `server eval` for what each
//! gains, per language).
//!
//! One Apertium pipeline runs for the life of the server, because starting one costs ~100 ms
//! (it loads its transducers) and a translation ~3 ms. It is fed one query at a time in
//! null-flush mode. A query counts as Spanish when Apertium's analyser knows most of its words
//! (it marks the others); English and romanised Japanese queries are left as typed. When
//! Apertium is missing, fails or takes longer than [`BUDGET`], the query is searched as typed.
//!
//! People type Spanish without its accents ("despues", "huerfano", "pelicula") and speak in
//! diminutives ("un pueblito", "una navecita"), and Apertium's analyser knows only the plain,
//! accented forms. When a Spanish query has words Apertium did not know, each one's plain forms
//! ([`base_forms`]) and accented spellings ([`accent_variants`]) are put to Apertium in one more
//! call and the first it knows replaces the word before the query is translated again.
//!
//! People also type everyday words Apertium's dictionary lacks: clipped ones ("profe", "peli",
//! "prepa") and regional ones ("chavo", "morra", "pibe", "nomás"). [`EVERYDAY_WORDS`] puts such
//! a word, when Apertium did not know it, into standard Spanish in the same way.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout, Command},
    sync::Mutex,
};

/// Where Debian's `apertium-eng-spa` puts its data.
pub const DEBIAN_DATA_DIR: &str = "/usr/share/apertium/apertium-eng-spa";
/// Time one translation may take; past it the query is searched as typed.
pub const BUDGET: Duration = Duration::from_millis(500);
/// A query is translated when at least this share of its words are Spanish words Apertium knows.
pub const MIN_SPANISH_SHARE: f32 = 0.5;
/// Queries are bounded before they get here; this bounds what a translation may return.
const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// Unknown words of one query whose other spellings are tried (the rest stay as typed).
const MAX_RESTORED_WORDS: usize = 12;

/// The pipeline of Apertium's `spa-eng` mode, one program per stage, each flushing its output
/// at every NUL (`-z`). Generation without `-n`, so unknown words come out marked with `*`.
const STAGES: [&str; 12] = [
    "lt-proc -z {d}/spa-eng.automorf.bin",
    "apertium-wblank-attach",
    "apertium-tagger -z -g {d}/spa-eng.prob",
    "apertium-pretransfer -z",
    "lt-proc -z -b {d}/spa-eng.autobil.bin",
    "lrx-proc -z -m {d}/spa-eng.autolex.bin",
    "apertium-transfer -z -b {d}/apertium-eng-spa.spa-eng.t1x {d}/spa-eng.t1x.bin",
    "apertium-interchunk -z {d}/apertium-eng-spa.spa-eng.t2x {d}/spa-eng.t2x.bin",
    "apertium-postchunk -z {d}/apertium-eng-spa.spa-eng.t3x {d}/spa-eng.t3x.bin",
    "apertium-wblank-detach",
    "lt-proc -z -g {d}/spa-eng.autogen.bin",
    "lt-proc -z -p {d}/spa-eng.autopgen.bin",
];
/// NULs written after each query: one alone leaves the query inside the tagger and transfer
/// stages until the next input arrives; three push it all the way through (measured).
const FLUSHES: usize = 3;

/// What Apertium made of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Translation {
    /// The English text, without Apertium's marks.
    pub english: String,
    /// Share of the query's words the Spanish analyser knew.
    pub spanish_share: f32,
    /// The words it did not know, as typed (without the punctuation after them), once each.
    pub unknown: Vec<String>,
}

impl Translation {
    /// Reads Apertium's output: words it did not know start with `*` (kept, unmarked: names and
    /// Japanese words pass through as typed); `#` and `@` mark words it could not generate or
    /// transfer.
    pub fn from_output(output: &str) -> Self {
        let mut words = 0usize;
        let mut unknown_count = 0usize;
        let mut unknown: Vec<String> = Vec::new();
        let mut english: Vec<String> = Vec::new();
        for token in output.split_whitespace() {
            let has_letter = token.chars().any(char::is_alphabetic);
            if has_letter {
                words += 1;
                if let Some(marked) = token.strip_prefix('*') {
                    unknown_count += 1;
                    let word: String = marked.chars().take_while(|c| c.is_alphanumeric()).collect();
                    if !word.is_empty() && !unknown.contains(&word) {
                        unknown.push(word);
                    }
                }
            }
            let clean: String = token
                .chars()
                .filter(|c| !matches!(c, '*' | '#' | '@' | '\\'))
                .collect();
            if !clean.is_empty() {
                english.push(clean);
            }
        }
        Self {
            english: english.join(" "),
            spanish_share: if words == 0 {
                0.0
            } else {
                (words - unknown_count) as f32 / words as f32
            },
            unknown,
        }
    }

    /// Whether the query read as Spanish (and the translation is worth searching).
    pub fn is_spanish(&self) -> bool {
        self.spanish_share >= MIN_SPANISH_SHARE && !self.english.is_empty()
    }
}

/// The query as Apertium's stream format accepts it: its reserved characters (`^$/<>@*#[]{}\`)
/// and NULs become spaces; they carry nothing a search reads.
pub fn stream_text(query: &str) -> String {
    query
        .chars()
        .map(|c| match c {
            '^' | '$' | '/' | '<' | '>' | '@' | '*' | '#' | '[' | ']' | '{' | '}' | '\\' | '\0' => {
                ' '
            }
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// The spellings of an unaccented word with one accent Spanish may have put on it: each vowel in
/// turn, last first (Spanish stress marks fall near the end: "despues" → "después"), then each n
/// as ñ; a capital first letter stays ("Despues" → "Después": names get spellings too, and
/// Apertium knows none of them). Empty for a word that has an accent or a letter outside a–z
/// already, another capital, or fewer than three letters.
pub fn accent_variants(word: &str) -> Vec<String> {
    // ASCII first, so slicing past the first letter stays on a character boundary.
    if !word.is_ascii() || word.len() < 3 {
        return Vec::new();
    }
    let capital = word.starts_with(|c: char| c.is_ascii_uppercase());
    let lower = word.to_ascii_lowercase();
    if lower[1..] != word[1..] || !lower.bytes().all(|b| b.is_ascii_lowercase()) {
        return Vec::new();
    }
    let letters: Vec<char> = lower.chars().collect();
    let accented = |c: char| match c {
        'a' => Some('á'),
        'e' => Some('é'),
        'i' => Some('í'),
        'o' => Some('ó'),
        'u' => Some('ú'),
        _ => None,
    };
    let with = |at: usize, letter: char| {
        let mut spelled = letters.clone();
        spelled[at] = letter;
        if capital {
            let first: String = spelled[0].to_uppercase().collect();
            first + &spelled[1..].iter().collect::<String>()
        } else {
            spelled.into_iter().collect::<String>()
        }
    };
    let vowels = (0..letters.len())
        .rev()
        .filter_map(|at| accented(letters[at]).map(|letter| with(at, letter)));
    let enye = (0..letters.len())
        .filter(|&at| letters[at] == 'n')
        .map(|at| with(at, 'ñ'));
    vowels.chain(enye).collect()
}

/// The plain words a diminutive, superlative or augmentative of everyday Spanish may come from,
/// for the analyser to pick the one it knows: "pueblito" → "pueblo", "navecita" → "nave",
/// "chiquitos" → "chicos", "loquísima" → "loca", "tristísimo" → "triste", "grandote" →
/// "grande". Accents on the suffix are optional, as people type them. Empty for a word with
/// none of these endings or a capital (a name, most likely).
pub fn base_forms(word: &str) -> Vec<String> {
    if word.chars().count() < 5 || !word.chars().all(|c| c.is_lowercase()) {
        return Vec::new();
    }
    let (word, plural) = match word.strip_suffix('s') {
        Some(singular) => (singular, "s"),
        None => (word, ""),
    };
    // The stem's last consonant as the plain word spells it: "loqu-" is "loc-", "amigu-" "amig-".
    let respell = |stem: &str| -> String {
        if let Some(s) = stem.strip_suffix("qu") {
            format!("{s}c")
        } else if let Some(s) = stem.strip_suffix("gu") {
            format!("{s}g")
        } else {
            stem.to_string()
        }
    };
    let mut forms: Vec<String> = Vec::new();
    for suffix in ["ísim", "isim", "cit", "it", "ot"] {
        for (gender, endings) in [
            ("o", ["o", "e", "a"]),
            ("a", ["a", "e", "o"]),
            ("e", ["e", "o", "a"]),
        ] {
            let Some(stem) = word.strip_suffix(&format!("{suffix}{gender}")) else {
                continue;
            };
            if stem.chars().count() < 2 {
                continue;
            }
            // "navecita" comes from "nave": after -cit- the stem is the whole word.
            let candidates: Vec<String> = if suffix == "cit" {
                vec![stem.to_string()]
            } else {
                endings
                    .iter()
                    .map(|e| format!("{}{e}", respell(stem)))
                    .collect()
            };
            for form in candidates {
                let form = format!("{form}{plural}");
                if !forms.contains(&form) {
                    forms.push(form);
                }
            }
        }
    }
    forms
}

/// Everyday Spanish words that Apertium's dictionary lacks (checked against Debian's
/// `apertium-eng-spa` 2024; `it::translate` fails when one becomes known or a replacement
/// does not), each with standard Spanish it knows. Clipped words and common Mexican,
/// Rioplatense and Peninsular ones for people, school, money and work; not slang that is also
/// an ordinary word ("lana" is wool to Apertium and money in Mexico): only unknown words are
/// replaced, so such a word keeps Apertium's reading.
pub const EVERYDAY_WORDS: [(&str, &str); 42] = [
    // Clipped.
    ("profe", "profesor"),
    ("profes", "profesores"),
    ("peli", "película"),
    ("pelis", "películas"),
    ("prepa", "escuela secundaria"),
    ("secu", "secundaria"),
    ("insti", "instituto"),
    ("uni", "universidad"),
    ("compu", "computadora"),
    ("poli", "policía"),
    ("finde", "fin de semana"),
    ("depa", "departamento"),
    ("compi", "compañero"),
    ("boli", "bolígrafo"),
    // People.
    ("chavo", "chico"),
    ("chava", "chica"),
    ("chavos", "chicos"),
    ("chavas", "chicas"),
    ("morra", "chica"),
    ("morras", "chicas"),
    ("chamaco", "niño"),
    ("chamaca", "niña"),
    ("chamacos", "niños"),
    ("escuincle", "niño"),
    ("escuincles", "niños"),
    ("pibe", "chico"),
    ("piba", "chica"),
    ("pibes", "chicos"),
    ("güey", "tipo"),
    ("wey", "tipo"),
    ("cuate", "amigo"),
    ("cuates", "amigos"),
    ("compa", "compañero"),
    ("compas", "compañeros"),
    // Money, work, and how things are.
    ("varo", "dinero"),
    ("guita", "dinero"),
    ("chamba", "trabajo"),
    ("laburo", "trabajo"),
    ("nomás", "solamente"),
    ("nomas", "solamente"),
    ("ahorita", "ahora"),
    ("chido", "estupendo"),
];

/// The standard Spanish for `word` if it is one of [`EVERYDAY_WORDS`] (any capitalisation).
pub fn everyday_word(word: &str) -> Option<&'static str> {
    let lower = word.to_lowercase();
    EVERYDAY_WORDS
        .iter()
        .find(|(typed, _)| *typed == lower)
        .map(|&(_, standard)| standard)
}

/// `query` with each whole word that is a key of `spellings` replaced by its value.
fn respelled(query: &str, spellings: &[(String, String)]) -> String {
    let mut out = String::with_capacity(query.len() + 8);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let replacement = spellings.iter().find(|(typed, _)| typed == word);
        out.push_str(replacement.map_or(word.as_str(), |(_, known)| known.as_str()));
        word.clear();
    };
    for c in query.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `path` as one single-quoted `sh` word, whatever characters it holds.
pub(crate) fn shell_quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

struct Pipeline {
    shell: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Pipeline {
    fn start(data: &Path) -> std::io::Result<Self> {
        let quoted = shell_quoted(data);
        let script = STAGES
            .iter()
            .map(|stage| stage.replace("{d}", &quoted))
            .collect::<Vec<_>>()
            .join(" | ");
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let input = shell.stdin.take().expect("piped");
        let output = BufReader::new(shell.stdout.take().expect("piped"));
        Ok(Self {
            shell,
            input,
            output,
        })
    }

    async fn translate(&mut self, text: &str) -> std::io::Result<String> {
        let mut message = stream_text(text).into_bytes();
        message.extend(std::iter::repeat_n(0u8, FLUSHES));
        self.input.write_all(&message).await?;
        self.input.flush().await?;
        let mut answer = Vec::new();
        let mut first = None;
        for _ in 0..FLUSHES {
            let before = answer.len();
            self.output.read_until(0, &mut answer).await?;
            if answer.len() == before || answer.last() != Some(&0) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "apertium stopped",
                ));
            }
            first.get_or_insert(answer.len() - 1);
            if answer.len() > MAX_OUTPUT_BYTES {
                return Err(std::io::Error::other("apertium answered too much"));
            }
        }
        let end = first.unwrap_or(0);
        Ok(String::from_utf8_lossy(&answer[..end]).into_owned())
    }
}

/// The query's translation, after respelling the words Apertium did not know (their plain forms,
/// their accents) when the query reads as Spanish: an English query's unknown words are
/// English, not Spanish typed loosely, and are not tried.
async fn read_in_english(pipeline: &mut Pipeline, query: &str) -> std::io::Result<Translation> {
    let output = pipeline.translate(query).await?;
    let first = Translation::from_output(&output);
    if !first.is_spanish() {
        return Ok(first);
    }
    let tried: Vec<(String, Vec<String>)> = first
        .unknown
        .iter()
        .cloned()
        .map(|word| {
            let mut variants: Vec<String> =
                everyday_word(&word).map(String::from).into_iter().collect();
            variants.extend(base_forms(&word));
            variants.extend(accent_variants(&word));
            (word, variants)
        })
        .filter(|(_, variants)| !variants.is_empty())
        .take(MAX_RESTORED_WORDS)
        .collect();
    if tried.is_empty() {
        return Ok(first);
    }
    // All the spellings in one call: Apertium marks each one its analyser does not know, so the
    // others are words it knows, whatever they were translated to.
    let spellings_asked: Vec<&str> = tried
        .iter()
        .flat_map(|(_, variants)| variants.iter().map(String::as_str))
        .collect();
    let answer = pipeline.translate(&spellings_asked.join(" ")).await?;
    let still_unknown = Translation::from_output(&answer).unknown;
    let spellings: Vec<(String, String)> = tried
        .iter()
        .filter_map(|(word, variants)| {
            let known = variants.iter().find(|v| !still_unknown.contains(v))?;
            Some((word.clone(), known.clone()))
        })
        .collect();
    if spellings.is_empty() {
        return Ok(first);
    }
    let restored = pipeline.translate(&respelled(query, &spellings)).await?;
    Ok(Translation::from_output(&restored))
}

/// Spanish to English through one long-lived Apertium pipeline.
pub struct Translator {
    data: PathBuf,
    pipeline: Mutex<Option<Pipeline>>,
}

impl std::fmt::Debug for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translator")
            .field("data", &self.data)
            .finish()
    }
}

impl Translator {
    /// A translator reading Apertium's `spa-eng` data from `data`; `None` (with a warning) when
    /// the data or the programs are missing, so the server starts and searches queries as typed.
    pub fn new(data: &Path) -> Option<Self> {
        let present = data.join("spa-eng.autobil.bin").is_file()
            && std::process::Command::new("lt-proc")
                .arg("-v")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok();
        if !present {
            tracing::warn!(
                data = %data.display(),
                "Apertium's Spanish-English data is missing (apt-get install apertium-eng-spa): \
                 Spanish queries are searched as typed"
            );
            return None;
        }
        Some(Self {
            data: data.to_path_buf(),
            pipeline: Mutex::new(None),
        })
    }

    /// Names the translation data and how it is read (plain forms, accents and
    /// [`EVERYDAY_WORDS`] tried), for the results cache's pipeline fingerprint: other data or
    /// another reading, other pages.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let stamp = std::fs::metadata(self.data.join("spa-eng.autobil.bin"))
            .map(|m| m.len())
            .unwrap_or(0);
        let everyday = sha2::Sha256::digest(format!("{EVERYDAY_WORDS:?}").as_bytes());
        format!(
            "apertium-spa-eng:{stamp}:plain-forms-and-accents-2:{}",
            &crate::catalog::document::hex(&everyday)[..12]
        )
    }

    /// Starts the pipeline and waits for its first answer, so that the transducers load before
    /// the first Spanish query rather than inside its [`BUDGET`] (~100 ms alone, past the budget
    /// on a busy machine: the query was then searched untranslated). Whether it answered.
    pub async fn warm_up(&self) -> bool {
        self.translate("hola").await.is_some()
    }

    /// The query in English, or `None` when Apertium failed or ran out of time (the next call
    /// starts a new pipeline).
    pub async fn translate(&self, query: &str) -> Option<Translation> {
        let mut slot = self.pipeline.lock().await;
        if slot.is_none() {
            match Pipeline::start(&self.data) {
                Ok(pipeline) => *slot = Some(pipeline),
                Err(error) => {
                    tracing::warn!(%error, "apertium did not start: query searched as typed");
                    return None;
                }
            }
        }
        let pipeline = slot.as_mut().expect("just started");
        match tokio::time::timeout(BUDGET, read_in_english(pipeline, query)).await {
            Ok(Ok(translation)) => Some(translation),
            failed => {
                match failed {
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "translation failed: query searched as typed")
                    }
                    _ => {
                        tracing::warn!(budget = ?BUDGET, "translation timed out: query searched as typed")
                    }
                }
                // Its stream may be out of step now: start afresh next time.
                if let Some(mut broken) = slot.take() {
                    let _ = broken.shell.start_kill();
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_forms_undo_diminutives_superlatives_and_augmentatives() {
        let has = |word: &str, plain: &str| {
            let forms = base_forms(word);
            assert!(forms.iter().any(|f| f == plain), "{word} → {forms:?}");
        };
        has("pueblito", "pueblo");
        has("navecita", "nave");
        has("chiquitos", "chicos");
        has("abejita", "abeja");
        has("loquísima", "loca");
        has("tristísimo", "triste");
        has("rarisimos", "raros");
        has("grandote", "grande");
        has("amiguita", "amiga");
        // No such ending, a capital (a name, most likely), or nothing before the ending.
        for word in ["Chiquita", "casa", "nave", "cita"] {
            assert!(
                base_forms(word).is_empty(),
                "{word} → {:?}",
                base_forms(word)
            );
        }
    }

    #[test]
    fn accent_variants_put_one_accent_on_a_plain_word() {
        let spelled = |word: &str| accent_variants(word);
        assert_eq!(spelled("pais"), ["país", "páis"]);
        assert_eq!(spelled("despues"), ["después", "despúes", "déspues"]);
        assert_eq!(spelled("nino"), ["ninó", "níno", "ñino", "niño"]);
        // A capital stays, on an accented vowel too.
        assert_eq!(spelled("Despues"), ["Después", "Despúes", "Déspues"]);
        assert_eq!(spelled("Esta"), ["Está", "Ésta"]);
        // Accented already, capitals inside, a digit, or too short: nothing to try.
        for word in ["país", "Ñandu", "TENMA", "de", "r2d2"] {
            assert!(spelled(word).is_empty(), "{word}");
        }
    }

    #[test]
    fn unknown_words_are_read_from_the_marks_and_respelled_whole() {
        assert_eq!(
            Translation::from_output("a *huerfano, that *Tenma saw *huerfano").unknown,
            ["huerfano", "Tenma"]
        );
        let spellings = [
            ("pais".to_string(), "país".to_string()),
            ("despues".to_string(), "después".to_string()),
        ];
        assert_eq!(
            respelled("el pais, y despues paisaje", &spellings),
            "el país, y después paisaje"
        );
    }

    #[test]
    fn marks_tell_spanish_from_other_languages() {
        let spanish = Translation::from_output("*Naruto And *Sasuke litigate in the valley");
        assert_eq!(spanish.english, "Naruto And Sasuke litigate in the valley");
        assert!((spanish.spanish_share - 5.0 / 7.0).abs() < 1e-6);
        assert!(spanish.is_spanish());
        let english = Translation::from_output("To *boy *who *travels *alone and *helps");
        assert!(!english.is_spanish(), "{english:?}");
        let romaji = Translation::from_output("*Shingeki No *Kyojin");
        assert!(!romaji.is_spanish());
        assert_eq!(Translation::from_output("").spanish_share, 0.0);
        assert_eq!(Translation::from_output("#do @que").english, "do que");
    }

    #[test]
    fn reserved_stream_characters_never_reach_apertium() {
        assert_eq!(
            stream_text("a^b$c/d<e>f@g*h#i[j]k{l}m\\n\0o"),
            "a b c d e f g h i j k l m n o"
        );
        assert_eq!(stream_text("¿qué tal? ¡bien!"), "¿qué tal? ¡bien!");
    }
}
