//! The interface in English and Spanish. The language comes from the `zenbu_lang` cookie (set by
//! the switch in the site header, `/lang?to=es`), else from the browser's `Accept-Language`,
//! else English. The server writes it into `<html lang>`; the browser reads it back from there
//! when it hydrates, so both render the same words.
//!
//! Every visible word is in [`Texts`] (one static table per language) or in a method of
//! [`Lang`] when it has numbers or names in it.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Name of the cookie that keeps the chosen language.
pub const COOKIE: &str = "zenbu_lang";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Lang {
    En,
    Es,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Es];

    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Es => "es",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        match code.trim().to_ascii_lowercase().as_str() {
            "en" => Some(Lang::En),
            "es" => Some(Lang::Es),
            _ => None,
        }
    }

    /// The language's own name, for the switch.
    pub fn name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Es => "Español",
        }
    }

    /// The language for a request: a valid cookie wins, then the first supported language in
    /// `Accept-Language` by quality (`es-MX,es;q=0.9,en;q=0.8` → Spanish), then English.
    pub fn negotiate(cookie: Option<&str>, accept_language: Option<&str>) -> Self {
        if let Some(lang) = cookie.and_then(Self::from_code) {
            return lang;
        }
        let mut offers: Vec<(f32, usize, Lang)> = accept_language
            .unwrap_or_default()
            .split(',')
            .enumerate()
            .filter_map(|(position, item)| {
                let mut parts = item.split(';');
                let tag = parts.next()?.trim();
                let primary = tag.split('-').next()?;
                let lang = Self::from_code(primary)?;
                let quality = parts
                    .find_map(|p| p.trim().strip_prefix("q="))
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                (quality > 0.0).then_some((quality, position, lang))
            })
            .collect();
        offers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        offers.first().map_or(Lang::En, |offer| offer.2)
    }

    pub fn texts(self) -> &'static Texts {
        match self {
            Lang::En => &EN,
            Lang::Es => &ES,
        }
    }

    /// "this year" / "this month".
    pub fn period(self, period: &str) -> &'static str {
        match (self, period) {
            (Lang::En, "year") => "this year",
            (Lang::En, _) => "this month",
            (Lang::Es, "year") => "este año",
            (Lang::Es, _) => "este mes",
        }
    }

    /// "7 of 10 searches left this year (resets on 2027-01-01)."
    pub fn searches_left(self, left: i64, limit: i64, period: &str, resets_on: &str) -> String {
        let period = self.period(period);
        match self {
            Lang::En => {
                format!("{left} of {limit} searches left {period} (resets on {resets_on}).")
            }
            Lang::Es => format!(
                "Te quedan {left} de {limit} búsquedas {period} (se renuevan el {resets_on})."
            ),
        }
    }

    /// "Used 3 of 30 searches this month; 27 left, resets on 2026-12-01."
    pub fn usage(self, used: i64, limit: i64, period: &str, resets_on: &str) -> String {
        let period = self.period(period);
        let left = (limit - used).max(0);
        let used = used.min(limit);
        match self {
            Lang::En => format!(
                "Used {used} of {limit} searches {period}; {left} left, resets on {resets_on}."
            ),
            Lang::Es => format!(
                "Has usado {used} de {limit} búsquedas {period}; te quedan {left}, se renuevan el {resets_on}."
            ),
        }
    }

    pub fn quota_used_up(self, limit: i64, period: &str, resets_on: &str) -> String {
        let period = self.period(period);
        match self {
            Lang::En => format!(
                "You have used all {limit} text searches {period}. They come back on {resets_on}."
            ),
            Lang::Es => format!(
                "Has usado las {limit} búsquedas de texto {period}. Vuelven el {resets_on}."
            ),
        }
    }

    pub fn too_many_new_visitors(self, per_day: i64) -> String {
        match self {
            Lang::En => format!(
                "Your network has started {per_day} new anonymous visitors in the last 24 hours, \
                 the most we allow (clearing cookies does not reset the allowance)."
            ),
            Lang::Es => format!(
                "Tu red ha iniciado {per_day} visitantes anónimos nuevos en las últimas 24 horas, \
                 el máximo que permitimos (borrar las cookies no renueva las búsquedas)."
            ),
        }
    }

    pub fn too_many_network_searches(self, per_day: i64) -> String {
        match self {
            Lang::En => format!(
                "Your network has made {per_day} searches without an account in the last 24 \
                 hours, the most we allow. With a free account you search on your own allowance."
            ),
            Lang::Es => format!(
                "Tu red ha hecho {per_day} búsquedas sin cuenta en las últimas 24 horas, el \
                 máximo que permitimos. Con una cuenta gratuita buscas con tu propio cupo."
            ),
        }
    }

    pub fn query_too_long(self, max: usize) -> String {
        match self {
            Lang::En => format!("The description is too long: at most {max} characters."),
            Lang::Es => format!("La descripción es demasiado larga: como máximo {max} caracteres."),
        }
    }

    /// Why a link's filters were refused; the search did not run and cost nothing.
    pub fn bad_filter(self, problem: &crate::search::FilterProblem) -> String {
        use crate::search::{FilterProblem, YEARS};
        let (first, last) = (YEARS.start(), YEARS.end());
        match (self, problem) {
            (Lang::En, FilterProblem::UnknownFormat(v)) => {
                format!(
                    "This link asks for a format Zenbu does not know (“{v}”): choose one in the form. The search did not run."
                )
            }
            (Lang::Es, FilterProblem::UnknownFormat(v)) => {
                format!(
                    "Este enlace pide un formato que Zenbu no conoce («{v}»): elige uno en el formulario. La búsqueda no se hizo."
                )
            }
            (Lang::En, FilterProblem::UnknownGenre(v)) => {
                format!(
                    "This link asks for a genre Zenbu does not know (“{v}”): choose one in the form. The search did not run."
                )
            }
            (Lang::Es, FilterProblem::UnknownGenre(v)) => {
                format!(
                    "Este enlace pide un género que Zenbu no conoce («{v}»): elige uno en el formulario. La búsqueda no se hizo."
                )
            }
            (Lang::En, FilterProblem::BadYear(v)) => {
                format!("“{v}” is not a year from {first} to {last}. The search did not run.")
            }
            (Lang::Es, FilterProblem::BadYear(v)) => {
                format!("«{v}» no es un año entre {first} y {last}. La búsqueda no se hizo.")
            }
            (Lang::En, FilterProblem::YearsReversed { from, to }) => {
                format!("The years run backwards: from {from} to {to}. The search did not run.")
            }
            (Lang::Es, FilterProblem::YearsReversed { from, to }) => {
                format!("Los años están al revés: desde {from} hasta {to}. La búsqueda no se hizo.")
            }
        }
    }

    pub fn results_for(self, query: &str) -> String {
        match self {
            Lang::En => format!("Results for “{query}”"),
            Lang::Es => format!("Resultados para «{query}»"),
        }
    }

    pub fn results_timing(self, count: usize, ms: f64) -> String {
        match self {
            Lang::En => format!("{count} results in {ms:.0} ms"),
            Lang::Es => format!("{count} resultados en {ms:.0} ms"),
        }
    }

    /// The billing portal button of one of several Stripe customers.
    pub fn manage_billing_account(self, account: usize, of: usize) -> String {
        match self {
            Lang::En => format!("Manage billing (account {account} of {of})"),
            Lang::Es => format!("Gestionar facturación (cuenta {account} de {of})"),
        }
    }

    pub fn payment_failed(self, day: &str) -> String {
        match self {
            Lang::En => format!(
                "Your payment of {day} failed. Update your card in the billing portal to keep Premium."
            ),
            Lang::Es => format!(
                "Tu pago del {day} no se pudo cobrar. Actualiza tu tarjeta en el portal de facturación para seguir en Premium."
            ),
        }
    }

    pub fn score(self, score: i32) -> String {
        match self {
            Lang::En => format!("score {score}/100"),
            Lang::Es => format!("nota {score}/100"),
        }
    }

    /// An AniList season ("WINTER") in words.
    pub fn season(self, season: &str) -> String {
        let (en, es) = match season {
            "WINTER" => ("winter", "invierno"),
            "SPRING" => ("spring", "primavera"),
            "SUMMER" => ("summer", "verano"),
            "FALL" => ("fall", "otoño"),
            other => return other.to_lowercase(),
        };
        match self {
            Lang::En => en.into(),
            Lang::Es => es.into(),
        }
    }

    /// An AniList genre's name in this language (the value stays AniList's).
    pub fn genre(self, genre: &str) -> &str {
        if self == Lang::En {
            return genre;
        }
        match genre {
            "Action" => "Acción",
            "Adventure" => "Aventura",
            "Comedy" => "Comedia",
            "Drama" => "Drama",
            "Ecchi" => "Ecchi",
            "Fantasy" => "Fantasía",
            "Horror" => "Terror",
            "Mahou Shoujo" => "Chicas mágicas",
            "Mecha" => "Mecha",
            "Music" => "Música",
            "Mystery" => "Misterio",
            "Psychological" => "Psicológico",
            "Romance" => "Romance",
            "Sci-Fi" => "Ciencia ficción",
            "Slice of Life" => "Vida cotidiana",
            "Sports" => "Deportes",
            "Supernatural" => "Sobrenatural",
            "Thriller" => "Suspense",
            other => other,
        }
    }

    /// An AniList format code in words.
    pub fn format(self, code: &str) -> &'static str {
        match (self, code) {
            (_, "TV") => "TV",
            (Lang::En, "MOVIE") => "Movie",
            (Lang::Es, "MOVIE") => "Película",
            (_, "OVA") => "OVA",
            (_, "ONA") => "ONA",
            (Lang::En, "SPECIAL") => "Special",
            (Lang::Es, "SPECIAL") => "Especial",
            (Lang::En, "TV_SHORT") => "TV short",
            (Lang::Es, "TV_SHORT") => "TV corto",
            (Lang::En, "MUSIC") => "Music video",
            (Lang::Es, "MUSIC") => "Videoclip",
            _ => "",
        }
    }

    /// The message for an account form's `?notice=` code (what it just did).
    pub fn form_notice(self, code: &str) -> Option<&'static str> {
        let t = self.texts();
        Some(match code {
            "password-reset" => t.notice_password_reset,
            "password-changed" => t.notice_password_changed,
            "sessions-ended" => t.notice_sessions_ended,
            "account-deleted" => t.notice_account_deleted,
            "email-link-sent" => t.notice_email_link_sent,
            "email-changed" => t.notice_email_changed,
            _ => return None,
        })
    }

    /// The message for an account form's `?error=` code.
    pub fn form_error(self, code: &str) -> Option<&'static str> {
        let t = self.texts();
        Some(match code {
            "email" => t.error_email,
            "password-short" => t.error_password_short,
            "password-long" => t.error_password_long,
            "wrong" => t.error_wrong,
            "throttled" => t.error_throttled,
            "form" => t.error_form,
            "link" => t.error_link,
            "registered" => t.error_registered,
            "reset-link" => t.error_reset_link,
            "wrong-password" => t.error_wrong_password,
            "cannot-cancel" => t.error_cannot_cancel,
            "billing-off" => t.billing_off,
            "stripe" => t.error_stripe,
            _ => return None,
        })
    }
}

