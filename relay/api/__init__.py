"""The HTTP layer both modes share: routing, authentication, reading bodies, HTTP errors,
middleware, the OpenAPI document, and the handlers every service has."""
