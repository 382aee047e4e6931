// Starts a real Unleash server (npm unleash-server) for tests/e2e/test_flags_relay.py: its
// PostgreSQL database from UNLEASH_DB_*, its port from RELAY_PORT (set by tests/service.py),
// its keys from INIT_ADMIN_API_TOKENS and INIT_CLIENT_API_TOKENS (read by Unleash itself).
const unleash = require('unleash-server');

const env = process.env;
unleash
  .start({
    db: {
      host: env.UNLEASH_DB_HOST,
      port: Number(env.UNLEASH_DB_PORT),
      user: env.UNLEASH_DB_USER,
      password: env.UNLEASH_DB_PASSWORD,
      database: env.UNLEASH_DB_NAME,
      ssl: false,
    },
    server: { host: '127.0.0.1', port: Number(env.RELAY_PORT) },
  })
  .catch((error) => {
    process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
    process.exit(1);
  });
