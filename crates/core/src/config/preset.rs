//! Presets: `routes[i].preset` names a sender, and the route gets that sender's usual
//! settings — a callback route, the sender's delivery id as the key, its signature scheme, and
//! the control messages that pass unguarded. Every field the route sets itself wins over the
//! preset's, so a preset is a starting point, never a cage.
//!
//! | preset              | key                                              | signature           |
//! |---------------------|--------------------------------------------------|---------------------|
//! | `standard-webhooks` | `webhook-id`                                     | `standard-webhooks` |
//! | `svix`              | `svix-id`                                        | `svix`              |
//! | `stripe`            | JSON `/id`                                       | `stripe`            |
//! | `github`            | `x-github-delivery`                              | `github`            |
//! | `shopify`           | `x-shopify-webhook-id`                           | `shopify`           |
//! | `slack`             | JSON `/event_id` (optional: `url_verification`)  | `slack`             |
//! | `cloudevents`       | (source, id), binary or structured mode          | none                |
//! | `pubsub-push`       | `/message/messageId`, else `x-goog-pubsub-message-id` | none (OIDC: jwt_authn) |
//! | `sns`               | JSON `/MessageId`; confirmations (`/Type`) pass  | none (X.509)        |
//!
//! A preset whose sender signs with a shared secret needs that secret (`signature.secret_env`
//! and friends): an unverified callback route would let anyone spend the sender's delivery ids.

use super::{
    item, refuse, KeyConfig, KeySourceConfig, PassThroughConfig, Refusal, RouteConfig,
    RouteKindConfig, SignatureSchemeConfig,
};
use alloc::string::String;
use alloc::vec::Vec;

/// A sender whose settings a route can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PresetConfig {
    StandardWebhooks,
    Svix,
    Stripe,
    GitHub,
    Shopify,
    Slack,
    CloudEvents,
    PubSubPush,
    Sns,
}

impl PresetConfig {
    /// The spelling in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            PresetConfig::StandardWebhooks => "standard-webhooks",
            PresetConfig::Svix => "svix",
            PresetConfig::Stripe => "stripe",
            PresetConfig::GitHub => "github",
            PresetConfig::Shopify => "shopify",
            PresetConfig::Slack => "slack",
            PresetConfig::CloudEvents => "cloudevents",
            PresetConfig::PubSubPush => "pubsub-push",
            PresetConfig::Sns => "sns",
        }
    }

    /// The sender's signature scheme, when it signs with a secret the edge can check. Pub/Sub
    /// push authenticates with an OIDC token (check it with Envoy's `jwt_authn` before idemgate)
    /// and SNS with an X.509 signature over a certificate it links to; neither is a shared secret.
    pub(crate) fn scheme(self) -> Option<SignatureSchemeConfig> {
        match self {
            PresetConfig::StandardWebhooks => Some(SignatureSchemeConfig::StandardWebhooks),
            PresetConfig::Svix => Some(SignatureSchemeConfig::Svix),
            PresetConfig::Stripe => Some(SignatureSchemeConfig::Stripe),
            PresetConfig::GitHub => Some(SignatureSchemeConfig::GitHub),
            PresetConfig::Shopify => Some(SignatureSchemeConfig::Shopify),
            PresetConfig::Slack => Some(SignatureSchemeConfig::Slack),
            PresetConfig::CloudEvents | PresetConfig::PubSubPush | PresetConfig::Sns => None,
        }
    }

    /// Where the sender puts the id that is the same on every retry of one delivery.
    fn key_from(self) -> Vec<KeySourceConfig> {
        let header = |name: &str| KeySourceConfig::Header(String::from(name));
        let json = |pointer: &str| KeySourceConfig::Json(String::from(pointer));
        match self {
            PresetConfig::StandardWebhooks => alloc::vec![header("webhook-id")],
            PresetConfig::Svix => alloc::vec![header("svix-id")],
            PresetConfig::Stripe => alloc::vec![json("/id")],
            PresetConfig::GitHub => alloc::vec![header("x-github-delivery")],
            // The delivery's id: the same on every retry, unlike `x-shopify-event-id`, which one
            // event shares across every subscription it triggers.
            PresetConfig::Shopify => alloc::vec![header("x-shopify-webhook-id")],
            PresetConfig::Slack => alloc::vec![json("/event_id")],
            PresetConfig::CloudEvents => alloc::vec![KeySourceConfig::CloudEvent],
            // Wrapped push carries the id in the JSON envelope, which is preferred; unwrapped
            // push only in a header (the body is the raw payload).
            PresetConfig::PubSubPush => alloc::vec![
                json("/message/messageId"),
                header("x-goog-pubsub-message-id")
            ],
            // The body's `MessageId`, which SNS signs; its `x-amz-sns-message-id` header is not
            // signed, so a captured message re-sent under a new header id would run again.
            PresetConfig::Sns => alloc::vec![json("/MessageId")],
        }
    }

    /// Slack's `url_verification` handshake carries no `event_id` and must reach the app; every
    /// other sender's delivery always has its id.
    fn key(self) -> KeyConfig {
        match self {
            PresetConfig::Slack => KeyConfig::Optional,
            _ => KeyConfig::Required,
        }
    }

    /// SNS subscription and unsubscribe confirmations: control messages, each to be seen by the
    /// subscriber, never deliveries to deduplicate. Told by the body's signed `Type`, never by
    /// the unsigned `x-amz-sns-message-type` header (a notification re-sent with that header set
    /// to a confirmation would pass unguarded).
    fn pass_through(self) -> Option<PassThroughConfig> {
        match self {
            PresetConfig::Sns => Some(PassThroughConfig {
                header: None,
                json: Some(String::from("/Type")),
                values: alloc::vec![
                    String::from("SubscriptionConfirmation"),
                    String::from("UnsubscribeConfirmation"),
                ],
            }),
            _ => None,
        }
    }

    /// Route `i` as written, with this preset's settings wherever the route leaves a field out.
    pub(super) fn fill(self, i: usize, route: &RouteConfig) -> Result<RouteConfig, Refusal> {
        if route.kind == Some(RouteKindConfig::Api) {
            return Err(refuse(
                item("routes", i, ".kind"),
                &["a preset makes a callback route; remove `kind` or the preset"],
            ));
        }
        let mut filled = route.clone();
        filled.kind = Some(RouteKindConfig::Callback);
        filled.key_from = route.key_from.clone().or_else(|| Some(self.key_from()));
        filled.key = route.key.or(Some(self.key()));
        filled.pass_through = route.pass_through.clone().or_else(|| self.pass_through());
        match (self.scheme(), &mut filled.signature) {
            (Some(scheme), Some(signature)) => {
                signature.scheme = signature.scheme.or(Some(scheme));
            }
            (Some(_), None) => {
                return Err(refuse(
                    item("routes", i, ".signature"),
                    &[
                        "preset `",
                        self.name(),
                        "` checks the sender's signature: give its secret as `signature.secret_env` (or `secret`, `secrets`, `secrets_env`)",
                    ],
                ))
            }
            (None, _) => {}
        }
        Ok(filled)
    }
}
