// Evaluates flags with the real Node SDK (unleash-client) against a server.
// Reads a job as JSON on stdin: {url, key, appName, checks: [{toggle, context, variant}]};
// prints one JSON value per check on stdout (isEnabled's boolean, or getVariant's object),
// after the SDK's first successful fetch. Exit 3 when it never synchronises.
const { initialize, InMemStorageProvider } = require('unleash-client');

let input = '';
process.stdin.on('data', (chunk) => {
  input += chunk;
});
process.stdin.on('end', () => {
  const job = JSON.parse(input);
  const client = initialize({
    url: job.url,
    appName: job.appName,
    instanceId: `node-eval-${process.pid}`,
    customHeaders: { Authorization: job.key },
    refreshInterval: 60000,
    disableMetrics: true,
    storageProvider: new InMemStorageProvider(),
  });
  const timer = setTimeout(() => {
    process.stderr.write('the SDK did not synchronise in time\n');
    process.exit(3);
  }, job.timeoutMs || 30000);
  client.on('error', (error) => {
    process.stderr.write(`SDK error: ${error && error.message ? error.message : error}\n`);
  });
  client.once('synchronized', () => {
    clearTimeout(timer);
    const lines = job.checks.map((check) =>
      JSON.stringify(
        check.variant
          ? client.getVariant(check.toggle, check.context)
          : client.isEnabled(check.toggle, check.context),
      ),
    );
    process.stdout.write(`${lines.join('\n')}\n`, () => {
      client.destroy();
      process.exit(0);
    });
  });
});
