//! The account forms' handlers: sign up, follow the emailed link, log in, log out, forgotten
//! passwords, and the local mailbox. Each answers with a 303 redirect (Post/Redirect/Get): to the next page on
//! success, back to the form with `?error=<code>` (see `app::account::form_error_message`)
//! otherwise. Every form carries the visitor's CSRF token; a missing or wrong one changes
//! nothing.

use app::i18n::Lang;
use axum::{
    Extension, Form, Json,
    extract::{Query, State},
    http::HeaderMap,
    response::Redirect,
};
use serde::Deserialize;
use tower_sessions::Session;

use super::{ApiError, AppState};
use crate::{
    accounts::{
        self, Confirmation, EmailChange, FormError, Reset, csrf, email::EmailError,
        network::ClientNetwork, password::PasswordError, visitor::Visitor,
    },
    mail,
};

/// The `?error=` code a refused form is sent back with.
fn code(error: FormError) -> &'static str {
    match error {
        FormError::Email(EmailError::Invalid) => "email",
        FormError::Password(PasswordError::TooShort) => "password-short",
        FormError::Password(PasswordError::TooLong) => "password-long",
        FormError::WrongCredentials => "wrong",
        FormError::WrongPassword => "wrong-password",
        FormError::Throttled(_) => "throttled",
    }
}

fn back_to(form: &str, code: &str) -> Redirect {
    Redirect::to(&format!("{form}?error={code}"))
}

/// `next` if it is a path on this site, else `fallback`: a redirect never leads to another site
/// (`//evil`, `/\evil`).
pub(super) fn local_path<'a>(next: &'a str, fallback: &'a str) -> &'a str {
    let safe = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && !next.chars().any(char::is_control);
    if safe { next } else { fallback }
}

fn token_ok(state: &AppState, visitor: &Visitor, submitted: &str) -> bool {
    csrf::verify(&state.site.visitors.key, &visitor.id, submitted)
}

/// For a form only a signed-in user may send: checks its token and finds the user; else where
/// to send the browser (back to `page` with `?error=form`, or to log in).
pub(super) async fn signed_in_user(
    state: &AppState,
    visitor: &Visitor,
    session: &Session,
    submitted: &str,
    page: &str,
) -> Result<Result<accounts::User, Redirect>, ApiError> {
    if !token_ok(state, visitor, submitted) {
        return Ok(Err(back_to(page, "form")));
    }
    match accounts::session_user(&state.db.primary, session).await? {
        Some(user) => Ok(Ok(user)),
        None => Ok(Err(Redirect::to(&format!("/login?next={page}")))),
    }
}

#[derive(Deserialize)]
pub struct SignUpForm {
    email: String,
    #[serde(default)]
    csrf: String,
}

pub async fn sign_up(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    headers: HeaderMap,
    Form(form): Form<SignUpForm>,
) -> Result<Redirect, ApiError> {
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(back_to("/register", "form"));
    }
    match accounts::request_sign_up(
        &state.db.primary,
        &form.email,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        Ok(()) => Ok(Redirect::to("/register/sent")),
        Err(error) => Ok(back_to("/register", code(error))),
    }
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    token: String,
    password: String,
    #[serde(default)]
    csrf: String,
}

pub async fn confirm(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    session: Session,
    Form(form): Form<ConfirmForm>,
) -> Result<Redirect, ApiError> {
    let again = |code: &str| {
        Redirect::to(&format!(
            "/register/confirm?token={}&error={code}",
            form.token
                .chars()
                .filter(char::is_ascii_hexdigit)
                .collect::<String>()
        ))
    };
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(again("form"));
    }
    match accounts::confirm_sign_up(&state.db.primary, &form.token, &form.password, &network.0)
        .await?
    {
        Confirmation::Created(user) => {
            accounts::start_session(&state.db.primary, &session, &user, &network.0).await?;
            tracing::info!(user = user.id, "account created");
            Ok(Redirect::to("/account"))
        }
        Confirmation::BadPassword(error) => Ok(again(code(FormError::Password(error)))),
        Confirmation::AlreadyRegistered => Ok(back_to("/login", "registered")),
        Confirmation::Invalid => Ok(back_to("/register", "link")),
        Confirmation::Throttled(minutes) => Ok(again(code(FormError::Throttled(minutes)))),
    }
}

