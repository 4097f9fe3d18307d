//! Who a request is for: the service's own auth decides, through a [`CustomerResolver`].

use http::Request;

/// The customer a request acts for, and the org whose overrides apply to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Customer {
    /// What is bucketed (`Bun.hash(id) % 100`), e.g. `cus_abc123`.
    pub id: String,
    /// The org; its override of a rollout wins over the global entry.
    pub org: Option<String>,
}

impl Customer {
    /// A customer without an org.
    pub fn new(id: impl Into<String>) -> Customer {
        Customer {
            id: id.into(),
            org: None,
        }
    }

    /// The same customer, in `org`.
    pub fn with_org(mut self, org: impl Into<String>) -> Customer {
        self.org = Some(org.into());
        self
    }
}

/// Finds the customer of a request, typically in extensions the service's auth middleware put
/// there, so [`crate::RolloutLayer`] must sit inside (after) that middleware.
///
/// `None` means an anonymous request: it still gets a [`crate::RolloutSnapshot`], with every
/// rollout off and nothing stale, so handlers can always extract one.
///
/// Any `Fn(&Request<B>) -> Option<Customer>` closure is a resolver.
pub trait CustomerResolver<B>: Send + Sync + 'static {
    fn resolve(&self, request: &Request<B>) -> Option<Customer>;
}

impl<B, F> CustomerResolver<B> for F
where
    F: Fn(&Request<B>) -> Option<Customer> + Send + Sync + 'static,
{
    fn resolve(&self, request: &Request<B>) -> Option<Customer> {
        self(request)
    }
}

/// The resolver for services whose auth inserts a [`Customer`] into the request extensions.
#[derive(Debug, Clone, Copy, Default)]
pub struct CustomerExtension;

impl<B> CustomerResolver<B> for CustomerExtension {
    fn resolve(&self, request: &Request<B>) -> Option<Customer> {
        request.extensions().get::<Customer>().cloned()
    }
}