#[cfg(feature = "ssr")]
impl Lang {
    /// The language of a request with these headers (the server's handlers, and [`detect`]).
    pub fn of_request(headers: &http::HeaderMap) -> Self {
        // Repeated header lines joined as the header's own list: cookies by `;`, languages by `,`.
        let header = |name: http::HeaderName, separator: &str| {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect::<Vec<_>>()
                .join(separator)
        };
        let cookies = header(http::header::COOKIE, ";");
        let cookie = cookies.split(';').find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_string())
        });
        let accept = header(http::header::ACCEPT_LANGUAGE, ",");
        Lang::negotiate(
            cookie.as_deref(),
            Some(accept.as_str()).filter(|a| !a.is_empty()),
        )
    }
}

/// The language of the page being rendered (provided by [`crate::App`]).
pub fn use_lang() -> Lang {
    use_context::<Lang>().unwrap_or(Lang::En)
}

/// The language of this request (server) or of the page being hydrated (browser).
pub fn detect() -> Lang {
    #[cfg(feature = "ssr")]
    {
        use_context::<http::request::Parts>()
            .map(|parts| Lang::of_request(&parts.headers))
            .unwrap_or(Lang::En)
    }
    #[cfg(not(feature = "ssr"))]
    {
        document()
            .document_element()
            .and_then(|html| html.get_attribute("lang"))
            .and_then(|code| Lang::from_code(&code))
            .unwrap_or(Lang::En)
    }
}

