//! `GET /lang?to=es&back=/…`: the language switch. Remembers the choice in the `zenbu_lang`
//! cookie (a year; a preference, not a secret) and returns to the page it was clicked on.

use axum::{
    extract::Query,
    http::{HeaderValue, header},
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{ApiError, auth::local_path};
use app::i18n::{COOKIE, Lang};

#[derive(Deserialize)]
pub struct Switch {
    to: String,
    #[serde(default)]
    back: String,
}

pub async fn switch(Query(switch): Query<Switch>) -> Result<Response, ApiError> {
    let lang = Lang::from_code(&switch.to)
        .ok_or_else(|| ApiError::BadRequest(format!("unknown language {:?}", switch.to)))?;
    let cookie = cookie::Cookie::build((COOKIE, lang.code()))
        .path("/")
        .same_site(cookie::SameSite::Lax)
        .max_age(cookie::time::Duration::days(365))
        .build()
        .to_string();
    let mut response = Redirect::to(local_path(&switch.back, "/")).into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|error| ApiError::Internal(error.into()))?,
    );
    Ok(response)
}
