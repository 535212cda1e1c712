//! Spanish queries are also read in English. The catalog is English and most queries are
//! Spanish: a Spanish word matches an English document only by accident, and the small local
//! embedder places a Spanish description farther from an English synopsis than the same
//! description in English. Apertium (Debian's `apertium-eng-spa`: rule-based, nothing to
//! download at run time) translates the query; the lexical branch then searches the words of
//! both texts and the vector branch the mean of both vectors (see `server eval` for what each
//! gains, per language).
//!
//! A few Apertium pipelines ([`PIPELINES`]) run for the life of the server, because starting
//! one costs ~100 ms (it loads its transducers) and a translation ~3 ms. Each is fed one query
//! at a time in null-flush mode; a query waits for a free one within its [`BUDGET`] (the wait
//! counts), so a queue of searches cannot hold a search past its budget. Each stage is a process
//! of its own (no shell between), so a pipeline that fails is killed whole. A query counts as Spanish when Apertium's analyser knows most of its words
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
pub const DEBIAN_DATA_DIR: &str = crate::config::DEBIAN_APERTIUM_DIR;
/// Time one translation may take; past it the query is searched as typed.
pub const BUDGET: Duration = Duration::from_millis(500);
/// [`SearchParams`](super::params::SearchParams)`::translate.min_spanish_share`.
pub const MIN_SPANISH_SHARE: f32 = super::params::PARAMS.translate.min_spanish_share;
/// Queries are bounded before they get here; this bounds what a translation may return.
const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// [`SearchParams`](super::params::SearchParams)`::translate.max_restored_words`.
const MAX_RESTORED_WORDS: usize = super::params::PARAMS.translate.max_restored_words;
/// [`SearchParams`](super::params::SearchParams)`::translate.max_spellings_per_word`.
const MAX_SPELLINGS_PER_WORD: usize = super::params::PARAMS.translate.max_spellings_per_word;
/// [`SearchParams`](super::params::SearchParams)`::translate.max_spellings`.
const MAX_SPELLINGS: usize = super::params::PARAMS.translate.max_spellings;
/// [`SearchParams`](super::params::SearchParams)`::translate.max_respelled_chars`.
const MAX_RESPELLED_CHARS: usize = super::params::PARAMS.translate.max_respelled_chars;
/// The most one call to a pipeline may carry: a whole query at its longest (1 000 characters of
/// up to 4 bytes) and the respellings fit; anything longer is searched as typed.
pub const MAX_CALL_BYTES: usize = 4 * 1024 + 64;
/// Pipelines kept running: a search waits for a free one (within its budget) rather than for
/// every search ahead of it.
pub const PIPELINES: usize = 2;

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

/// One `spa-eng` pipeline: a process per stage, each reading the one before through a pipe.
struct Pipeline {
    stages: Vec<Child>,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Pipeline {
    fn start(data: &Path) -> std::io::Result<Self> {
        let data = data.display().to_string();
        let mut stages: Vec<Child> = Vec::with_capacity(STAGES.len());
        let mut input = None;
        let mut previous: Option<ChildStdout> = None;
        for stage in STAGES {
            let mut words = stage
                .split_whitespace()
                .map(|word| word.replace("{d}", &data));
            let program = words.next().expect("a stage names its program");
            let stdin: Stdio = match previous.take() {
                Some(stdout) => stdout.try_into()?,
                None => Stdio::piped(),
            };
            let mut child = Command::new(program)
                .args(words)
                .stdin(stdin)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            if input.is_none() {
                input = child.stdin.take();
            }
            previous = child.stdout.take();
            stages.push(child);
        }
        Ok(Self {
            stages,
            input: input.expect("the first stage's input is piped"),
            output: BufReader::new(previous.expect("the last stage's output is piped")),
        })
    }

    /// Kills every stage now (dropping the children would too, but not before the next start).
    fn kill(mut self) {
        for stage in &mut self.stages {
            let _ = stage.start_kill();
        }
    }

    async fn translate(&mut self, text: &str) -> std::io::Result<String> {
        let mut message = stream_text(text).into_bytes();
        if message.len() > MAX_CALL_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "too long for one call",
            ));
        }
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

/// The unknown words of a Spanish query worth respelling, each with the spellings to try
/// (bounded: see [`MAX_SPELLINGS`]).
fn spellings_to_try(unknown: &[String]) -> Vec<(String, Vec<String>)> {
    let mut tried: Vec<(String, Vec<String>)> = Vec::new();
    let mut total = 0;
    for word in unknown {
        if tried.len() == MAX_RESTORED_WORDS || total == MAX_SPELLINGS {
            break;
        }
        if word.chars().count() > MAX_RESPELLED_CHARS {
            continue;
        }
        let mut variants: Vec<String> = everyday_word(word).map(String::from).into_iter().collect();
        variants.extend(base_forms(word));
        variants.extend(accent_variants(word));
        variants.truncate(MAX_SPELLINGS_PER_WORD.min(MAX_SPELLINGS - total));
        if !variants.is_empty() {
            total += variants.len();
            tried.push((word.clone(), variants));
        }
    }
    tried
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
    let tried = spellings_to_try(&first.unknown);
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
    /// [`PIPELINES`] slots, each started on first use and again after a failure.
    pipelines: Vec<Mutex<Option<Pipeline>>>,
    budget: Duration,
}

