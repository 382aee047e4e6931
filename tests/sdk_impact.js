// Sends impact metrics with the real Node SDK: the job adds {rounds}; each round increments
// a counter by 2, sets a gauge to the round's number and observes 0.3 in a histogram, then
// flushes the metrics (POST /api/client/metrics with impactMetrics).
const { run } = require('./sdk_node');

run('node-impact', { metricsInterval: 3600000 }, async (client, job) => {
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
});