/// Every fixed phrase of the interface.
pub struct Texts {
    pub site_title: &'static str,
    pub tagline: &'static str,
    pub nav_search: &'static str,
    pub nav_log_in: &'static str,
    pub nav_sign_up: &'static str,
    pub nav_language: &'static str,
    pub search_label: &'static str,
    pub search_placeholder: &'static str,
    pub search_button: &'static str,
    pub filters: &'static str,
    pub format: &'static str,
    pub any: &'static str,
    pub from_year: &'static str,
    pub to_year: &'static str,
    pub genre: &'static str,
    pub try_these: &'static str,
    pub searching: &'static str,
    pub no_results: &'static str,
    pub lexical_only: &'static str,
    pub fused_order: &'static str,
    pub search_failed: &'static str,
    pub empty_query: &'static str,
    /// A search link opened from another site: shown prefilled, not run.
    pub from_another_site: &'static str,
    /// A search page loaded ahead of time (a prefetch) or only for its headers: not run.
    pub not_requested: &'static str,
    pub branch_words: &'static str,
    pub branch_meaning: &'static str,
    pub branch_both: &'static str,
    pub branch_same_work: &'static str,
    pub branch_hint: &'static str,
    pub matched_title: &'static str,
    pub matched_words: &'static str,
    pub matched_passage: &'static str,
    /// The reason line when the closest passage is the part of the synopsis the card shows (marked).
    pub matched_passage_marked: &'static str,
    pub part_of: &'static str,
    pub used_all: &'static str,
    pub get_more_1: &'static str,
    pub get_more_link_account: &'static str,
    pub get_more_2: &'static str,
    pub get_more_3: &'static str,
    pub too_many_visitors: &'static str,
    pub back_to_search: &'static str,
    pub loading: &'static str,
    pub page_failed: &'static str,
    pub franchise: &'static str,
    pub similar: &'static str,
    pub nothing_similar: &'static str,
    pub genres: &'static str,
    pub themes: &'static str,
    pub also_known_as: &'static str,
    /// Under a synopsis Apertium translated.
    pub machine_translated: &'static str,
    /// Opens the synopsis as AniList has it.
    pub show_original: &'static str,
    /// The names past the first three of "also known as".
    pub more_names: &'static str,
    pub not_found_title: &'static str,
    pub not_found_text: &'static str,
    pub error_title: &'static str,
    pub error_text: &'static str,
    pub unavailable_title: &'static str,
    pub unavailable_text: &'static str,
    // Accounts
    pub sign_up_title: &'static str,
    pub sign_up_intro: &'static str,
    pub email: &'static str,
    pub password: &'static str,
    pub choose_password: &'static str,
    pub password_rules: &'static str,
    pub sign_up_button: &'static str,
    pub have_account: &'static str,
    pub check_mail_title: &'static str,
    pub check_mail_text: &'static str,
    pub confirm_title: &'static str,
    pub confirm_button: &'static str,
    pub log_in_title: &'static str,
    pub log_in_button: &'static str,
    pub no_account: &'static str,
    pub forgot_password_link: &'static str,
    pub forgot_title: &'static str,
    pub forgot_intro: &'static str,
    pub forgot_button: &'static str,
    pub reset_sent_text: &'static str,
    pub reset_title: &'static str,
    pub new_password: &'static str,
    pub reset_button: &'static str,
    pub notice_password_reset: &'static str,
    pub sessions_title: &'static str,
    pub session_started: &'static str,
    pub session_seen: &'static str,
    pub session_network: &'static str,
    pub session_this: &'static str,
    pub end_other_sessions: &'static str,
    pub notice_sessions_ended: &'static str,
    pub change_password_title: &'static str,
    pub current_password: &'static str,
    pub change_password_button: &'static str,
    pub notice_password_changed: &'static str,
    pub error_wrong_password: &'static str,
    pub delete_title: &'static str,
    pub delete_text: &'static str,
    pub delete_button: &'static str,
    pub notice_account_deleted: &'static str,
    pub error_cannot_cancel: &'static str,
    pub change_email_title: &'static str,
    pub new_email: &'static str,
    pub change_email_button: &'static str,
    pub notice_email_link_sent: &'static str,
    pub notice_email_changed: &'static str,
    pub confirm_email_title: &'static str,
    pub confirm_email_button: &'static str,
    pub account_title: &'static str,
    pub plan: &'static str,
    pub plan_free: &'static str,
    pub plan_premium: &'static str,
    pub searches: &'static str,
    pub log_out: &'static str,
    pub not_logged_in: &'static str,
    pub or: &'static str,
    pub sign_up_lower: &'static str,
    pub for_30: &'static str,
    // Premium
    pub premium_title: &'static str,
    pub premium_intro: &'static str,
    pub go_premium: &'static str,
    pub manage_billing: &'static str,
    pub billing_off: &'static str,
    pub log_in_to_go_premium: &'static str,
    pub you_are_premium: &'static str,
    pub thanks_title: &'static str,
    pub thanks_text: &'static str,
    pub see_account: &'static str,
    pub cancelled_title: &'static str,
    pub cancelled_text: &'static str,
    pub back_to_premium: &'static str,
    // Form errors
    pub error_email: &'static str,
    pub error_password_short: &'static str,
    pub error_password_long: &'static str,
    pub error_wrong: &'static str,
    pub error_throttled: &'static str,
    pub error_form: &'static str,
    pub error_link: &'static str,
    pub error_registered: &'static str,
    pub error_reset_link: &'static str,
    pub error_stripe: &'static str,
}

