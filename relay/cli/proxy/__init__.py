"""The Unleash Proxy's environment on relay: ``relay proxy`` runs from the variables the
Proxy (npm ``@unleash/proxy``) read, unchanged."""
