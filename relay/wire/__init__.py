"""Wire models: the JSON bodies of the API, parsed once at the edge of the service.

They depend on pydantic only, so every layer may read them: the API parses and documents
them, the core converts them into domain values, the relay builds upstream bodies of them.
"""
