"""How ``relay serve`` runs as processes. Kept free of the application: the supervisor
imports only the standard library."""