pub static EN: Texts = Texts {
    site_title: "Zenbu — find anime by description",
    tagline: "Find an anime from a description, not a title.",
    nav_search: "Search",
    nav_log_in: "Log in",
    nav_sign_up: "Sign up",
    nav_language: "Language",
    search_label: "Describe the anime you are looking for",
    search_placeholder: "a quiet story about someone who travels alone and helps people",
    search_button: "Search",
    filters: "Filters",
    format: "Format",
    any: "Any",
    from_year: "From year",
    to_year: "To year",
    genre: "Genre",
    try_these: "Try one of these",
    searching: "Searching…",
    no_results: "No anime matched",
    lexical_only: "Results without semantic ranking: only word matches were used this time.",
    fused_order: "Results in their first-pass order: the final ranking step did not answer in time.",
    search_failed: "Search failed on our side. Please try again in a moment.",
    empty_query: "Describe the anime you are looking for first.",
    from_another_site: "This search was opened from another site, so it has not run yet (it would count towards your searches). Press Search to run it.",
    not_requested: "This page was loaded ahead of time, so the search has not run yet (it would count towards your searches). Press Search to run it.",
    branch_words: "words",
    branch_meaning: "meaning",
    branch_both: "words + meaning",
    branch_same_work: "same work",
    branch_hint: "Which search found it",
    matched_title: "Title match:",
    matched_words: "Matching words:",
    matched_passage: "Closest passage:",
    matched_passage_marked: "Closest passage: marked above.",
    part_of: "Part of",
    used_all: "You have used all your searches",
    get_more_1: "For more, ",
    get_more_link_account: "create a free account",
    get_more_2: " (30 searches a month) or go ",
    get_more_3: " (200 a month). Browsing titles and “similar to” lists stays free.",
    too_many_visitors: "Too many new visitors from your network",
    back_to_search: "← Search",
    loading: "Loading…",
    page_failed: "This page could not be loaded. Please try again in a moment.",
    franchise: "The franchise, in order",
    similar: "Similar to this",
    nothing_similar: "Nothing similar found yet.",
    genres: "Genres:",
    themes: "Themes:",
    also_known_as: "Also known as:",
    machine_translated: "Machine-translated from English.",
    show_original: "Show the original (English)",
    more_names: "more",
    not_found_title: "Page not found",
    not_found_text: "There is nothing at this address. ",
    error_title: "Something went wrong",
    error_text: "This page failed on our side. Please try again in a moment.",
    unavailable_title: "Zenbu is briefly unavailable",
    unavailable_text: "We cannot reach our database right now. Nothing was counted; please try again in a minute.",
    sign_up_title: "Create a free account",
    sign_up_intro: "30 searches a month, free. We send a link to your address; you choose your password there.",
    email: "Email",
    password: "Password",
    choose_password: "Choose a password",
    password_rules: "8 to 128 characters.",
    sign_up_button: "Sign up",
    have_account: "Already have an account? ",
    check_mail_title: "Check your mail",
    check_mail_text: "We have sent a message to the address you gave. Open the link in it to choose your password and finish. The link works for 24 hours.",
    confirm_title: "Finish creating your account",
    confirm_button: "Create my account",
    log_in_title: "Log in",
    log_in_button: "Log in",
    no_account: "No account yet? ",
    forgot_password_link: "Forgot your password?",
    forgot_title: "Reset your password",
    forgot_intro: "Enter the address of your account and we will mail you a link to choose a new password.",
    forgot_button: "Mail me a link",
    reset_sent_text: "If that address has a Zenbu account, we have sent it a link to choose a new password. The link works once, for one hour.",
    reset_title: "Choose a new password",
    new_password: "New password",
    reset_button: "Set my password",
    notice_password_reset: "Your password is changed and every other session is signed out. Log in with the new password.",
    sessions_title: "Where you are signed in",
    session_started: "Signed in (UTC)",
    session_seen: "Last seen (UTC)",
    session_network: "Network",
    session_this: "this browser",
    end_other_sessions: "Sign out everywhere else",
    notice_sessions_ended: "Every other session is signed out.",
    change_password_title: "Change your password",
    current_password: "Current password",
    change_password_button: "Change password",
    notice_password_changed: "Your password is changed, and every other session is signed out.",
    error_wrong_password: "The current password is wrong.",
    delete_title: "Delete your account",
    delete_text: "Deletes the account and its data for good, and cancels Premium at once (no refund for the current period). Enter your password to confirm.",
    delete_button: "Delete my account",
    notice_account_deleted: "Your account is deleted.",
    error_cannot_cancel: "Your Premium subscription cannot be cancelled from this server right now, so the account was not deleted. Try again later.",
    change_email_title: "Change your address",
    new_email: "New address",
    change_email_button: "Send a link to the new address",
    notice_email_link_sent: "We have sent a link to the new address. Your address changes when you open it (it works for 24 hours).",
    notice_email_changed: "Your account uses the new address now.",
    confirm_email_title: "Confirm your new address",
    confirm_email_button: "Use this address",
    account_title: "Your account",
    plan: "Plan",
    plan_free: "Free",
    plan_premium: "Premium",
    searches: "Searches",
    log_out: "Log out",
    not_logged_in: "You are not logged in. ",
    or: " or ",
    sign_up_lower: "sign up",
    for_30: " for 30 searches a month.",
    premium_title: "Zenbu Premium",
    premium_intro: "200 searches a month instead of 30, for people who search a lot. Cancel any time.",
    go_premium: "Go Premium",
    manage_billing: "Manage billing",
    billing_off: "Billing is not configured on this server, so Premium cannot be bought here.",
    log_in_to_go_premium: " to go Premium.",
    you_are_premium: "You are Premium. Thank you!",
    thanks_title: "Thank you!",
    thanks_text: "Your payment went to Stripe. Your plan becomes Premium as soon as Stripe confirms it to us, usually within seconds.",
    see_account: "See your account",
    cancelled_title: "Checkout cancelled",
    cancelled_text: "Nothing was charged and your plan has not changed.",
    back_to_premium: "Back to Premium",
    error_email: "Enter an email address like name@example.com.",
    error_password_short: "The password must have at least 8 characters.",
    error_password_long: "The password must have at most 128 characters.",
    error_wrong: "Email or password is wrong.",
    error_throttled: "Too many attempts. Please wait a few minutes and try again.",
    error_form: "The form expired. Please try again.",
    error_link: "This link is unknown, already used or expired. Sign up again to get a new one.",
    error_registered: "This address already has an account. Log in instead.",
    error_reset_link: "This reset link is unknown, already used or expired. Ask for a new one below.",
    error_stripe: "The payment service did not answer. Nothing was charged; please try again in a moment.",
};