#[derive(Deserialize)]
pub struct LogInForm {
    email: String,
    password: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf: String,
}

pub async fn log_in(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    session: Session,
    Form(form): Form<LogInForm>,
) -> Result<Redirect, ApiError> {
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(back_to("/login", "form"));
    }
    match accounts::log_in(&state.db.primary, &form.email, &form.password, &network.0).await? {
        Ok(user) => {
            accounts::start_session(&state.db.primary, &session, &user, &network.0).await?;
            Ok(Redirect::to(local_path(&form.next, "/account")))
        }
        Err(error) => Ok(back_to("/login", code(error))),
    }
}

#[derive(Deserialize)]
pub struct LogOutForm {
    #[serde(default)]
    csrf: String,
}

pub async fn log_out(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    session: Session,
    Form(form): Form<LogOutForm>,
) -> Result<Redirect, ApiError> {
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(back_to("/account", "form"));
    }
    accounts::end_session(&state.db.primary, &session).await?;
    Ok(Redirect::to("/"))
}

/// `POST /password/forgot`: mails a reset link when the address has an account; the same "check
/// your mail" page either way.
pub async fn forgot_password(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    headers: HeaderMap,
    Form(form): Form<SignUpForm>,
) -> Result<Redirect, ApiError> {
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(back_to("/password/forgot", "form"));
    }
    match accounts::request_password_reset(
        &state.db.primary,
        &form.email,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        Ok(()) => Ok(Redirect::to("/password/sent")),
        Err(error) => Ok(back_to("/password/forgot", code(error))),
    }
}

/// `POST /password/reset`: sets the new password a reset link was sent for, ends every session
/// of the account, and sends the visitor to log in with it.
pub async fn reset_password(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    headers: HeaderMap,
    Form(form): Form<ConfirmForm>,
) -> Result<Redirect, ApiError> {
    let again = |code: &str| {
        Redirect::to(&format!(
            "/password/reset?token={}&error={code}",
            form.token
                .chars()
                .filter(char::is_ascii_hexdigit)
                .collect::<String>()
        ))
    };
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(again("form"));
    }
    match accounts::reset_password(
        &state.db.primary,
        &form.token,
        &form.password,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        Reset::Done(_) => Ok(Redirect::to("/login?notice=password-reset")),
        Reset::BadPassword(error) => Ok(again(code(FormError::Password(error)))),
        Reset::Invalid => Ok(back_to("/password/forgot", "reset-link")),
        Reset::Throttled(minutes) => Ok(again(code(FormError::Throttled(minutes)))),
    }
}

