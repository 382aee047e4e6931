// Sends impact metrics with the real Node SDK (unleash-client): reads a job as JSON on stdin,
// {url, key, appName, rounds}; after the SDK's first fetch, each round increments a counter
// by 2, sets a gauge to the round's number and observes 0.3 in a histogram, then flushes
// the metrics (POST /api/client/metrics with impactMetrics). Exit 3 when it never synchronises.
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
    instanceId: `node-impact-${process.pid}`,
    customHeaders: { Authorization: job.key },
    refreshInterval: 60000,
    metricsInterval: 3600000,
    storageProvider: new InMemStorageProvider(),
  });
  const timer = setTimeout(() => {
    process.stderr.write('the SDK did not synchronise in time\n');
    process.exit(3);
  }, 30000);
  client.on('error', (error) => {
    process.stderr.write(`SDK error: ${error && error.message ? error.message : error}\n`);
  });
  client.once('synchronized', async () => {
    clearTimeout(timer);
    const metrics = client.impactMetrics;
    metrics.defineCounter('checkouts', 'Checkouts done');
    metrics.defineGauge('cart_size', 'Items in the cart');
    metrics.defineHistogram('latency', 'Checkout latency', [0.1, 0.5, 1]);
    for (let round = 1; round <= job.rounds; round += 1) {
      metrics.incrementCounter('checkouts', 2);
      metrics.updateGauge('cart_size', round);
      metrics.observeHistogram('latency', 0.3);
      await client.flushMetrics();
    }
    client.destroy();
    process.exit(0);
  });
});
