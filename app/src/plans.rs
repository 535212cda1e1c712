//! The plans, defined once: what each allows, over which calendar period, and the name
//! `users.plan` stores. The quota counts by them, the Stripe webhook and the reconciliation
//! write their stored names, and the pages show them. Premium's Stripe price is deployment
//! configuration (`STRIPE_PRICE_ID`), not code: the billing module pairs it with
//! [`Plan::Premium`].

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Plan {
    /// A visitor without an account (a signed cookie).
    Anonymous,
    Free,
    Premium,
}

/// What a plan gives.
struct Terms {
    /// Text searches per period.
    limit: i64,
    /// The calendar period the allowance covers, as `date_trunc` names it (UTC).
    period: &'static str,
    /// Its name in `users.plan` (the anonymous plan is no user's).
    stored: Option<&'static str>,
}

impl Plan {
    pub const ALL: [Plan; 3] = [Plan::Anonymous, Plan::Free, Plan::Premium];

    fn terms(self) -> Terms {
        match self {
            Plan::Anonymous => Terms {
                limit: 10,
                period: "year",
                stored: None,
            },
            Plan::Free => Terms {
                limit: 30,
                period: "month",
                stored: Some("free"),
            },
            Plan::Premium => Terms {
                limit: 200,
                period: "month",
                stored: Some("premium"),
            },
        }
    }

    /// Text searches per period.
    pub fn limit(self) -> i64 {
        self.terms().limit
    }

    /// The calendar period the allowance covers (a `date_trunc` field).
    pub fn period(self) -> &'static str {
        self.terms().period
    }

    /// Its name in `users.plan`; `None` for the anonymous plan.
    pub fn stored(self) -> Option<&'static str> {
        self.terms().stored
    }

    /// A user's plan as stored in `users.plan`. A name no plan has is an error, not Free: a
    /// plan added to the database before the code would otherwise be served silently wrong.
    pub fn from_stored(stored: &str) -> Result<Self, UnknownPlan> {
        Plan::ALL
            .into_iter()
            .find(|plan| plan.stored() == Some(stored))
            .ok_or_else(|| UnknownPlan(stored.to_string()))
    }
}

/// A `users.plan` value no plan has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPlan(pub String);

impl std::fmt::Display for UnknownPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown plan {:?} in users.plan", self.0)
    }
}

impl std::error::Error for UnknownPlan {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_read_back_and_unknown_ones_are_errors() {
        for plan in [Plan::Free, Plan::Premium] {
            assert_eq!(Plan::from_stored(plan.stored().unwrap()), Ok(plan));
        }
        assert_eq!(Plan::Anonymous.stored(), None);
        assert_eq!(
            Plan::from_stored("gold"),
            Err(UnknownPlan("gold".to_string()))
        );
        assert_eq!(
            Plan::from_stored("Premium").map_err(|e| e.to_string()),
            Err("unknown plan \"Premium\" in users.plan".to_string())
        );
        assert_eq!(
            Plan::ALL.map(Plan::limit),
            [10, 30, 200],
            "the brief's allowances"
        );
    }
}