#[derive(Deserialize)]
pub struct ChangePasswordForm {
    current: String,
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /account/password`: a signed-in user changes their password; their other sessions end.
pub async fn change_password(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<ChangePasswordForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/account").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    match accounts::change_password(
        &state.db.primary,
        &user,
        &session,
        &form.current,
        &form.password,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        Ok(()) => Ok(Redirect::to("/account?notice=password-changed")),
        Err(error) => Ok(back_to("/account", code(error))),
    }
}

#[derive(Deserialize)]
pub struct CsrfOnlyForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /account/sessions/end-others`: signs out every other session of the signed-in user.
pub async fn end_other_sessions(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    session: Session,
    Form(form): Form<CsrfOnlyForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/account").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    let ended = accounts::end_other_sessions(&state.db.primary, &user, &session).await?;
    tracing::info!(user = user.id, ended, "other sessions ended");
    Ok(Redirect::to("/account?notice=sessions-ended"))
}

#[derive(Deserialize)]
pub struct ChangeEmailForm {
    email: String,
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /account/email`: mails a confirmation link to the new address.
pub async fn change_email(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<ChangeEmailForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/account").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    match accounts::request_email_change(
        &state.db.primary,
        &user,
        &form.password,
        &form.email,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        Ok(()) => Ok(Redirect::to("/account?notice=email-link-sent")),
        Err(error) => Ok(back_to("/account", code(error))),
    }
}

#[derive(Deserialize)]
pub struct ConfirmEmailForm {
    token: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /account/email/confirm`: the form on the page the new address's link opens.
pub async fn confirm_email(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    headers: HeaderMap,
    Form(form): Form<ConfirmEmailForm>,
) -> Result<Redirect, ApiError> {
    if !token_ok(&state, &visitor, &form.csrf) {
        return Ok(back_to("/account", "form"));
    }
    match accounts::confirm_email_change(
        &state.db.primary,
        &form.token,
        &network.0,
        &state.site.public_url,
        Lang::of_request(&headers),
    )
    .await?
    {
        EmailChange::Done(user) => {
            // Stripe's customers get the new address too (receipts go there); when Stripe
            // fails, the change stands and the next reconciliation tries again.
            if let Some(billing) = &state.billing
                && let Err(error) = billing
                    .sync_customer_email(&state.db.primary, user.id)
                    .await
            {
                tracing::warn!(%error, user = user.id, "Stripe keeps the old address until the next reconciliation");
            }
            Ok(Redirect::to("/account?notice=email-changed"))
        }
        EmailChange::Taken => Ok(back_to("/account", "registered")),
        EmailChange::Invalid => Ok(back_to("/account", "link")),
        EmailChange::Throttled(minutes) => {
            Ok(back_to("/account", code(FormError::Throttled(minutes))))
        }
    }
}

#[derive(Deserialize)]
pub struct DeleteAccountForm {
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /account/delete`: with the password asked again, cancels the user's live Stripe
/// subscriptions (through Stripe; if that fails nothing is deleted), then deletes the account
/// and signs out.
pub async fn delete_account(
    State(state): State<AppState>,
    Extension(visitor): Extension<Visitor>,
    Extension(network): Extension<ClientNetwork>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<DeleteAccountForm>,
) -> Result<Redirect, ApiError> {
    let user = match signed_in_user(&state, &visitor, &session, &form.csrf, "/account").await? {
        Ok(user) => user,
        Err(redirect) => return Ok(redirect),
    };
    if let Err(error) =
        accounts::check_password(&state.db.primary, &user, &form.password, &network.0).await?
    {
        return Ok(back_to("/account", code(error)));
    }
    let live = crate::billing::live_subscriptions(&state.db.primary, user.id).await?;
    if !live.is_empty() {
        let Some(billing) = &state.billing else {
            // A subscription this server cannot cancel: deleting the account would leave it
            // charging someone who has no account to see it on.
            return Ok(back_to("/account", "cannot-cancel"));
        };
        if let Err(error) = billing
            .cancel_live_subscriptions(&state.db.primary, &user)
            .await
        {
            tracing::error!(%error, user = user.id, "cancelling before deleting the account failed");
            return Ok(back_to("/account", "stripe"));
        }
    }
    accounts::delete_user(&state.db.primary, &user, Lang::of_request(&headers)).await?;
    accounts::end_session(&state.db.primary, &session).await?;
    Ok(Redirect::to("/login?notice=account-deleted"))
}

#[derive(Deserialize)]
pub struct MailboxQuery {
    to: String,
}

/// `GET /dev/mail?to=…`: the newest mail queued for an address, for local runs and the browser
/// tests (only routed when `ZENBU_DEV_MAILBOX` is on: it would let anyone read sign-up links).
pub async fn dev_mailbox(
    State(state): State<AppState>,
    Query(query): Query<MailboxQuery>,
) -> Result<Json<Vec<mail::Mail>>, ApiError> {
    let to = accounts::email::normalise(&query.to)
        .map_err(|error| ApiError::BadRequest(error.to_string()))?;
    Ok(Json(mail::latest_for(&state.db.primary, &to, 20).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_log_in() {
        assert_eq!(local_path("/account", "/"), "/account");
        assert_eq!(local_path("/?q=mushishi", "/"), "/?q=mushishi");
        for outside in [
            "",
            "https://evil.example",
            "//evil.example",
            "/\\evil.example",
            "/\n",
        ] {
            assert_eq!(local_path(outside, "/account"), "/account", "{outside:?}");
        }
    }
}