pub static ES: Texts = Texts {
    site_title: "Zenbu — encuentra anime por su descripción",
    tagline: "Encuentra un anime por lo que recuerdas de él, no por su título.",
    nav_search: "Buscar",
    nav_log_in: "Entrar",
    nav_sign_up: "Crear cuenta",
    nav_language: "Idioma",
    search_label: "Describe el anime que buscas",
    search_placeholder: "algo tranquilo, de alguien que viaja solo y ayuda a la gente",
    search_button: "Buscar",
    filters: "Filtros",
    format: "Formato",
    any: "Cualquiera",
    from_year: "Desde el año",
    to_year: "Hasta el año",
    genre: "Género",
    try_these: "Prueba con una de estas",
    searching: "Buscando…",
    no_results: "Ningún anime coincide",
    lexical_only: "Resultados sin orden semántico: esta vez solo se usaron coincidencias de palabras.",
    fused_order: "Resultados en su primer orden: el último paso de ordenación no respondió a tiempo.",
    search_failed: "La búsqueda falló por nuestra parte. Vuelve a intentarlo en un momento.",
    empty_query: "Primero describe el anime que buscas.",
    from_another_site: "Esta búsqueda se abrió desde otro sitio, así que aún no se ha hecho (contaría entre tus búsquedas). Pulsa Buscar para hacerla.",
    not_requested: "Esta página se cargó por adelantado, así que la búsqueda aún no se ha hecho (contaría entre tus búsquedas). Pulsa Buscar para hacerla.",
    branch_words: "palabras",
    branch_meaning: "significado",
    branch_both: "palabras + significado",
    branch_same_work: "misma obra",
    branch_hint: "Qué búsqueda lo encontró",
    matched_title: "Coincide el título:",
    matched_words: "Palabras que coinciden:",
    matched_passage: "Pasaje más cercano:",
    matched_passage_marked: "Pasaje más cercano: marcado arriba.",
    part_of: "Parte de",
    used_all: "Has usado todas tus búsquedas",
    get_more_1: "Para más, ",
    get_more_link_account: "crea una cuenta gratis",
    get_more_2: " (30 búsquedas al mes) o hazte ",
    get_more_3: " (200 al mes). Ver fichas y listas de «parecidos» sigue siendo gratis.",
    too_many_visitors: "Demasiados visitantes nuevos desde tu red",
    back_to_search: "← Buscar",
    loading: "Cargando…",
    page_failed: "No se pudo cargar esta página. Vuelve a intentarlo en un momento.",
    franchise: "La franquicia, en orden",
    similar: "Parecidos a este",
    nothing_similar: "Todavía no hay parecidos.",
    genres: "Géneros:",
    themes: "Temas:",
    also_known_as: "También conocido como:",
    machine_translated: "Traducción automática del inglés.",
    show_original: "Ver el original (en inglés)",
    more_names: "más",
    not_found_title: "Página no encontrada",
    not_found_text: "No hay nada en esta dirección. ",
    error_title: "Algo salió mal",
    error_text: "Esta página falló por nuestra parte. Vuelve a intentarlo en un momento.",
    unavailable_title: "Zenbu no está disponible por un momento",
    unavailable_text: "Ahora mismo no llegamos a nuestra base de datos. No se ha contado nada; vuelve a intentarlo en un minuto.",
    sign_up_title: "Crea una cuenta gratis",
    sign_up_intro: "30 búsquedas al mes, gratis. Te enviamos un enlace a tu correo; allí eliges tu contraseña.",
    email: "Correo electrónico",
    password: "Contraseña",
    choose_password: "Elige una contraseña",
    password_rules: "De 8 a 128 caracteres.",
    sign_up_button: "Crear cuenta",
    have_account: "¿Ya tienes cuenta? ",
    check_mail_title: "Revisa tu correo",
    check_mail_text: "Hemos enviado un mensaje a la dirección que diste. Abre el enlace que contiene para elegir tu contraseña y terminar. El enlace funciona durante 24 horas.",
    confirm_title: "Termina de crear tu cuenta",
    confirm_button: "Crear mi cuenta",
    log_in_title: "Entrar",
    log_in_button: "Entrar",
    no_account: "¿Aún no tienes cuenta? ",
    forgot_password_link: "¿Olvidaste tu contraseña?",
    forgot_title: "Restablece tu contraseña",
    forgot_intro: "Escribe la dirección de tu cuenta y te enviaremos un enlace para elegir una contraseña nueva.",
    forgot_button: "Enviarme un enlace",
    reset_sent_text: "Si esa dirección tiene una cuenta de Zenbu, le hemos enviado un enlace para elegir una contraseña nueva. El enlace funciona una vez, durante una hora.",
    reset_title: "Elige una contraseña nueva",
    new_password: "Contraseña nueva",
    reset_button: "Guardar mi contraseña",
    notice_password_reset: "Tu contraseña cambió y se cerraron todas las demás sesiones. Entra con la contraseña nueva.",
    sessions_title: "Dónde tienes la sesión abierta",
    session_started: "Inicio (UTC)",
    session_seen: "Última vez (UTC)",
    session_network: "Red",
    session_this: "este navegador",
    end_other_sessions: "Cerrar las demás sesiones",
    notice_sessions_ended: "Se cerraron todas las demás sesiones.",
    change_password_title: "Cambia tu contraseña",
    current_password: "Contraseña actual",
    change_password_button: "Cambiar la contraseña",
    notice_password_changed: "Tu contraseña cambió y se cerraron todas las demás sesiones.",
    error_wrong_password: "La contraseña actual no es correcta.",
    delete_title: "Borra tu cuenta",
    delete_text: "Borra la cuenta y sus datos para siempre, y cancela Premium en el acto (sin reembolso del periodo en curso). Escribe tu contraseña para confirmar.",
    delete_button: "Borrar mi cuenta",
    notice_account_deleted: "Tu cuenta está borrada.",
    error_cannot_cancel: "Ahora mismo no se puede cancelar tu suscripción Premium desde este servidor, así que la cuenta no se borró. Vuelve a intentarlo más tarde.",
    change_email_title: "Cambia tu dirección",
    new_email: "Dirección nueva",
    change_email_button: "Enviar un enlace a la dirección nueva",
    notice_email_link_sent: "Hemos enviado un enlace a la dirección nueva. Tu dirección cambia cuando lo abras (funciona durante 24 horas).",
    notice_email_changed: "Tu cuenta usa ahora la dirección nueva.",
    confirm_email_title: "Confirma tu nueva dirección",
    confirm_email_button: "Usar esta dirección",
    account_title: "Tu cuenta",
    plan: "Plan",
    plan_free: "Gratis",
    plan_premium: "Premium",
    searches: "Búsquedas",
    log_out: "Salir",
    not_logged_in: "No has entrado. ",
    or: " o ",
    sign_up_lower: "crea una cuenta",
    for_30: " para tener 30 búsquedas al mes.",
    premium_title: "Zenbu Premium",
    premium_intro: "200 búsquedas al mes en lugar de 30, para quien busca mucho. Cancela cuando quieras.",
    go_premium: "Hazte Premium",
    manage_billing: "Gestionar facturación",
    billing_off: "Los pagos no están configurados en este servidor, así que aquí no se puede comprar Premium.",
    log_in_to_go_premium: " para hacerte Premium.",
    you_are_premium: "Eres Premium. ¡Gracias!",
    thanks_title: "¡Gracias!",
    thanks_text: "Tu pago llegó a Stripe. Tu plan pasa a Premium en cuanto Stripe nos lo confirme, normalmente en segundos.",
    see_account: "Ver tu cuenta",
    cancelled_title: "Pago cancelado",
    cancelled_text: "No se ha cobrado nada y tu plan no ha cambiado.",
    back_to_premium: "Volver a Premium",
    error_email: "Escribe una dirección de correo como nombre@ejemplo.com.",
    error_password_short: "La contraseña debe tener al menos 8 caracteres.",
    error_password_long: "La contraseña debe tener como máximo 128 caracteres.",
    error_wrong: "El correo o la contraseña no son correctos.",
    error_throttled: "Demasiados intentos. Espera unos minutos y vuelve a intentarlo.",
    error_form: "El formulario caducó. Vuelve a intentarlo.",
    error_link: "Este enlace no existe, ya se usó o caducó. Regístrate de nuevo para recibir otro.",
    error_registered: "Esta dirección ya tiene cuenta. Entra con ella.",
    error_reset_link: "Este enlace para restablecer la contraseña no existe, ya se usó o caducó. Pide otro abajo.",
    error_stripe: "El servicio de pagos no respondió. No se ha cobrado nada; vuelve a intentarlo en un momento.",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_wins_then_accept_language_by_quality() {
        assert_eq!(Lang::negotiate(Some("es"), Some("en")), Lang::Es);
        assert_eq!(
            Lang::negotiate(Some("fr"), Some("es-MX,es;q=0.9")),
            Lang::Es
        );
        assert_eq!(
            Lang::negotiate(None, Some("fr-FR,es;q=0.8,en;q=0.5")),
            Lang::Es
        );
        assert_eq!(Lang::negotiate(None, Some("en;q=0.4,es;q=0.6")), Lang::Es);
        assert_eq!(Lang::negotiate(None, Some("es;q=0,en")), Lang::En);
        assert_eq!(Lang::negotiate(None, Some("de, fr")), Lang::En);
        assert_eq!(Lang::negotiate(None, None), Lang::En);
    }

    #[test]
    fn every_form_error_code_has_words_in_both_languages() {
        for code in [
            "email",
            "password-short",
            "password-long",
            "wrong",
            "throttled",
            "form",
            "link",
            "registered",
            "reset-link",
            "wrong-password",
            "cannot-cancel",
            "billing-off",
            "stripe",
        ] {
            for lang in Lang::ALL {
                assert!(
                    lang.form_error(code).is_some_and(|m| !m.is_empty()),
                    "{code}"
                );
            }
        }
        assert_eq!(Lang::Es.form_error("nope"), None);
    }
}
