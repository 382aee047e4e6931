"""Feature flags of the central service: their records, the operations the admin API, the
command line and the web page share, segments, and the client API's cached answers."""
