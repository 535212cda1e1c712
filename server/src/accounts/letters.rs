//! The mails accounts send, in the visitor's language (the language of the page the request came
//! from). Each is a [`Letter`]: its text and HTML bodies are made from the same words.

use app::i18n::Lang;

use crate::mail::Letter;

fn letter(
    subject: &str,
    paragraphs: &[String],
    link: Option<(&str, String)>,
    footer: &str,
) -> Letter {
    Letter {
        subject: subject.to_string(),
        paragraphs: paragraphs.to_vec(),
        link: link.map(|(label, url)| (label.to_string(), url)),
        footer: Some(footer.to_string()),
    }
}

/// The link that finishes a sign-up.
pub fn sign_up_link(lang: Lang, url: String, hours: i32) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: finish creating your account",
            &[format!(
                "Open this link to choose your password and finish creating your Zenbu account \
                 (it works for {hours} hours):"
            )],
            Some(("Choose my password", url)),
            "If you did not ask for an account, you can ignore this message.",
        ),
        Lang::Es => letter(
            "Zenbu: termina de crear tu cuenta",
            &[format!(
                "Abre este enlace para elegir tu contraseña y terminar de crear tu cuenta de Zenbu \
                 (funciona durante {hours} horas):"
            )],
            Some(("Elegir mi contraseña", url)),
            "Si no pediste una cuenta, puedes ignorar este mensaje.",
        ),
    }
}

/// A sign-up asked for an address that already has an account.
pub fn already_registered(lang: Lang, public_url: &str) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: you already have an account",
            &[
                "Someone (maybe you) asked to create a Zenbu account for this address, which \
               already has one. Log in, or reset your password if you forgot it:"
                    .to_string(),
            ],
            Some(("Log in", format!("{public_url}/login"))),
            "If it was not you, you can ignore this message.",
        ),
        Lang::Es => letter(
            "Zenbu: ya tienes una cuenta",
            &[
                "Alguien (quizá tú) pidió crear una cuenta de Zenbu para esta dirección, que ya \
               tiene una. Entra con ella, o restablece tu contraseña si la olvidaste:"
                    .to_string(),
            ],
            Some(("Entrar", format!("{public_url}/login"))),
            "Si no fuiste tú, puedes ignorar este mensaje.",
        ),
    }
}

/// The link that sets a new password.
pub fn password_reset(lang: Lang, url: String) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: reset your password",
            &[
                "Open this link to choose a new password for your Zenbu account. It works once, \
               for one hour, and signs you out everywhere else."
                    .to_string(),
            ],
            Some(("Choose a new password", url)),
            "If you did not ask for this, ignore this message: your password stays as it is.",
        ),
        Lang::Es => letter(
            "Zenbu: restablece tu contraseña",
            &[
                "Abre este enlace para elegir una contraseña nueva para tu cuenta de Zenbu. \
               Funciona una vez, durante una hora, y cierra tu sesión en todos los demás sitios."
                    .to_string(),
            ],
            Some(("Elegir una contraseña nueva", url)),
            "Si no lo pediste, ignora este mensaje: tu contraseña no cambia.",
        ),
    }
}

/// The password of the account was changed (by a reset link or on the account page).
pub fn password_changed(lang: Lang, public_url: &str) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: your password was changed",
            &[
                "The password of your Zenbu account was just changed, and every other session \
               was signed out. If it was not you, reset it now:"
                    .to_string(),
            ],
            Some(("Reset my password", format!("{public_url}/password/forgot"))),
            "If it was you, there is nothing to do.",
        ),
        Lang::Es => letter(
            "Zenbu: tu contraseña cambió",
            &[
                "La contraseña de tu cuenta de Zenbu acaba de cambiar y se cerraron todas las \
               demás sesiones. Si no fuiste tú, restablécela ahora:"
                    .to_string(),
            ],
            Some((
                "Restablecer mi contraseña",
                format!("{public_url}/password/forgot"),
            )),
            "Si fuiste tú, no hace falta hacer nada.",
        ),
    }
}

/// The link that moves an account to a new address (sent to the new address).
pub fn email_change_link(lang: Lang, url: String) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: confirm your new address",
            &[
                "Open this link to make this the address of your Zenbu account (it works for \
               24 hours):"
                    .to_string(),
            ],
            Some(("Confirm this address", url)),
            "If you did not ask for this, ignore this message: nothing changes.",
        ),
        Lang::Es => letter(
            "Zenbu: confirma tu nueva dirección",
            &[
                "Abre este enlace para que esta sea la dirección de tu cuenta de Zenbu \
               (funciona durante 24 horas):"
                    .to_string(),
            ],
            Some(("Confirmar esta dirección", url)),
            "Si no lo pediste, ignora este mensaje: no cambia nada.",
        ),
    }
}

/// The account moved to another address (sent to the old one).
pub fn email_changed(lang: Lang, new_email: &str, public_url: &str) -> Letter {
    match lang {
        Lang::En => letter(
            "Zenbu: your account's address was changed",
            &[format!(
                "Your Zenbu account now uses the address {new_email}; mail no longer comes \
                 here. If it was not you, reset your password from the new address's mail, or \
                 write to us."
            )],
            Some(("Zenbu", public_url.to_string())),
            "If it was you, there is nothing to do.",
        ),
        Lang::Es => letter(
            "Zenbu: cambió la dirección de tu cuenta",
            &[format!(
                "Tu cuenta de Zenbu usa ahora la dirección {new_email}; el correo ya no llega \
                 aquí. Si no fuiste tú, escríbenos."
            )],
            Some(("Zenbu", public_url.to_string())),
            "Si fuiste tú, no hace falta hacer nada.",
        ),
    }
}

/// The account was deleted.
pub fn account_deleted(lang: Lang) -> Letter {
    match lang {
        Lang::En => Letter {
            subject: "Zenbu: your account is deleted".into(),
            paragraphs: vec![
                "Your Zenbu account and its data are deleted, and any Premium subscription was \
                 cancelled. Thank you for having used Zenbu."
                    .into(),
            ],
            link: None,
            footer: Some("If it was not you, reply to this message.".into()),
        },
        Lang::Es => Letter {
            subject: "Zenbu: tu cuenta está borrada".into(),
            paragraphs: vec![
                "Tu cuenta de Zenbu y sus datos están borrados, y se canceló cualquier \
                 suscripción Premium. Gracias por haber usado Zenbu."
                    .into(),
            ],
            link: None,
            footer: Some("Si no fuiste tú, responde a este mensaje.".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_letter_exists_in_both_languages_and_carries_its_link() {
        for lang in Lang::ALL {
            let letters = [
                sign_up_link(
                    lang,
                    "https://z.example/register/confirm?token=ab".into(),
                    24,
                ),
                already_registered(lang, "https://z.example"),
                password_reset(lang, "https://z.example/password/reset?token=cd".into()),
                password_changed(lang, "https://z.example"),
            ];
            for letter in &letters {
                let (_, url) = letter.link.as_ref().expect("a link");
                assert!(letter.text().contains(url.as_str()));
                assert!(
                    letter
                        .html()
                        .contains(&html_escape::encode_double_quoted_attribute(url).to_string())
                );
            }
        }
        assert_ne!(
            sign_up_link(Lang::En, "u".into(), 24).subject,
            sign_up_link(Lang::Es, "u".into(), 24).subject
        );
    }
}