impl std::fmt::Debug for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translator")
            .field("data", &self.data)
            .finish()
    }
}

impl Translator {
    /// The query translator `config` asks for (see its `apertium_dir`; `none` turns it off).
    pub fn from_config(config: &crate::config::SearchConfig) -> Option<std::sync::Arc<Self>> {
        if config.apertium_dir.as_os_str() == "none" {
            return None;
        }
        Self::new(&config.apertium_dir).map(std::sync::Arc::new)
    }

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
            pipelines: (0..PIPELINES).map(|_| Mutex::new(None)).collect(),
            budget: BUDGET,
        })
    }

    /// The same translator with another time budget per query (tests: a budget too short for
    /// any translation).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// The process ids of every running pipeline stage (tests check that none outlives a
    /// failure).
    pub async fn process_ids(&self) -> Vec<u32> {
        let mut ids = Vec::new();
        for slot in &self.pipelines {
            if let Some(pipeline) = slot.lock().await.as_ref() {
                ids.extend(pipeline.stages.iter().filter_map(Child::id));
            }
        }
        ids
    }

    /// A free pipeline slot, waiting for one until `deadline`.
    async fn free_slot(
        &self,
        deadline: tokio::time::Instant,
    ) -> Option<tokio::sync::MutexGuard<'_, Option<Pipeline>>> {
        if let Some(free) = self.pipelines.iter().find_map(|slot| slot.try_lock().ok()) {
            return Some(free);
        }
        let waits = self.pipelines.iter().map(|slot| Box::pin(slot.lock()));
        let first_free = futures_util::future::select_all(waits);
        tokio::time::timeout_at(deadline, first_free)
            .await
            .ok()
            .map(|(guard, _, _)| guard)
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
            "apertium-spa-eng:{stamp}:plain-forms-and-accents-3:{}",
            &hex::encode(everyday)[..12]
        )
    }

    /// Starts the pipelines and waits for their first answers, so that the transducers load
    /// before the first Spanish query rather than inside its [`BUDGET`] (~100 ms alone, past the
    /// budget on a busy machine: the query was then searched untranslated). Whether they all
    /// answered.
    pub async fn warm_up(&self) -> bool {
        let mut answered = true;
        for slot in &self.pipelines {
            let mut slot = slot.lock().await;
            answered &= self
                .translate_in(&mut slot, "hola", self.budget.max(Duration::from_secs(5)))
                .await
                .is_some();
        }
        answered
    }

    /// The query in English, or `None` when Apertium failed or ran out of time (the next call
    /// starts a new pipeline).
    pub async fn translate(&self, query: &str) -> Option<Translation> {
        if stream_text(query).len() > MAX_CALL_BYTES {
            tracing::warn!(
                bytes = query.len(),
                "query too long to translate: searched as typed"
            );
            return None;
        }
        let started = tokio::time::Instant::now();
        let Some(mut slot) = self.free_slot(started + self.budget).await else {
            crate::metrics::translation_failed("busy");
            tracing::warn!(budget = ?self.budget, "no translator free in time: query searched as typed");
            return None;
        };
        let left = self.budget.saturating_sub(started.elapsed());
        self.translate_in(&mut slot, query, left).await
    }

    /// [`translate`](Self::translate) in one pipeline slot, within `budget`.
    async fn translate_in(
        &self,
        slot: &mut Option<Pipeline>,
        query: &str,
        budget: Duration,
    ) -> Option<Translation> {
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
        match tokio::time::timeout(budget, read_in_english(pipeline, query)).await {
            Ok(Ok(translation)) => Some(translation),
            failed => {
                match failed {
                    Ok(Err(error)) => {
                        crate::metrics::translation_failed("error");
                        tracing::warn!(%error, "translation failed: query searched as typed")
                    }
                    _ => {
                        crate::metrics::translation_failed("timeout");
                        tracing::warn!(?budget, "translation timed out: query searched as typed")
                    }
                }
                // Its stream may be out of step now: every stage goes, and the slot starts
                // afresh next time.
                if let Some(broken) = slot.take() {
                    broken.kill();
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
    fn respellings_tried_for_one_query_are_bounded() {
        // Thirteen made-up words of up to 20 letters, vowels and n's all through.
        let unknown: Vec<String> = (0..13)
            .map(|i| "nanenoni".repeat(3)[..12 + i % 9].to_string())
            .collect();
        let tried = spellings_to_try(&unknown);
        let asked: Vec<&str> = tried
            .iter()
            .flat_map(|(_, v)| v.iter().map(String::as_str))
            .collect();
        assert!(asked.len() <= MAX_SPELLINGS, "{}", asked.len());
        assert!(tried.iter().all(|(_, v)| v.len() <= MAX_SPELLINGS_PER_WORD));
        assert!(asked.join(" ").len() <= MAX_CALL_BYTES);
        // A real word keeps its spellings, the accented one among them.
        let tried = spellings_to_try(&["despues".to_string(), "companero".to_string()]);
        assert!(tried[0].1.contains(&"después".to_string()));
        assert!(tried[1].1.contains(&"compañero".to_string()));
        // A word longer than any Spanish word worth respelling is left as typed.
        assert!(spellings_to_try(&["a".repeat(MAX_RESPELLED_CHARS + 1)]).is_empty());
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
