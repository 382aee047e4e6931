// The real Node SDK (unleash-client) started against a server for a test: reads a job as
// JSON on stdin ({url, key, appName, ...}), initialises the SDK and, after its first
// successful fetch, hands it to the script's `ready(client, job)`, then exits 0. Exit 3
// when it never synchronises. `options` are the script's own SDK options (or a function of
// the job that gives them).
const { initialize, InMemStorageProvider } = require('unleash-client');

exports.run = (name, options, ready) => {
  let input = '';
  process.stdin.on('data', (chunk) => {
    input += chunk;
  });
  process.stdin.on('end', () => {
    const job = JSON.parse(input);
    const client = initialize({
      url: job.url,
      appName: job.appName,
      instanceId: `${name}-${process.pid}`,
      customHeaders: { Authorization: job.key },
      refreshInterval: 60000,
      storageProvider: new InMemStorageProvider(),
      ...(typeof options === 'function' ? options(job) : options),
    });
    const timer = setTimeout(() => {
      process.stderr.write('the SDK did not synchronise in time\n');
      process.exit(3);
    }, job.timeoutMs || 30000);
    client.on('error', (error) => {
      process.stderr.write(`SDK error: ${error && error.message ? error.message : error}\n`);
    });
    client.once('synchronized', async () => {
      clearTimeout(timer);
      await ready(client, job);
      client.destroy();
      process.exit(0);
    });
  });
};
